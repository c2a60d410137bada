#include "train/trainer.h"

#include <cblas.h>
#include <sched.h>

#include <fmt/format.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <thread>

#include "kernels/kernels.h"
#include "spank/jobenv/host.h"
#include "train/checkpoint_policy.h"
#include "train/checkpoint_resume.h"
#include "train/checkpoint_store.h"
#include "train/checkpoint_writer.h"
#include "train/dataset.h"
#include "train/device.h"
#include "train/divergence.h"
#include "train/durable_file.h"
#include "train/gradient_buckets.h"
#include "train/metrics.h"
#include "train/model_file.h"
#include "train/mlp.h"
#include "train/optimizer.h"
#include "train/prefetcher.h"
#include "train/prometheus.h"

namespace slurm_train {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

MlpShape shape_of(const RunConfig& c, std::size_t inputs) {
  MlpShape s;
  s.inputs = static_cast<int>(inputs);
  s.hidden = c.model.hidden;
  s.classes = c.data.num_classes;
  s.activation = c.model.activation == "gelu" ? kernels::Activation::kGelu : kernels::Activation::kRelu;
  s.dropout = static_cast<float>(c.model.dropout);
  return s;
}

OptimizerConfig optimizer_of(const TrainConfig& t) {
  OptimizerConfig o;
  o.kind = t.optimizer == "sgd" ? OptimizerKind::kSgd : OptimizerKind::kAdamW;
  o.lr = static_cast<float>(t.lr);
  o.momentum = static_cast<float>(t.momentum);
  o.nesterov = t.nesterov;
  o.beta1 = static_cast<float>(t.beta1);
  o.beta2 = static_cast<float>(t.beta2);
  o.eps = static_cast<float>(t.eps);
  o.weight_decay = static_cast<float>(t.weight_decay);
  o.schedule = t.schedule == "constant" ? Schedule::kConstant : Schedule::kWarmupCosine;
  o.warmup_steps = static_cast<std::uint64_t>(t.warmup_steps);
  o.min_lr_ratio = static_cast<float>(t.min_lr_ratio);
  o.clip_norm = static_cast<float>(t.clip_norm);
  return o;
}

// Test loss and accuracy over the whole test set: each rank evaluates a contiguous share.
std::pair<double, double> evaluate(Mlp<float>& model, kernels::Kernels<float>& k, const Dataset& test,
                                   Normalization norm, int eval_batch, Comm& comm, const std::function<void()>& reducing) {
  const RowRange mine = rank_rows(test.count, comm.rank(), comm.size());
  std::vector<float> x;
  std::vector<std::int32_t> y;
  double sums[2] = {0.0, 0.0};  // loss sum, correct
  for (std::size_t begin = mine.begin; begin < mine.end; begin += static_cast<std::size_t>(eval_batch)) {
    const std::size_t rows = std::min<std::size_t>(static_cast<std::size_t>(eval_batch), mine.end - begin);
    normalized_rows(test, begin, rows, norm, x, y);
    const float* logits = model.forward(x.data(), static_cast<int>(rows), false);
    const auto r = k.softmax_cross_entropy(static_cast<int>(rows), test.num_classes, logits, y.data(), 0.0f, 1.0f, nullptr);
    sums[0] += r.loss_sum;
    sums[1] += static_cast<double>(r.correct);
  }
  reducing();
  comm.allreduce_sum(sums, 2);
  return {sums[0] / static_cast<double>(test.count), sums[1] / static_cast<double>(test.count)};
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

int blas_threads_for_rank(int configured, int local_size) {
  if (configured > 0) return configured;
  cpu_set_t set;
  CPU_ZERO(&set);
  const int allowed = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (allowed < hardware) return std::max(1, allowed);  // already bound to its own CPUs
  return std::max(1, allowed / std::max(1, local_size));
}

TrainResult train(const RunConfig& config, Comm& comm, std::ostream& out, const TrainHooks& hooks) {
  const auto started = Clock::now();
  const TrainConfig& tc = config.train;
  const bool rank0 = comm.rank() == 0;
  // Refused (train.device = cuda) before any data is read; a fallback is said once, by rank 0.
  const DeviceChoice device = choose_device(tc.device, tc.device == "cpu" ? CudaProbe{} : probe_cuda());
  if (rank0 && !device.note.empty()) std::cerr << "slurm-train: " << device.note << "\n" << std::flush;
  auto phase = [&hooks](TrainPhase p, std::uint64_t done) {
    if (hooks.on_phase) hooks.on_phase(p, done);
  };
  phase(TrainPhase::kLoadData, 0);
  openblas_set_num_threads(blas_threads_for_rank(tc.threads, comm.local_size()));
  auto kernels = tc.kernels == "reference" ? kernels::make_reference_kernels<float>() : kernels::make_cpu_kernels();
  auto& k = *kernels;

  const Dataset train_set = load_dataset({config.data.train, config.data.features, config.data.labels, config.data.num_classes});
  const Dataset test_set = load_dataset({config.data.test, config.data.features, config.data.labels, config.data.num_classes});
  if (test_set.feature_size != train_set.feature_size)
    throw std::invalid_argument(fmt::format("{} has {} features per sample but {} has {}", config.data.test,
                                            test_set.feature_size, config.data.train, train_set.feature_size));
  const auto global_batch = static_cast<std::size_t>(tc.global_batch);
  if (global_batch < static_cast<std::size_t>(comm.size()))
    throw std::invalid_argument(fmt::format("train.global_batch = {} is smaller than the {} ranks: every rank needs a row",
                                            global_batch, comm.size()));
  const std::size_t per_epoch = batches_per_epoch(train_set.count, global_batch);
  if (per_epoch == 0)
    throw std::invalid_argument(fmt::format("train.global_batch = {} is larger than the {} samples of {}", global_batch,
                                            train_set.count, config.data.train));
  const std::uint64_t total_steps = tc.steps > 0 ? static_cast<std::uint64_t>(tc.steps) : tc.epochs * per_epoch;
  const Normalization norm = normalization_of(train_set);
  const ModelRecipe recipe = model_recipe_of(norm, train_set.is_uint8(), config.model.activation);

  Mlp<float> model(shape_of(config, train_set.feature_size), k);
  model.initialize(static_cast<std::uint64_t>(tc.seed));
  phase(TrainPhase::kBroadcast, 0);
  comm.broadcast(model.params().data(), model.params().size() * sizeof(float), 0);
  const OptimizerConfig opt_config = optimizer_of(tc);
  Optimizer optimizer(opt_config, model.layers(), model.params().size());
  GradientBuckets buckets(comm, model.layers(), static_cast<std::size_t>(tc.bucket_mb * 1024 * 1024));
  MetricsWriter metrics(rank0 ? tc.metrics : "", hooks.run_id);
  TrainResult result;
  double epoch_loss = 0, epoch_seconds = 0;

  // Resume: every rank continues from the state rank 0 loaded, at the step after it.
  const CkptConfig& cc = config.ckpt;
  const bool checkpoints = !cc.dir.empty();
  std::uint64_t start_step = 0;
  bool resumed_any = false;  // on every rank (resumed_from is rank 0's only)
  if (checkpoints && cc.resume) {
    phase(TrainPhase::kResume, 0);
    ResumeTarget target{model.layers(), tc.optimizer, global_batch, static_cast<std::uint64_t>(tc.seed), total_steps,
                        &model.params(), &optimizer.first_state(), &optimizer.second_state(), per_epoch};
    const auto resumed = resume_from_checkpoint(cc.dir, target, comm, [&](const std::string& line) {
      std::cerr << "slurm-train: " << line << "\n" << std::flush;
    });
    if (resumed) {
      start_step = std::min(resumed->counters.step, total_steps);
      epoch_loss = resumed->counters.epoch_loss_sum;
      epoch_seconds = resumed->counters.epoch_seconds;
      result.resumed_from = resumed->path;
      resumed_any = true;
      if (rank0)
        out << fmt::format("resumed from {} at step {} (epoch {}, batch {} of the epoch; written by {} rank(s))\n",
                           resumed->path, resumed->counters.step, resumed->counters.epoch,
                           resumed->counters.batch_in_epoch, resumed->counters.world_size)
            << std::flush;
    }
  }
  result.first_step = start_step;
  // A finished run resumed (the same command again, a requeue after the last step): nothing is
  // retrained and the saved model is left as it is. A run stopped between its last checkpoint
  // and writing the model (preempted at the last step) writes it now, from that checkpoint.
  if (resumed_any && start_step >= total_steps) {
    const bool model_missing = !tc.save.empty() && !std::filesystem::exists(tc.save);
    if (rank0)
      out << fmt::format("{} is at step {} of {}: this run is already complete; nothing to train{} (--no-resume "
                         "trains again)\n",
                         result.resumed_from, start_step, total_steps,
                         tc.save.empty() || model_missing ? "" : fmt::format(", {} left as it is", tc.save))
          << std::flush;
    if (rank0 && model_missing) {
      save_model(tc.save, model.layers(), model.params(), config_as_toml(config), recipe);
      out << fmt::format("saved the model to {}\n", tc.save) << std::flush;
    }
    result.steps_done = start_step;
    result.already_complete = true;
    result.parameters = model.params();
    result.seconds = seconds_since(started);
    return result;
  }
  const KeepPolicy keep{static_cast<std::uint64_t>(cc.keep), static_cast<std::uint64_t>(cc.keep_every)};
  // Declared before the writer: its thread reads them until the writer's destructor has joined.
  const std::string config_toml = config_as_toml(config);
  const std::string host = host_name();
  CheckpointWriter writer(cc.async, [dir = cc.dir, keep, slow_ms = hooks.slow_checkpoint_ms](const CheckpointState& s) {
    save_checkpoint(dir, s, keep, slow_ms);
  });
  // Rank 0 holds the replicated state and writes it. The stall a save costs the loop is the wait
  // for the previous write here plus, before the next optimizer update, the wait for the copy
  // that the writer thread makes meanwhile (see checkpoint_writer.h); it is logged then.
  struct PendingLog {
    bool active = false;
    std::uint64_t step = 0;
    double waited = 0;
  } pending;
  auto save = [&](std::uint64_t done) {
    if (!rank0) return;
    CheckpointCounters c;
    c.step = done;
    c.epoch = done / per_epoch;
    c.batch_in_epoch = done % per_epoch;
    c.samples_seen = done * global_batch;
    c.seed = static_cast<std::uint64_t>(tc.seed);
    c.global_batch = global_batch;
    c.schedule_total_steps = total_steps;
    c.next_lr = learning_rate_at(opt_config, done, total_steps);
    c.epoch_loss_sum = epoch_loss;
    c.epoch_seconds = epoch_seconds;
    c.optimizer_steps = done;
    c.world_size = comm.size();
    const auto begin = Clock::now();
    writer.submit([&, c, created = utc_now()](CheckpointState& s) {
      s.counters = c;
      s.optimizer = tc.optimizer;
      s.layers = model.layers();
      s.params = model.params();  // copy-assignment reuses the buffers' capacity from the last save
      s.first = optimizer.first_state();
      s.second = optimizer.second_state();
      s.config_toml = config_toml;
      s.program_version = SLURM_TRAIN_VERSION;
      s.created = created;
      s.host = host;
      s.recipe = recipe;
    });
    pending = {true, done, seconds_since(begin)};
  };
  // Waits until the saved state has been copied (the parameters may change after this).
  auto copied = [&] {
    if (!pending.active) return;
    const auto begin = Clock::now();
    writer.wait_copied();
    const double copy_wait = seconds_since(begin);
    out << fmt::format("checkpoint step {} -> {}/{} ({}; training stalled {:.2f} ms: {:.2f} waiting for the previous "
                       "write, {:.2f} for the copy to host memory)\n",
                       pending.step, cc.dir, checkpoint_file_name(pending.step),
                       cc.async ? "written in the background" : "written", 1e3 * (pending.waited + copy_wait),
                       1e3 * pending.waited, 1e3 * copy_wait)
        << std::flush;
    pending.active = false;
  };

  BatchPrefetcher batches(train_set, norm, static_cast<std::uint64_t>(tc.seed), global_batch, comm.rank(), comm.size(),
                          start_step, total_steps);
  std::vector<float> dlogits;
  const float loss_scale = 1.0f / static_cast<float>(global_batch);  // the loss is a mean over the global batch
  const auto dropout_seed = kernels::mix64(static_cast<std::uint64_t>(tc.seed) + 0xd509);

  if (rank0)
    out << fmt::format("training {} parameters on {} rank(s), {} steps ({} per epoch), global batch {}\n",
                       model.params().size(), comm.size(), total_steps, per_epoch, global_batch) << std::flush;
  double latest_test_accuracy = -1;
  PrometheusLabels prometheus_labels = hooks.prometheus;
  prometheus_labels.world_size = comm.size();
  auto publish = [&](const StepMetrics& m) {
    if (rank0 && !tc.prometheus.empty())
      write_file_durably(tc.prometheus, prometheus_text(prometheus_labels, m, latest_test_accuracy, total_steps));
  };
  const auto stop_after = static_cast<std::uint64_t>(tc.stop_after);
  std::uint64_t step = start_step;
  for (; step < total_steps; ++step) {
    StepTimes t;
    auto phase_start = Clock::now();
    auto lap = [&](double& into) { into += seconds_since(phase_start); phase_start = Clock::now(); };

    phase(TrainPhase::kData, step);
    Batch batch = batches.next();
    phase(TrainPhase::kForward, step);
    lap(t.data);
    const float* logits = model.forward(batch.x.data(), batch.rows, true, dropout_seed, batch.first_row);
    dlogits.resize(static_cast<std::size_t>(batch.rows) * config.data.num_classes);
    auto local = k.softmax_cross_entropy(batch.rows, config.data.num_classes, logits, batch.y.data(),
                                         static_cast<float>(tc.label_smoothing), loss_scale, dlogits.data());
    if (hooks.inject_nan && hooks.inject_nan(step)) local.loss_sum = std::nan("");
    lap(t.forward);
    phase(TrainPhase::kBackward, step);
    model.backward(batch.x.data(), dlogits.data(),
                   [&](std::size_t layer) { buckets.layer_done(model.grads().data(), layer); });
    lap(t.backward);
    phase(TrainPhase::kAllreduce, step);
    buckets.finish();
    double totals[2] = {local.loss_sum, static_cast<double>(local.correct)};
    comm.allreduce_sum(totals, 2);
    lap(t.comm_wait);
    const double grad_norm = clip_by_global_norm(k, model.grads(), opt_config.clip_norm);
    const float lr = learning_rate_at(opt_config, step, total_steps);
    const double loss = totals[0] / static_cast<double>(global_batch);
    if (const auto diverged = non_finite_step(step, loss, grad_norm, lr, tc.clip_norm)) throw TrainingDiverged(*diverged);
    phase(TrainPhase::kCheckpoint, step);
    if (rank0) copied();
    phase(TrainPhase::kOptimizer, step);
    optimizer.update(k, model.params(), model.grads(), lr, step);
    lap(t.optimizer);

    epoch_loss += loss;
    epoch_seconds += t.total();
    const StepMetrics step_metrics{step, step / per_epoch, loss, totals[1] / static_cast<double>(global_batch), lr,
                                   grad_norm, static_cast<double>(global_batch) / t.total(), t};
    metrics.write(step_metrics);
    if (hooks.on_step) hooks.on_step(step_metrics, total_steps);
    if ((step + 1) % static_cast<std::uint64_t>(tc.prometheus_every) == 0) publish(step_metrics);

    const bool epoch_end = (step + 1) % per_epoch == 0 || step + 1 == total_steps;
    if (epoch_end) {
      const std::uint64_t steps_in_epoch = step % per_epoch + 1;
      phase(TrainPhase::kEvaluation, step + 1);
      const auto [test_loss, test_accuracy] = evaluate(model, k, test_set, norm, static_cast<int>(tc.eval_batch), comm,
                                                       [&] { phase(TrainPhase::kEvaluationReduce, step + 1); });
      EpochResult e{step / per_epoch + 1, step + 1, epoch_loss / static_cast<double>(steps_in_epoch), test_loss,
                    test_accuracy, static_cast<double>(steps_in_epoch * global_batch) / epoch_seconds};
      result.epochs.push_back(e);
      metrics.write_eval(e.epoch, e.step, e.test_loss, e.test_accuracy);
      latest_test_accuracy = e.test_accuracy;
      publish(step_metrics);
      if (rank0)
        out << fmt::format("epoch {:>3}  step {:>6}  train_loss {:.4f}  test_loss {:.4f}  test_acc {:.2f}%  samples/s {:.0f}\n",
                           e.epoch, e.step, e.train_loss, e.test_loss, 100.0 * e.test_accuracy, e.samples_per_second)
            << std::flush;
      epoch_loss = epoch_seconds = 0;
    }

    // The step boundary: checkpoint (after the epoch bookkeeping, so that a resume continues it)
    // and stop, as the schedule, train.stop_after or the hook says.
    const std::uint64_t done = step + 1;
    phase(TrainPhase::kAgreement, done);
    const StepDecision decision = hooks.after_step ? hooks.after_step(done) : StepDecision::kContinue;
    const bool stop = decision == StepDecision::kSaveAndStop || (stop_after > 0 && done == stop_after && done < total_steps);
    phase(TrainPhase::kCheckpoint, done);
    if (checkpoints && (checkpoint_due(done, static_cast<std::uint64_t>(cc.every), total_steps) || stop ||
                        decision != StepDecision::kContinue)) {
      // Every rank holds the same parameters: all of them stop here together.
      if (const auto diverged = non_finite_parameters(done, model.params())) throw TrainingDiverged(*diverged);
      save(done);
    }
    if (rank0) writer.check();  // a failed background write ends the run now, naming the path
    if (stop) {
      ++step;
      result.stopped_early = true;
      if (rank0) out << fmt::format("stopping after step {} of {}\n", done, total_steps) << std::flush;
      break;
    }
  }
  result.steps_done = step;
  // Shutdown waits for the write in flight; its error fails the run.
  phase(TrainPhase::kCheckpoint, step);
  if (rank0) {
    copied();
    writer.wait();
  }
  if (result.stopped_early) {
    result.parameters = model.params();
    result.seconds = seconds_since(started);
    return result;
  }
  result.parameters = model.params();
  if (rank0 && !tc.save.empty()) {
    save_model(tc.save, model.layers(), model.params(), config_as_toml(config), recipe);
    out << fmt::format("saved the model to {}\n", tc.save) << std::flush;
  }
  result.seconds = seconds_since(started);
  if (rank0 && !result.epochs.empty())
    out << fmt::format("final: test_acc {:.2f}%  test_loss {:.4f}  after {} steps in {:.1f} s\n",
                       100.0 * result.epochs.back().test_accuracy, result.epochs.back().test_loss, total_steps,
                       result.seconds)
        << std::flush;
  return result;
}

}  // namespace slurm_train
