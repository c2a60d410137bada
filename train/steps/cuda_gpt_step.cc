// The GPT's training step on one GPU (see cuda_gpt_step.h). It follows Gpt::forward_sums and
// Gpt::backward (train/models/gpt.cc) pass for pass: when one changes, so must the other.
#if defined(SLURM_TRAIN_WITH_CUDA)
#include "train/steps/cuda_gpt_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/flash_attention.h"
#include "kernels/cuda/owned_stream.h"
#include "kernels/cuda/transformer_kernels.h"
#include "kernels/positions_by_token.h"
#include "train/models/model_layout.h"
#include "train/steps/device_optimizer.h"

namespace slurm_train {

namespace {

using cuda::bf16;
using cuda::DataType;
using cuda::DeviceBuffer;
using cuda::Epilogue;
using cuda::MatmulArgs;
using kernels::Activation;

// The tensors of one block, in layout order after wte and wpe (as train/models/gpt.cc's).
enum Block : std::size_t {
  kLn1W,
  kLn1B,
  kAttnW,
  kAttnB,
  kAttnProjW,
  kAttnProjB,
  kLn2W,
  kLn2B,
  kFcW,
  kFcB,
  kMlpProjW,
  kMlpProjB,
  kBlockTensors
};
constexpr std::size_t kWte = 0, kWpe = 1;
std::size_t block_tensor(int layer, Block b) { return 2 + static_cast<std::size_t>(layer) * kBlockTensors + b; }

// A product's operand: its fp32 values, and in bf16 precision the bf16 copy the product reads.
struct Operand {
  const float* f = nullptr;
  const bf16* h = nullptr;
};

}  // namespace

struct CudaGptStep::State {
  cuda::OwnedStream owned;  // first: destroyed last
  GptConfig g;
  CudaGptStepOptions o;
  ModelLayout model;
  std::vector<ParamTensor> tensors;
  bool half = false;
  bool flash = false;  // the tensor-core attention
  // bf16: the cross-entropy writes the logits' gradient in bf16 straight into y16, the operand
  // of the head's two backward products (fp32 dlogits is then never allocated), where cuBLASLt
  // takes those products' bf16 operands with the vocabulary as a leading dimension.
  bool half_dlogits = false;
  // bf16: GELU writes the MLP's activation in bf16 only (fch16; fch is never allocated), where
  // cuBLASLt takes the two products that read it with bf16 operands.
  bool half_gelu = false;
  // bf16: the LayerNorms write their outputs in bf16 only (ln1_16, ln2_16, lnf16; ln1, ln2 and lnf
  // are never allocated), where cuBLASLt takes every product that reads them with bf16 operands.
  bool half_ln = false;
  // bf16: GELU's backward pass writes the MLP's gradient in bf16 only (into y16, not back into
  // dwide), where cuBLASLt takes the two products that read it with bf16 operands.
  bool half_dwide = false;
  cudaStream_t stream = owned.stream();
  cudaEvent_t loss_ready = owned.event();
  std::unique_ptr<cuda::LtMatmul> lt;

  std::unique_ptr<DeviceOptimizer> optimizer;  // the parameters, their gradients and the update
  DeviceBuffer<std::int32_t> tokens, targets;
  // The batch's positions grouped by token, for the embedding's backward pass: built on the host
  // as each batch comes, then uploaded.
  kernels::PositionsByToken by_token;
  std::vector<std::int32_t> token_counts;
  DeviceBuffer<std::int32_t> token_list, token_starts, token_positions;
  // Activations of the last forward pass, per layer and for the ends (as Gpt's).
  DeviceBuffer<float> residual, ln1, ln1_mean, ln1_rstd, qkv, atty, lse, residual2, ln2, ln2_mean, ln2_rstd, fc, fch,
      lnf, lnf_mean, lnf_rstd, logits, dlogits;
  // Scratch of one pass.
  DeviceBuffer<float> projected, dropped, dres, dbranch, dln, datty, dwide, dqkv, attention_scratch, ln_scratch,
      sums_scratch, unused_dbias;
  // bf16: the activations' copies the forward products read, kept for the backward products
  // (cast once a step, not twice), as ln1, atty, ln2, fch and lnf; y16: a gradient's copy.
  DeviceBuffer<bf16> ln1_16, atty16, ln2_16, fch16, lnf16, y16;
  DeviceBuffer<float> row_loss;
  DeviceBuffer<int> row_hit;
  DeviceBuffer<double> loss_sum;
  DeviceBuffer<long long> hits;
  cuda::PinnedBuffer<double> host_loss;
  cuda::PinnedBuffer<long long> host_hits;
  int B = 0;                    // windows in the pass in flight
  bool backward_ready = false;  // the last pass was a training forward(): its activations are there
  float dropout = 0.0f;
  std::uint64_t first_window = 0;
  std::size_t last_logits = 0;

  std::size_t bt() const { return static_cast<std::size_t>(B) * static_cast<std::size_t>(g.block); }
  std::size_t offset(std::size_t t) const { return tensors[t].offset; }
  float* param(std::size_t t) { return optimizer->params() + offset(t); }
  float* grad(std::size_t t) { return optimizer->grads() + offset(t); }
  Operand weight(std::size_t t) { return {param(t), half ? optimizer->working() + offset(t) : nullptr}; }
  // An activation (or its gradient) of n values as a product's operand, cast into `copy` in bf16.
  Operand operand(const float* x, std::size_t n, bf16* copy) {
    if (!half) return {x, nullptr};
    cuda::cast(n, x, copy, stream);
    return {x, copy};
  }
  Operand operand(const float* x, std::size_t n, DeviceBuffer<bf16>& copy) { return operand(x, n, copy.data()); }
  // An activation the forward pass cast into `copy`, as the backward pass reads it.
  Operand kept(const float* x, const bf16* copy) const { return {x, half ? copy : nullptr}; }
  // Layer L's part of a bf16 copy of `per_layer` values a layer (nullptr in fp32).
  bf16* copy_of(DeviceBuffer<bf16>& copies, std::size_t L, std::size_t per_layer) {
    return half ? copies.data() + L * per_layer : nullptr;
  }

  // C[m, n] (fp32) = op(A) op(B) + beta C (+ bias[n]), row-major as kernels::Kernels::gemm.
  void product(bool ta, bool tb, int m, int n, int k, Operand a, int lda, Operand b, int ldb, float* c, int ldc,
               float beta = 0.0f, const float* bias = nullptr) {
    MatmulArgs args{
        ta,  tb, m,  n, k, half ? static_cast<const void*>(a.h) : a.f, lda, half ? static_cast<const void*>(b.h) : b.f,
        ldb, c,  ldc};
    args.ab_type = half ? DataType::kBF16 : DataType::kF32;
    args.c_type = DataType::kF32;
    args.beta = beta;
    if (half && !lt->supports(args)) {
      // bf16 operands with a leading dimension cuBLASLt takes no kernel for (a vocabulary of
      // 50257): this product in fp32.
      if (!a.f || !b.f)
        throw std::logic_error("CUDA gpt step: a bf16-only operand of a product cuBLASLt takes no bf16 kernel for");
      args.a = a.f, args.b = b.f, args.ab_type = DataType::kF32;
    }
    // The bias epilogue wants a 16-byte-aligned bias, which the packed layout gives only when
    // embd is a multiple of 4.
    if (bias && o.fuse_bias && reinterpret_cast<std::uintptr_t>(bias) % 16 == 0) {
      args.epilogue = Epilogue::kBias;
      args.bias = const_cast<float*>(bias);
      if (lt->supports(args)) return lt->run(args, stream);
      args.epilogue = Epilogue::kNone, args.bias = nullptr;
    }
    lt->run(args, stream);
    if (bias) cuda::bias_activation_forward<float>(Activation::kIdentity, m, n, bias, c, c, {}, stream);
  }

  // As Gpt::dropout_at: site 0 is the embeddings' sum, block l's attention branch 1 + 2l, its MLP 2 + 2l.
  kernels::DropoutParams dropout_at(std::size_t site) const {
    if (dropout <= 0.0f) return {};
    return {dropout, kernels::mix64(o.dropout_seed + 0x9e37 * (site + 1)),
            first_window * static_cast<std::uint64_t>(g.block)};
  }

  // x [rows, cols] (a gradient) as a product's operand, its column sums (a bias's gradient) into
  // sums: one pass over x, which also writes the operand's bf16 copy into y16. With gelu_input,
  // x is first taken through GELU's backward pass (in place), in the same pass.
  // Where half_dwide, GELU's gradient is written to the copy only (x keeps the gradient of its output).
  Operand summed_operand(int rows, int cols, float* x, float* sums, const float* gelu_input = nullptr) {
    bf16* copy = half ? y16.data() : nullptr;
    if (!gelu_input) {
      cuda::column_sums(rows, cols, x, sums, sums_scratch.data(), stream, copy);
      return {x, copy};
    }
    float* dx = half_dwide ? nullptr : x;
    cuda::gelu_backward_sums(rows, cols, gelu_input, x, dx, sums, sums_scratch.data(), stream, copy);
    return {dx, copy};
  }

  // The gradient d of site's branch through its dropout (into out) as a product's operand;
  // dbias = its column sums.
  Operand through_dropout(std::size_t site, float* d, float* out, float* dbias) {
    const int rows = static_cast<int>(bt()), C = g.embd;
    if (dropout <= 0.0f) return summed_operand(rows, C, d, dbias);
    cuda::activation_backward<float>(Activation::kIdentity, rows, C, d, d, out, dbias, dropout_at(site), stream);
    return operand(out, bt() * static_cast<std::size_t>(C), y16);
  }

  void upload_batch(const StepBatch& batch) {
    if (!batch.tokens || !batch.y) throw std::invalid_argument("CUDA gpt step: a batch without tokens or targets");
    backward_ready = false;
    if (batch.rows < 1 || batch.rows > o.max_rows)
      throw std::invalid_argument(
          fmt::format("CUDA gpt step: a batch of {} windows: expected 1 to max_rows {}", batch.rows, o.max_rows));
    const std::size_t n = static_cast<std::size_t>(batch.rows) * static_cast<std::size_t>(g.block);
    // As Gpt::forward_sums: the kernels read the rows a token names, so a bad one must not reach them.
    for (std::size_t i = 0; i < n; ++i)
      if (batch.tokens[i] < 0 || batch.tokens[i] >= g.vocab || batch.y[i] < 0 || batch.y[i] >= g.vocab)
        throw std::invalid_argument(
            fmt::format("gpt: token or target {} at position {} is outside the vocabulary [0, {})",
                        batch.tokens[i] < 0 || batch.tokens[i] >= g.vocab ? batch.tokens[i] : batch.y[i], i, g.vocab));
    CUDA_CHECK(cudaMemcpyAsync(tokens.data(), batch.tokens, n * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream));
    CUDA_CHECK(cudaMemcpyAsync(targets.data(), batch.y, n * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream));
    kernels::group_positions_by_token(batch.tokens, n, g.vocab, by_token, token_counts);
    const auto upload = [&](const std::vector<std::int32_t>& from, DeviceBuffer<std::int32_t>& to) {
      CUDA_CHECK(
          cudaMemcpyAsync(to.data(), from.data(), from.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream));
    };
    upload(by_token.tokens, token_list);
    upload(by_token.starts, token_starts);
    upload(by_token.positions, token_positions);
    B = batch.rows;
  }

  void forward(bool training, float loss_scale) {
    const int T = g.block, C = g.embd, V = g.vocab, H = g.heads, BT = static_cast<int>(bt());
    const std::size_t n = bt(), nc = n * C;
    if (dropout > 0.0f) {
      cuda::embedding_forward(B, T, C, tokens.data(), param(kWte), param(kWpe), projected.data(), stream);
      cuda::bias_activation_forward<float>(Activation::kIdentity, BT, C, nullptr, projected.data(), residual.data(),
                                           dropout_at(0), stream);
    } else {
      cuda::embedding_forward(B, T, C, tokens.data(), param(kWte), param(kWpe), residual.data(), stream);
    }
    const auto add_branch = [&](std::size_t site, const float* from, float* to) {
      const float* branch = projected.data();
      if (dropout > 0.0f) {
        cuda::bias_activation_forward<float>(Activation::kIdentity, BT, C, nullptr, projected.data(), dropped.data(),
                                             dropout_at(site), stream);
        branch = dropped.data();
      }
      cuda::residual_forward<float>(nc, from, branch, to, stream);
    };
    for (int l = 0; l < g.layers; ++l) {
      const std::size_t L = static_cast<std::size_t>(l);
      float* r = residual.data() + L * nc;
      float* a1 = half_ln ? nullptr : ln1.data() + L * nc;
      float* q = qkv.data() + L * nc * 3;
      float* y = atty.data() + L * nc;
      float* r2 = residual2.data() + L * nc;
      float* a2 = half_ln ? nullptr : ln2.data() + L * nc;
      float* f = fc.data() + L * nc * 4;
      float* fh = half_gelu ? nullptr : fch.data() + L * nc * 4;
      cuda::layernorm_forward(BT, C, r, param(block_tensor(l, kLn1W)), param(block_tensor(l, kLn1B)), a1,
                              ln1_mean.data() + L * n, ln1_rstd.data() + L * n, stream, copy_of(ln1_16, L, nc));
      product(false, false, BT, 3 * C, C, kept(a1, copy_of(ln1_16, L, nc)), C, weight(block_tensor(l, kAttnW)), 3 * C,
              q, 3 * C, 0.0f, param(block_tensor(l, kAttnB)));
      Operand attended;
      if (flash) {  // writes its bf16 copy too
        cuda::flash_attention_forward(B, T, C, H, q, y, lse.data() + L * n * H, stream, copy_of(atty16, L, nc));
        attended = kept(y, copy_of(atty16, L, nc));
      } else {
        cuda::attention_forward(B, T, C, H, q, y, lse.data() + L * n * H, stream);
        attended = operand(y, nc, copy_of(atty16, L, nc));
      }
      product(false, false, BT, C, C, attended, C, weight(block_tensor(l, kAttnProjW)), C, projected.data(), C, 0.0f,
              param(block_tensor(l, kAttnProjB)));
      add_branch(1 + 2 * L, r, r2);
      cuda::layernorm_forward(BT, C, r2, param(block_tensor(l, kLn2W)), param(block_tensor(l, kLn2B)), a2,
                              ln2_mean.data() + L * n, ln2_rstd.data() + L * n, stream, copy_of(ln2_16, L, nc));
      product(false, false, BT, 4 * C, C, kept(a2, copy_of(ln2_16, L, nc)), C, weight(block_tensor(l, kFcW)), 4 * C, f,
              4 * C, 0.0f, param(block_tensor(l, kFcB)));
      Operand gelu_out;
      if (half_gelu) {
        gelu_out = {nullptr, copy_of(fch16, L, nc * 4)};
        cuda::gelu_forward(nc * 4, f, copy_of(fch16, L, nc * 4), stream);
      } else {
        cuda::gelu_forward<float>(nc * 4, f, fh, stream);
        gelu_out = operand(fh, nc * 4, copy_of(fch16, L, nc * 4));
      }
      product(false, false, BT, C, 4 * C, gelu_out, 4 * C, weight(block_tensor(l, kMlpProjW)), C, projected.data(), C,
              0.0f, param(block_tensor(l, kMlpProjB)));
      add_branch(2 + 2 * L, r2, r + nc);
    }
    const std::size_t ln_f = tensors.size() - 2;
    float* final_norm = half_ln ? nullptr : lnf.data();
    cuda::layernorm_forward(BT, C, residual.data() + static_cast<std::size_t>(g.layers) * nc, param(ln_f),
                            param(ln_f + 1), final_norm, lnf_mean.data(), lnf_rstd.data(), stream,
                            copy_of(lnf16, 0, nc));
    // The head is tied to the token embedding: logits = lnf wte^T.
    product(false, true, BT, V, C, kept(final_norm, copy_of(lnf16, 0, nc)), C, weight(kWte), C, logits.data(), V);
    last_logits = n * V;
    if (training && half_dlogits)
      cuda::cross_entropy_forward_backward(BT, V, logits.data(), targets.data(), loss_scale, y16.data(),
                                           row_loss.data(), loss_sum.data(), stream, {row_hit.data(), hits.data()});
    else
      cuda::cross_entropy_forward_backward(BT, V, logits.data(), targets.data(), loss_scale,
                                           training ? dlogits.data() : nullptr, row_loss.data(), loss_sum.data(),
                                           stream, {row_hit.data(), hits.data()});
    CUDA_CHECK(cudaMemcpyAsync(host_loss.data(), loss_sum.data(), sizeof(double), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaMemcpyAsync(host_hits.data(), hits.data(), sizeof(long long), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaEventRecord(loss_ready, stream));
  }

  void backward() {
    const int T = g.block, C = g.embd, V = g.vocab, H = g.heads, BT = static_cast<int>(bt());
    const std::size_t n = bt(), nc = n * C;
    const auto bytes = [](std::size_t count) { return count * sizeof(float); };
    CUDA_CHECK(cudaMemsetAsync(optimizer->grads(), 0, bytes(model.parameters()), stream));
    CUDA_CHECK(cudaMemsetAsync(dres.data(), 0, bytes(nc), stream));
    const auto done = [&](std::size_t first, std::size_t last) {  // tensors [first, last], highest first
      for (std::size_t i = last + 1; i-- > first;) optimizer->unit_done(i);
    };
    const std::size_t ln_f = tensors.size() - 2;
    // Through the tied head and the final LayerNorm (which adds into dres).
    const Operand dz = half_dlogits ? Operand{nullptr, y16.data()} : operand(dlogits.data(), n * V, y16);
    product(false, false, BT, C, V, dz, V, weight(kWte), C, dln.data(), C);
    const float* final_norm = half_ln ? nullptr : lnf.data();
    product(true, false, V, C, BT, dz, V, kept(final_norm, copy_of(lnf16, 0, nc)), C, grad(kWte), C);
    cuda::layernorm_backward(BT, C, residual.data() + static_cast<std::size_t>(g.layers) * nc, param(ln_f),
                             lnf_mean.data(), lnf_rstd.data(), dln.data(), dres.data(), grad(ln_f), grad(ln_f + 1),
                             ln_scratch.data(), stream);
    done(ln_f, ln_f + 1);
    for (int l = g.layers - 1; l >= 0; --l) {
      const std::size_t L = static_cast<std::size_t>(l);
      const float* r = residual.data() + L * nc;
      const float* a1 = half_ln ? nullptr : ln1.data() + L * nc;
      const float* q = qkv.data() + L * nc * 3;
      const float* y = atty.data() + L * nc;
      const float* r2 = residual2.data() + L * nc;
      const float* a2 = half_ln ? nullptr : ln2.data() + L * nc;
      const float* f = fc.data() + L * nc * 4;
      const float* fh = half_gelu ? nullptr : fch.data() + L * nc * 4;
      // The MLP: out = r2 + c_proj(gelu(c_fc(ln_2(r2)))); dres is the gradient of out.
      const Operand dmlp = through_dropout(2 + 2 * L, dres.data(), dbranch.data(), grad(block_tensor(l, kMlpProjB)));
      product(true, false, 4 * C, C, BT, kept(fh, copy_of(fch16, L, nc * 4)), 4 * C, dmlp, C,
              grad(block_tensor(l, kMlpProjW)), C);
      product(false, true, BT, 4 * C, C, dmlp, C, weight(block_tensor(l, kMlpProjW)), C, dwide.data(), 4 * C);
      // GELU's gradient and the bias gradient, chunk-parallel (one activation_backward walks each
      // column serially: a few dozen blocks at this width).
      const Operand dw = summed_operand(BT, 4 * C, dwide.data(), grad(block_tensor(l, kFcB)), f);
      product(true, false, C, 4 * C, BT, kept(a2, copy_of(ln2_16, L, nc)), C, dw, 4 * C, grad(block_tensor(l, kFcW)),
              4 * C);
      product(false, true, BT, C, 4 * C, dw, 4 * C, weight(block_tensor(l, kFcW)), 4 * C, dln.data(), C);
      // dres += ln_2's part: the gradient of r2, through both its uses.
      cuda::layernorm_backward(BT, C, r2, param(block_tensor(l, kLn2W)), ln2_mean.data() + L * n,
                               ln2_rstd.data() + L * n, dln.data(), dres.data(), grad(block_tensor(l, kLn2W)),
                               grad(block_tensor(l, kLn2B)), ln_scratch.data(), stream);
      // Attention: r2 = r + c_proj(attention(c_attn(ln_1(r)))).
      const Operand dattn = through_dropout(1 + 2 * L, dres.data(), dbranch.data(), grad(block_tensor(l, kAttnProjB)));
      product(true, false, C, C, BT, kept(y, copy_of(atty16, L, nc)), C, dattn, C, grad(block_tensor(l, kAttnProjW)),
              C);
      product(false, true, BT, C, C, dattn, C, weight(block_tensor(l, kAttnProjW)), C, datty.data(), C);
      if (flash) {  // writes all of dqkv
        cuda::flash_attention_backward(B, T, C, H, q, y, datty.data(), lse.data() + L * n * H, dqkv.data(),
                                       attention_scratch.data(), stream);
      } else {  // adds to it
        CUDA_CHECK(cudaMemsetAsync(dqkv.data(), 0, bytes(nc * 3), stream));
        cuda::attention_backward(B, T, C, H, q, y, datty.data(), lse.data() + L * n * H, dqkv.data(),
                                 attention_scratch.data(), stream);
      }
      const Operand dq = summed_operand(BT, 3 * C, dqkv.data(), grad(block_tensor(l, kAttnB)));
      product(true, false, C, 3 * C, BT, kept(a1, copy_of(ln1_16, L, nc)), C, dq, 3 * C, grad(block_tensor(l, kAttnW)),
              3 * C);
      product(false, true, BT, C, 3 * C, dq, 3 * C, weight(block_tensor(l, kAttnW)), 3 * C, dln.data(), C);
      cuda::layernorm_backward(BT, C, r, param(block_tensor(l, kLn1W)), ln1_mean.data() + L * n,
                               ln1_rstd.data() + L * n, dln.data(), dres.data(), grad(block_tensor(l, kLn1W)),
                               grad(block_tensor(l, kLn1B)), ln_scratch.data(), stream);
      done(block_tensor(l, kLn1W), block_tensor(l, kMlpProjB));
    }
    if (dropout > 0.0f)
      cuda::activation_backward<float>(Activation::kIdentity, BT, C, dres.data(), dres.data(), dres.data(),
                                       unused_dbias.data(), dropout_at(0), stream);
    const cuda::TokenPositions positions{token_list.data(), token_starts.data(), token_positions.data(),
                                         static_cast<int>(by_token.tokens.size())};
    cuda::embedding_backward(B, T, C, positions, dres.data(), grad(kWte), grad(kWpe), stream);
    done(kWte, kWpe);
  }

  StepLoss wait_loss() {
    CUDA_CHECK(cudaEventSynchronize(loss_ready));
    return {host_loss.data()[0], host_hits.data()[0]};
  }

  std::vector<float> download(const DeviceBuffer<float>& from, std::size_t count) {
    std::vector<float> out(count);
    CUDA_CHECK(cudaMemcpyAsync(out.data(), from.data(), count * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    return out;
  }
};

CudaGptStep::CudaGptStep(const GptConfig& config, const OptimizerConfig& optimizer, const CudaGptStepOptions& options,
                         std::span<const float> initial_parameters)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.g = config, s.o = options;
  s.tensors = gpt_layout(config);  // checks the shape
  s.model = gpt_model_layout(config);
  const std::size_t n = s.model.parameters();
  if (initial_parameters.size() != n)
    throw std::invalid_argument(
        fmt::format("CUDA gpt step: {} initial parameters for a model of {}", initial_parameters.size(), n));
  if (config.embd / config.heads > cuda::kMaxAttentionHeadSize)
    throw std::invalid_argument(
        fmt::format("CUDA gpt step: embd {} over {} heads is a head size of {}: the attention "
                    "kernels take at most {}",
                    config.embd, config.heads, config.embd / config.heads, cuda::kMaxAttentionHeadSize));
  if (options.max_rows < 1)
    throw std::invalid_argument(fmt::format("CUDA gpt step: max_rows {}: expected at least 1", options.max_rows));
  if (!(options.dropout >= 0.0f && options.dropout < 1.0f))
    throw std::invalid_argument(
        fmt::format("CUDA gpt step: dropout {}: expected a probability in [0, 1)", options.dropout));
  s.half = options.precision == cuda::Precision::kBf16;
  s.flash = s.half && options.flash_attention && cuda::flash_attention_supported(config.embd, config.heads);
  s.lt = std::make_unique<cuda::LtMatmul>(options.precision == cuda::Precision::kTf32, options.deterministic);

  // The packed layout on the device too; each tensor a unit of the gradient buckets.
  s.optimizer = std::make_unique<DeviceOptimizer>(optimizer, packed_device_parameters(s.model.layers, s.tensors),
                                                  s.half, s.stream, initial_parameters);

  const std::size_t rows = static_cast<std::size_t>(options.max_rows), T = static_cast<std::size_t>(config.block),
                    C = static_cast<std::size_t>(config.embd), L = static_cast<std::size_t>(config.layers),
                    H = static_cast<std::size_t>(config.heads), V = static_cast<std::size_t>(config.vocab);
  const std::size_t bt = rows * T, nc = bt * C;
  s.tokens.resize(bt), s.targets.resize(bt);
  s.token_list.resize(bt), s.token_starts.resize(bt + 1), s.token_positions.resize(bt);
  if (s.half) {
    // Products as forward() and backward() run them, with bf16 operands, where an fp32 copy of an
    // operand can be spared if cuBLASLt takes them all: the head's (the vocabulary the leading
    // dimension), those that read the LayerNorms' outputs, GELU's output (4 C) and its gradient.
    // cuBLASLt's choice depends on the operands' alignment: `a_offset` and `b_offset` are the bytes
    // from an allocation (256-byte aligned) to the operands. A per-layer copy's layer l part starts
    // l B T C values on, for the B windows of the pass (fewer than max_rows in an evaluation's
    // last slice): T C values (layer 1, one window) is the least aligned of them. A weight is
    // checked at every layer's offset.
    const auto bf16_product = [&](bool ta, bool tb, int m, int n, int k, int lda, int ldb, std::size_t a_offset,
                                  std::size_t b_offset) {
      MatmulArgs args{
          ta,  tb,      m, n, k, reinterpret_cast<const void*>(a_offset), lda, reinterpret_cast<const void*>(b_offset),
          ldb, nullptr, n};
      args.ab_type = DataType::kBF16, args.c_type = DataType::kF32;
      return s.lt->supports(args);
    };
    const auto every_layer = [&](Block weight, const auto& product_with_weight_at) {
      for (int l = 0; l < config.layers; ++l)
        if (!product_with_weight_at(s.tensors[block_tensor(l, weight)].offset * sizeof(bf16))) return false;
      return true;
    };
    const int BT = static_cast<int>(bt), Vi = static_cast<int>(V), Ci = static_cast<int>(C);
    const std::size_t part = T * C * sizeof(bf16), wide_part = 4 * part;
    const bool head_grad = bf16_product(true, false, Vi, Ci, BT, Vi, Ci, 0, 0);          // dz^T lnf
    s.half_dlogits = head_grad && bf16_product(false, false, BT, Ci, Vi, Vi, Ci, 0, 0);  // dz wte
    s.half_gelu = bf16_product(true, false, 4 * Ci, Ci, BT, 4 * Ci, Ci, wide_part, 0) &&
                  every_layer(kMlpProjW, [&](std::size_t w) {
                    return bf16_product(false, false, BT, Ci, 4 * Ci, 4 * Ci, Ci, wide_part, w);
                  });
    const bool fc_grad = bf16_product(true, false, Ci, 4 * Ci, BT, Ci, 4 * Ci, part, 0);  // ln_2^T dw
    s.half_ln =
        head_grad && fc_grad && bf16_product(false, true, BT, Vi, Ci, Ci, Ci, 0, 0) &&
        bf16_product(true, false, Ci, 3 * Ci, BT, Ci, 3 * Ci, part, 0) &&
        every_layer(kAttnW,
                    [&](std::size_t w) { return bf16_product(false, false, BT, 3 * Ci, Ci, Ci, 3 * Ci, part, w); }) &&
        every_layer(kFcW,
                    [&](std::size_t w) { return bf16_product(false, false, BT, 4 * Ci, Ci, Ci, 4 * Ci, part, w); });
    s.half_dwide = fc_grad && every_layer(kFcW, [&](std::size_t w) {
                     return bf16_product(false, true, BT, Ci, 4 * Ci, 4 * Ci, 4 * Ci, 0, w);
                   });
  }
  s.residual.resize((L + 1) * nc);
  for (auto* b : {&s.atty, &s.residual2}) b->resize(L * nc);
  if (!s.half_ln) s.ln1.resize(L * nc), s.ln2.resize(L * nc), s.lnf.resize(nc);
  for (auto* b : {&s.ln1_mean, &s.ln1_rstd, &s.ln2_mean, &s.ln2_rstd}) b->resize(L * bt);
  s.qkv.resize(L * nc * 3);
  s.lse.resize(L * bt * H);
  s.fc.resize(L * nc * 4);
  s.lnf_mean.resize(bt), s.lnf_rstd.resize(bt);
  if (!s.half_gelu) s.fch.resize(L * nc * 4);
  s.logits.resize(bt * V);
  if (!s.half_dlogits) s.dlogits.resize(bt * V);
  for (auto* b : {&s.projected, &s.dres, &s.dbranch, &s.dln, &s.datty}) b->resize(nc);
  if (options.dropout > 0.0f) s.dropped.resize(nc), s.unused_dbias.resize(C);
  s.dwide.resize(nc * 4), s.dqkv.resize(nc * 3);
  s.attention_scratch.resize(s.flash ? cuda::flash_attention_backward_scratch_floats(
                                           static_cast<int>(rows), static_cast<int>(T), static_cast<int>(H))
                                     : bt * H);
  s.ln_scratch.resize(cuda::layernorm_backward_scratch_floats(static_cast<int>(bt), static_cast<int>(C)));
  s.sums_scratch.resize(cuda::column_sums_scratch_floats(static_cast<int>(bt), static_cast<int>(4 * C)));
  if (s.half) {
    for (auto* b : {&s.ln1_16, &s.atty16, &s.ln2_16}) b->resize(L * nc);
    s.fch16.resize(L * nc * 4), s.lnf16.resize(nc);
    s.y16.resize(std::max(bt * V, nc * 4));  // the widest gradient: dlogits
  }
  s.row_loss.resize(bt), s.row_hit.resize(bt), s.loss_sum.resize(1), s.hits.resize(1);
  s.host_loss.resize(1), s.host_hits.resize(1);
}

CudaGptStep::~CudaGptStep() {
  // The queued work before the buffers it uses are freed; the stream itself goes last (State).
  if (s_) cudaStreamSynchronize(s_->stream);
}

cudaStream_t CudaGptStep::stream() const { return s_->stream; }

void CudaGptStep::reduce_gradients_with(Comm& comm, bool shard_optimizer) {
  s_->optimizer->reduce_with(comm, s_->o.bucket_mb, shard_optimizer);
}

std::size_t CudaGptStep::optimizer_state_bytes() const { return s_->optimizer->state_bytes(); }

void CudaGptStep::forward(const StepBatch& batch) {
  State& s = *s_;
  s.upload_batch(batch);
  s.dropout = s.o.dropout;
  s.first_window = batch.first_row;
  s.forward(true, s.o.loss_scale);
  s.backward_ready = true;
}

void CudaGptStep::backward() {
  if (!s_->backward_ready) throw std::logic_error("CUDA gpt step: backward() without a training forward() before it");
  s_->backward();
}

StepLoss CudaGptStep::local_loss() { return s_->wait_loss(); }

void CudaGptStep::finish_gradients() { s_->optimizer->finish_gradients(); }

double CudaGptStep::clip_gradients() { return s_->optimizer->clip(); }

void CudaGptStep::update(float lr, std::uint64_t step) { s_->optimizer->update(lr, step); }

void CudaGptStep::train_step(const StepBatch& batch, float lr, std::uint64_t step) {
  forward(batch);
  backward();
  finish_gradients();
  s_->optimizer->queue_clip(false);
  update(lr, step);
}

StepLoss CudaGptStep::evaluate(const StepBatch& batch) {
  State& s = *s_;
  const std::size_t T = static_cast<std::size_t>(s.g.block);
  StepLoss sums;
  // In slices of max_rows windows, the most the activations hold; no dropout, no gradient.
  for (int begin = 0; begin < batch.rows; begin += s.o.max_rows) {
    const int rows = std::min(s.o.max_rows, batch.rows - begin);
    const std::size_t at = static_cast<std::size_t>(begin) * T;
    s.upload_batch(
        {nullptr, batch.y + at, rows, batch.first_row + static_cast<std::uint64_t>(begin), batch.tokens + at});
    s.dropout = 0.0f;
    s.forward(false, 1.0f);
    const StepLoss part = s.wait_loss();
    sums.loss_sum += part.loss_sum;
    sums.correct += part.correct;
  }
  return sums;
}

const ModelLayout& CudaGptStep::model_layout() const { return s_->model; }

HostState CudaGptStep::host_state() { return s_->optimizer->host_state(); }

void CudaGptStep::state_to_host() { s_->optimizer->state_to_host(); }

void CudaGptStep::state_from_host() { s_->optimizer->state_from_host(); }

bool CudaGptStep::state_sharded() const { return s_->optimizer->sharded(); }

void CudaGptStep::shard_to_host() { s_->optimizer->shard_to_host(); }

std::optional<StateShard> CudaGptStep::state_shard() { return s_->optimizer->state_shard(); }

std::vector<float> CudaGptStep::logits() { return s_->download(s_->logits, s_->last_logits); }

std::vector<float> CudaGptStep::gradients() { return s_->optimizer->gradients(); }

std::optional<std::vector<float>> CudaGptStep::global_gradients() {
  if (s_->optimizer->sharded()) return std::nullopt;
  return s_->optimizer->gradients();
}

HostVector<float> CudaGptStep::parameters() { return s_->optimizer->parameters(); }

}  // namespace slurm_train
#endif  // SLURM_TRAIN_WITH_CUDA
