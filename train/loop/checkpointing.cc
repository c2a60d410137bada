#include "train/loop/checkpointing.h"

#include <ctime>

#include <fmt/format.h>

#include "spank/jobenv/host.h"
#include "spank/jobenv/utc_time.h"
#include "train/checkpoint/checkpoint_parallel.h"
#include "train/checkpoint/checkpoint_policy.h"

namespace slurm_train {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string utc_now() { return utc_iso8601(std::time(nullptr)); }

}  // namespace

Checkpointing::Checkpointing(CheckpointPlan plan, TrainStep& step, bool writer, std::ostream& out)
    : plan_(std::move(plan)),
      step_(step),
      writer_(writer || plan_.together),
      out_(out),
      host_(host_name()),
      // Held for the whole run: a link or folder changed meanwhile redirects nothing. Written
      // together, each rank opens it at the first save, where the ranks agree on a failure.
      folder_(writer_ && !plan_.ckpt.dir.empty() && !plan_.together
                  ? std::optional<TrustedFolder>(open_checkpoint_folder(plan_.ckpt.dir, true))
                  : std::nullopt),
      writer_thread_(plan_.ckpt.async, [this](const CheckpointState& s) {
        save_checkpoint(
            *folder_, s,
            KeepPolicy{static_cast<std::uint64_t>(plan_.ckpt.keep), static_cast<std::uint64_t>(plan_.ckpt.keep_every)},
            plan_.slow_ms);
      }) {}

bool Checkpointing::due(std::uint64_t done, bool stopping) const {
  if (plan_.ckpt.dir.empty()) return false;
  return stopping || checkpoint_due(done, static_cast<std::uint64_t>(plan_.ckpt.every), plan_.total_steps);
}

void Checkpointing::save(std::uint64_t done, double epoch_loss, double epoch_seconds,
                         const std::optional<BestRecord>& best) {
  if (!writer_) return;
  CheckpointCounters c;
  c.step = done;
  c.epoch = done / plan_.steps_per_epoch;
  c.batch_in_epoch = done % plan_.steps_per_epoch;
  c.samples_seen = done * plan_.global_batch;
  c.seed = plan_.seed;
  c.global_batch = plan_.global_batch;
  c.schedule_total_steps = plan_.total_steps;
  c.next_lr = learning_rate_at(plan_.schedule, done, plan_.total_steps);
  c.epoch_loss_sum = epoch_loss;
  c.epoch_seconds = epoch_seconds;
  c.optimizer_steps = done;
  c.world_size = plan_.world_size;
  const auto begin = Clock::now();
  if (plan_.together) return save_together(c, begin, best);
  writer_thread_.submit([this, c, best, created = utc_now()](CheckpointState& s) {
    const HostState state = step_.host_state();
    s.counters = c;
    s.optimizer = plan_.optimizer;
    s.model = step_.model_layout();
    s.params = *state.params;  // copy-assignment reuses the buffers' capacity from the last save
    s.first = *state.first;
    s.second = *state.second;
    s.config_toml = plan_.config_toml;
    s.program_version = SLURM_TRAIN_VERSION;
    s.created = created;
    s.host = host_;
    s.device = plan_.device;
    s.recipe = plan_.recipe;
    s.best = best;
  });
  pending_ = {true, done, seconds_since(begin)};
}

void Checkpointing::save_together(const CheckpointCounters& c, Clock::time_point begin,
                                  const std::optional<BestRecord>& best) {
  const std::optional<StateShard> shard = step_.state_shard();
  if (!shard) throw std::logic_error("Checkpointing: the ranks write together but the step's state is whole");
  CheckpointState& s = shard_meta_;
  s.counters = c;
  s.optimizer = plan_.optimizer;
  s.model = step_.model_layout();
  s.is_shard = true;
  s.config_toml = plan_.config_toml;
  s.program_version = SLURM_TRAIN_VERSION;
  s.created = utc_now();
  s.host = host_;
  s.device = plan_.device;
  s.recipe = plan_.recipe;
  s.best = best;
  // Written straight from the step's buffers: nothing changes them until save returns.
  ShardData mine{shard->begin,
                 {std::span<const float>(*shard->params).subspan(shard->begin, shard->end - shard->begin),
                  std::span<const float>(*shard->first)}};
  if (optimizer_state_names(plan_.optimizer).size() > 1) mine.arrays.emplace_back(*shard->second);  // not SGD
  Comm& comm = *plan_.together;
  save_checkpoint_parallel(
      comm, folder_, plan_.ckpt.dir, s, mine,
      KeepPolicy{static_cast<std::uint64_t>(plan_.ckpt.keep), static_cast<std::uint64_t>(plan_.ckpt.keep_every)},
      plan_.slow_ms);
  if (comm.rank() == 0)
    out_ << fmt::format(
                "checkpoint step {} -> {}/{} (written by the {} ranks together, each its shard; training "
                "stalled {:.2f} ms)\n",
                c.step, plan_.ckpt.dir, checkpoint_file_name(c.step), comm.size(), 1e3 * seconds_since(begin))
         << std::flush;
}

void Checkpointing::wait_copied() {
  if (!writer_ || !pending_.active) return;
  const auto begin = Clock::now();
  writer_thread_.wait_copied();
  const double copy_wait = seconds_since(begin);
  out_ << fmt::format(
              "checkpoint step {} -> {}/{} ({}; training stalled {:.2f} ms: {:.2f} waiting for the previous "
              "write, {:.2f} for the copy to host memory)\n",
              pending_.step, plan_.ckpt.dir, checkpoint_file_name(pending_.step),
              plan_.ckpt.async ? "written in the background" : "written", 1e3 * (pending_.waited + copy_wait),
              1e3 * pending_.waited, 1e3 * copy_wait)
       << std::flush;
  pending_.active = false;
}

void Checkpointing::check() {
  if (writer_) writer_thread_.check();
}

void Checkpointing::finish() {
  if (!writer_) return;
  wait_copied();
  writer_thread_.wait();
}

}  // namespace slurm_train
