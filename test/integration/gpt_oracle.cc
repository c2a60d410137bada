// gpt-oracle OUT.h5: a small GPT (train/models/gpt.h) at its initial parameters, one forward and
// backward pass on a random batch, everything written for gpt_oracle.py to redo in PyTorch:
// /model/<name> (parameters), /tokens and /targets uint8 [B, T], /logits [B*T, V], the loss
// (attribute), /grad/<name>; the configuration as attributes. Then three AdamW steps on the
// same batch (lr 1e-3, betas 0.9 and 0.95, weight decay 0.1 on matrices only), each after
// clipping the gradients to half the first gradient's global norm, as the trainer clips them:
// /adamw/<name>, the clip norm and each step's norm before clipping as attributes.
#include <hdf5.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/kernels.h"
#include "train/io/h5.h"
#include "train/models/gpt.h"
#include "train/steps/optimizer.h"

using namespace slurm_train;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gpt-oracle OUT.h5\n");
    return 2;
  }
  try {
    const std::string path = argv[1];
    const GptConfig config{64, 16, 2, 4, 32};
    const int B = 3, T = 12;
    auto kernels = kernels::make_cpu_kernels(1);
    Gpt gpt(config, *kernels);
    gpt_initialize(config, 7, gpt.params());
    std::vector<std::int32_t> tokens(B * T), targets(B * T);
    std::vector<std::uint8_t> tokens8(B * T), targets8(B * T);
    for (int i = 0; i < B * T; ++i) {
      tokens[i] = static_cast<std::int32_t>(kernels::mix64(11 + i) % config.vocab);
      targets[i] = static_cast<std::int32_t>(kernels::mix64(1000 + i) % config.vocab);
      tokens8[i] = static_cast<std::uint8_t>(tokens[i]);
      targets8[i] = static_cast<std::uint8_t>(targets[i]);
    }
    const double loss = gpt.forward(tokens.data(), targets.data(), B, T);
    gpt.backward();

    h5::Handle file = h5::create_file(path);
    h5::write_int64_list_attribute(file, "config",
                                   {config.vocab, config.block, config.layers, config.heads, config.embd}, path);
    h5::write_double_attribute(file, "loss", loss, path);
    h5::write_uint8(file, "/tokens", {B, T}, tokens8.data(), path);
    h5::write_uint8(file, "/targets", {B, T}, targets8.data(), path);
    h5::write_float32(file, "/logits", {static_cast<hsize_t>(B * T), static_cast<hsize_t>(config.vocab)},
                      gpt.logits().data(), path);
    for (const char* group : {"/model", "/grad"})
      h5::Handle(H5_CHECK(H5Gcreate2(file, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path + ":" + group));
    for (const auto& t : gpt.layout()) {
      const std::vector<hsize_t> shape(t.shape.begin(), t.shape.end());
      h5::write_float32(file, "/model/" + t.name, shape, gpt.params().data() + t.offset, path);
      h5::write_float32(file, "/grad/" + t.name, shape, gpt.grads().data() + t.offset, path);
    }
    OptimizerConfig adamw;
    adamw.kind = OptimizerKind::kAdamW;
    adamw.lr = 1e-3f;
    adamw.beta1 = 0.9f;
    adamw.beta2 = 0.95f;
    adamw.eps = 1e-8f;
    adamw.weight_decay = 0.1f;
    Optimizer optimizer(adamw, gpt_decay_layout(gpt.layout()), gpt.params().size());
    // Half the first norm: the clip binds on the first step at least, whatever the batch.
    const auto clip_norm =
        static_cast<float>(0.5 * std::sqrt(kernels->sum_of_squares(gpt.grads().size(), gpt.grads().data())));
    h5::write_double_attribute(file, "clip_norm", clip_norm, path);
    for (std::uint64_t step = 0; step < 3; ++step) {
      if (step > 0) {
        gpt.forward(tokens.data(), targets.data(), B, T);
        gpt.backward();
      }
      const double norm = clip_by_global_norm(*kernels, gpt.grads(), clip_norm);
      h5::write_double_attribute(file, "grad_norm_" + std::to_string(step), norm, path);
      optimizer.update(*kernels, gpt.params(), gpt.grads(), adamw.lr, step);
    }
    h5::Handle(H5_CHECK(H5Gcreate2(file, "/adamw", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path + ":/adamw"));
    for (const auto& t : gpt.layout()) {
      const std::vector<hsize_t> shape(t.shape.begin(), t.shape.end());
      h5::write_float32(file, "/adamw/" + t.name, shape, gpt.params().data() + t.offset, path);
    }
    std::printf("loss %.8f\n", loss);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpt-oracle: error: %s\n", e.what());
    return 1;
  }
}
