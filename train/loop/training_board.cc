#include "train/loop/training_board.h"

#include <fmt/format.h>

#include <stdexcept>
#include <utility>

#include "train/loop/tensorboard_writer.h"

namespace slurm_train {

TrainingBoard::TrainingBoard(const std::string& dir, std::int64_t histogram_every, bool rank0, std::ostream& out)
    : histogram_every_(histogram_every), out_(out) {
  if (!rank0 || dir.empty()) return;
  try {
    writer_ = std::make_unique<TensorboardWriter>(dir);
    out_ << fmt::format("TensorBoard events in {}\n", writer_->path()) << std::flush;
  } catch (const std::exception& e) {
    out_ << fmt::format("warning: train.tensorboard = '{}': {}; training goes on without it\n", dir, e.what())
         << std::flush;
  }
}

TrainingBoard::~TrainingBoard() = default;

template <class Write>
void TrainingBoard::attempt(Write&& write) {
  if (!writer_) return;
  try {
    write(*writer_);
  } catch (const std::exception& e) {
    out_ << fmt::format("warning: train.tensorboard: {}; nothing more is written there\n", e.what()) << std::flush;
    writer_.reset();
  }
}

void TrainingBoard::resumed(std::uint64_t steps_done) {
  attempt([&](TensorboardWriter& w) {
    w.session_start(static_cast<std::int64_t>(steps_done + 1));
    w.flush();
  });
}

bool TrainingBoard::due(std::uint64_t steps_done) const {
  return writer_ && histogram_every_ > 0 && steps_done % static_cast<std::uint64_t>(histogram_every_) == 0;
}

void TrainingBoard::gradients(std::uint64_t steps_done, TrainStep& model) {
  if (due(steps_done)) gradients_ = model.global_gradients();
}

void TrainingBoard::step(const StepMetrics& m, TrainStep& model) {
  const auto steps_done = static_cast<std::int64_t>(m.step + 1);
  std::vector<std::pair<std::string, float>> scalars = {
      {"train/loss", static_cast<float>(m.loss)},
      {"train/accuracy", static_cast<float>(m.accuracy)},
      {"train/lr", m.lr},
      {"train/grad_norm", static_cast<float>(m.grad_norm)},
      {"train/samples_per_s", static_cast<float>(m.samples_per_second)},
      {"time/data", static_cast<float>(m.times.data)},
      {"time/forward", static_cast<float>(m.times.forward)},
      {"time/backward", static_cast<float>(m.times.backward)},
      {"time/comm_wait", static_cast<float>(m.times.comm_wait)},
      {"time/optimizer", static_cast<float>(m.times.optimizer)},
      {"time/checkpoint", static_cast<float>(m.times.checkpoint)},
  };
  if (m.tokens_per_sample > 0)
    scalars.emplace_back("train/tokens_per_s",
                         static_cast<float>(m.samples_per_second * static_cast<double>(m.tokens_per_sample)));
  attempt([&](TensorboardWriter& w) { w.scalars(steps_done, scalars); });
  if (due(m.step + 1)) {
    // The parameters after this step's update: a device step copies them to host memory.
    model.state_sharded() ? model.shard_to_host() : model.state_to_host();
    const HostVector<float>& params = *model.host_state().params;
    const ModelLayout& layout = model.model_layout();
    attempt([&](TensorboardWriter& w) {
      for (const ParamTensor& t : layout.tensors) {
        w.histogram(steps_done, "weights/" + t.name, std::span<const float>(params).subspan(t.offset, t.size));
        if (gradients_ && gradients_->size() == params.size())
          w.histogram(steps_done, "gradients/" + t.name, std::span<const float>(*gradients_).subspan(t.offset, t.size));
      }
    });
    gradients_.reset();
  }
  attempt([](TensorboardWriter& w) { w.flush(); });
}

void TrainingBoard::evaluation(std::uint64_t steps_done, double loss, double accuracy) {
  const std::pair<std::string, float> scalars[] = {{"eval/loss", static_cast<float>(loss)},
                                                   {"eval/accuracy", static_cast<float>(accuracy)}};
  attempt([&](TensorboardWriter& w) {
    w.scalars(static_cast<std::int64_t>(steps_done), scalars);
    w.flush();
  });
}

void TrainingBoard::gpu(std::uint64_t steps_done, const GpuReading& r) {
  const std::pair<std::string, float> scalars[] = {
      {"gpu/utilization_percent", static_cast<float>(r.utilization_percent)},
      {"gpu/power_watts", static_cast<float>(r.power_watts)}};
  attempt([&](TensorboardWriter& w) {
    w.scalars(static_cast<std::int64_t>(steps_done), scalars);
    w.flush();
  });
}

void TrainingBoard::close() {
  attempt([](TensorboardWriter& w) { w.close(); });
  writer_.reset();
}

}  // namespace slurm_train
