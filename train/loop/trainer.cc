#include "train/loop/trainer.h"

#include <fmt/format.h>

#include <string.h>  // sigabbrev_np
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "train/checkpoint/checkpoint_resume.h"
#include "train/data/dataset.h"
#include "train/data/prefetcher.h"
#include "train/data/samples.h"
#include "train/data/token_dataset.h"
#include "train/io/durable_file.h"
#include "train/loop/best_keeper.h"
#include "train/loop/checkpointing.h"
#include "train/loop/divergence.h"
#include "train/loop/evaluation.h"
#include "train/loop/metrics.h"
#include "train/loop/prometheus.h"
#include "train/loop/step_phases.h"
#include "train/loop/stop_votes.h"
#include "train/loop/training_board.h"
#include "train/models/model_file.h"
#include "train/steps/device.h"
#include "train/steps/model_step.h"

namespace slurm_train {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The datasets and the schedule they give, checked before anything is trained.
struct TrainingData {
  std::unique_ptr<Samples> train, test;
  std::size_t inputs = 0;  // features per sample; gpt: the vocabulary
  ModelRecipe recipe;
  double unigram_entropy_bits = 0;  // gpt: the training split's, from the token file
  std::size_t global_batch = 0, per_epoch = 0;
  std::uint64_t total_steps = 0;
};

// A classifier's labelled samples: the test set normalised as the training set is.
void load_labelled(const RunConfig& config, TrainingData& d) {
  const DataConfig& dc = config.data;
  Dataset train = load_dataset({dc.train, dc.features, dc.labels, dc.num_classes});
  Dataset test = load_dataset({dc.test, dc.features, dc.labels, dc.num_classes});
  if (test.feature_size != train.feature_size)
    throw std::invalid_argument(fmt::format("{} has {} features per sample but {} has {}", dc.test, test.feature_size,
                                            dc.train, train.feature_size));
  const Normalization norm = normalization_of(train);
  d.inputs = train.feature_size;
  d.recipe = model_recipe(config, norm, train.is_uint8());
  d.train = std::make_unique<LabelledSamples>(std::move(train), norm);
  d.test = std::make_unique<LabelledSamples>(std::move(test), norm);
}

// A language model's windows: data.train's training split and data.test's validation split.
// How the epoch and final lines name the evaluation: a language model's is on the validation
// split, its loss also in bits per byte (byte tokens: comparable with the corpus's unigram
// entropy), its speed in tokens/s; a classifier's on the test set, in samples/s.
struct EvalTerms {
  const char* split;            // "val" | "test"
  const char* unit;             // what the speed counts
  double per_sample;            // units a sample
  double unigram_entropy_bits;  // < 0: no bits per byte

  std::string loss(double loss, bool with_entropy) const {
    std::string s = fmt::format("{}_loss {:.4f}", split, loss);
    if (unigram_entropy_bits < 0) return s;
    if (with_entropy)
      return s + fmt::format(" ({:.4f} bits/byte; unigram entropy {:.3f})", loss / std::log(2.0), unigram_entropy_bits);
    return s + fmt::format(" ({:.4f} bits/byte)", loss / std::log(2.0));
  }
  std::string accuracy(double accuracy) const { return fmt::format("{}_acc {:.2f}%", split, 100.0 * accuracy); }
};

void load_tokens(const RunConfig& config, TrainingData& d) {
  const DataConfig& dc = config.data;
  const int block = config.model.block;
  const TokenFileLayout layout = inspect_token_file(dc.train);
  d.inputs = static_cast<std::size_t>(layout.vocab_size);
  d.unigram_entropy_bits = layout.unigram_entropy_bits;
  d.train = std::make_unique<TokenWindows>(load_token_split(dc.train, "train"), block);
  d.test = std::make_unique<TokenWindows>(load_token_split(dc.test, "validation"), block);
  if (d.test->count() == 0)
    throw std::invalid_argument(
        fmt::format("the validation split of {} has fewer than model.block + 1 = {} tokens", dc.test, block + 1));
}

TrainingData load_training_data(const RunConfig& config, int ranks) {
  const DataConfig& dc = config.data;
  TrainingData d;
  if (config.model.kind == "gpt")
    load_tokens(config, d);
  else
    load_labelled(config, d);
  d.global_batch = static_cast<std::size_t>(config.train.global_batch);
  if (d.global_batch < static_cast<std::size_t>(ranks))
    throw std::invalid_argument(fmt::format(
        "train.global_batch = {} is smaller than the {} ranks: every rank needs a row", d.global_batch, ranks));
  d.per_epoch = batches_per_epoch(d.train->count(), d.global_batch);
  if (d.per_epoch == 0)
    throw std::invalid_argument(fmt::format("train.global_batch = {} is larger than the {} {} of {}", d.global_batch,
                                            d.train->count(), config.model.kind == "gpt" ? "token windows" : "samples",
                                            dc.train));
  const TrainConfig& tc = config.train;
  d.total_steps = tc.steps > 0 ? static_cast<std::uint64_t>(tc.steps) : tc.epochs * d.per_epoch;
  return d;
}

// Where this run starts: after the newest valid checkpoint's step, with its epoch sums, on every
// rank the state rank 0 loaded; or at step 0.
struct StartPoint {
  std::uint64_t step = 0;
  double epoch_loss = 0, epoch_seconds = 0;
  bool resumed = false;  // on every rank (path is rank 0's only)
  std::string path;
};

StartPoint resume_if_configured(const RunConfig& config, TrainStep& step, const TrainingData& d, Comm& comm,
                                const std::string& device, std::ostream& out) {
  StartPoint start;
  const HostState state = step.host_state();
  const ResumeTarget target{
      step.model_layout(), config.train.optimizer, d.global_batch, static_cast<std::uint64_t>(config.train.seed),
      d.total_steps,       state.params,           state.first,    state.second,
      d.per_epoch};
  const auto resumed = resume_from_checkpoint(config.ckpt.dir, target, comm, [](const std::string& line) {
    std::cerr << "slurm-train: " << line << "\n" << std::flush;
  });
  step.state_from_host();
  if (!resumed) return start;
  const CheckpointCounters& c = resumed->counters;
  start = {std::min(c.step, d.total_steps), c.epoch_loss_sum, c.epoch_seconds, true, resumed->path};
  if (comm.rank() == 0)
    out << fmt::format("resumed from {} at step {} (epoch {}, batch {} of the epoch; written by {} rank(s))\n",
                       resumed->path, c.step, c.epoch, c.batch_in_epoch, c.world_size)
        << std::flush;
  if (comm.rank() == 0) {
    if (const std::string moved = device_change(resumed->device, device); !moved.empty())
      out << moved << "\n" << std::flush;
  }
  return start;
}

// Test loss and accuracy over the whole test set: each rank evaluates a contiguous share.
std::pair<double, double> evaluate_test_set(TrainStep& step, const TrainingData& d, int eval_batch, Comm& comm,
                                            const std::function<void()>& reducing) {
  const StepLoss mine = evaluate_rows(step, *d.test, rank_rows(d.test->count(), comm.rank(), comm.size()), eval_batch);
  double sums[2] = {mine.loss_sum, static_cast<double>(mine.correct)};
  reducing();
  comm.allreduce_sum(sums, 2);
  const auto predictions = static_cast<double>(d.test->count() * d.test->predictions_per_row());
  return {sums[0] / predictions, sums[1] / predictions};
}

}  // namespace

TrainResult train(const RunConfig& config, Comm& comm, std::ostream& out, const TrainHooks& hooks) {
  const auto started = Clock::now();
  const TrainConfig& tc = config.train;
  const bool rank0 = comm.rank() == 0;
  auto phase = [&hooks](TrainPhase p, std::uint64_t done) {
    if (hooks.on_phase) hooks.on_phase(p, done);
  };
  phase(TrainPhase::kLoadData, 0);
  const TrainingData d = load_training_data(config, comm.size());
  const std::uint64_t total = d.total_steps;
  const ModelRecipe& recipe = d.recipe;
  ChosenStep chosen = make_train_step(config, d.inputs, comm);
  if (rank0 && !chosen.device_note.empty()) {
    std::istringstream lines(chosen.device_note);
    for (std::string line; std::getline(lines, line);) std::cerr << "slurm-train: " << line << "\n";
    std::cerr << std::flush;
  }
  TrainStep& model = *chosen.step;
  const HostState state = model.host_state();
  phase(TrainPhase::kBroadcast, 0);
  comm.broadcast(state.params->data(), state.params->size() * sizeof(float), 0);
  model.state_from_host();

  TrainResult result;
  StartPoint start;
  if (!config.ckpt.dir.empty() && config.ckpt.resume) {
    phase(TrainPhase::kResume, 0);
    start = resume_if_configured(config, model, d, comm, chosen.device, out);
    result.resumed_from = start.path;
  }
  result.first_step = start.step;
  auto save_model_file = [&] {
    if (!rank0 || tc.save.empty()) return;
    save_model(tc.save, model.model_layout(), *state.params, config_as_toml(config), recipe);
    out << fmt::format("saved the model to {}\n", tc.save) << std::flush;
  };
  // A finished run resumed (the same command again, a requeue after the last step): nothing is
  // retrained and the saved model is left as it is. A run stopped between its last checkpoint
  // and writing the model (preempted at the last step) writes it now, from that checkpoint.
  if (start.resumed && start.step >= total) {
    const bool model_missing = !tc.save.empty() && !std::filesystem::exists(tc.save);
    if (rank0)
      out << fmt::format(
                 "{} is at step {} of {}: this run is already complete; nothing to train{} (--no-resume "
                 "trains again)\n",
                 result.resumed_from, start.step, total,
                 tc.save.empty() || model_missing ? "" : fmt::format(", {} left as it is", tc.save))
          << std::flush;
    if (model_missing) save_model_file();
    result.steps_done = start.step;
    result.already_complete = true;
    result.parameters = *state.params;
    result.seconds = seconds_since(started);
    return result;
  }

  const OptimizerConfig schedule = optimizer_config_of(tc);
  Checkpointing ckpt(
      {config.ckpt, tc.optimizer, schedule, static_cast<std::uint64_t>(tc.seed), d.global_batch, d.per_epoch, total,
       comm.size(), config_as_toml(config), recipe, hooks.slow_checkpoint_ms, chosen.device,
       !config.ckpt.dir.empty() && comm.size() > 1 && model.state_sharded() ? &comm : nullptr},
      model, rank0, out);
  BatchPrefetcher batches(*d.train, static_cast<std::uint64_t>(tc.seed), d.global_batch, comm.rank(), comm.size(),
                          start.step, total);
  MetricsWriter metrics(rank0 ? tc.metrics : "", hooks.run_id);
  TrainingBoard board(tc.tensorboard, tc.tensorboard_histograms, rank0, out);
  if (start.resumed) board.resumed(start.step);
  BestKeeper best(config.ckpt.keep_best, config.ckpt.dir, comm, rank0, out);
  PrometheusLabels prometheus_labels = hooks.prometheus;
  prometheus_labels.world_size = comm.size();
  double latest_test_accuracy = -1;
  std::vector<RankSlowdown> stragglers;  // named so far (rank 0)
  auto publish = [&](const StepMetrics& m) {
    if (rank0 && !tc.prometheus.empty())
      write_file_durably(tc.prometheus, prometheus_text(prometheus_labels, m, latest_test_accuracy, total, stragglers));
  };
  const bool tokens = config.model.kind == "gpt";
  const std::size_t per_row = d.train->predictions_per_row();
  const EvalTerms terms = tokens ? EvalTerms{"val", "tokens", static_cast<double>(per_row), d.unigram_entropy_bits}
                                 : EvalTerms{"test", "samples", 1.0, -1.0};
  if (rank0)
    out << fmt::format("training {} parameters on {} rank(s), {} steps ({} per epoch), global batch {}{}\n",
                       state.params->size(), comm.size(), total, d.per_epoch, d.global_batch,
                       tokens ? fmt::format(" windows of {} tokens", per_row) : "")
        << std::flush;

  // Start-up is over: the launcher reports it, and rank 0 (its restart guard) may refuse to go on.
  phase(TrainPhase::kAgreement, start.step);
  char go = !hooks.may_start || hooks.may_start(start.step) ? 1 : 0;
  comm.broadcast(&go, 1, 0);
  if (!go) {
    result.refused_start = true;
    result.steps_done = start.step;
    return result;
  }

  // The GPUs' energy counters as the first step starts (the launcher's reading, nothing collective).
  const std::optional<GpuReading> gpu_at_start = hooks.gpu ? hooks.gpu(true) : std::nullopt;

  const auto stop_after = static_cast<std::uint64_t>(tc.stop_after);
  double epoch_loss = start.epoch_loss, epoch_seconds = start.epoch_seconds;
  std::uint64_t step = start.step;
  for (; step < total; ++step) {
    StepTimes t;
    StepPhases phases(hooks.on_phase, step);
    phases.enter(TrainPhase::kData, &t.data);
    const Batch batch = batches.next();
    phases.enter(TrainPhase::kForward, &t.forward);
    model.forward({batch.x.data(), batch.y.data(), batch.rows, batch.first_row, batch.tokens.data()});
    phases.enter(TrainPhase::kBackward, &t.backward);
    model.backward();
    phases.enter(TrainPhase::kAllreduce, &t.comm_wait);
    model.finish_gradients();
    board.gradients(step + 1, model);
    // One collective: the loss sums and every rank's stop request.
    const StepLoss local = model.local_loss();
    double sums[2 + kStopVoteSlots] = {local.loss_sum, static_cast<double>(local.correct)};
    if (hooks.inject_nan && hooks.inject_nan(step)) sums[0] = std::nan("");
    cast_stop_vote(hooks.stop_signal ? hooks.stop_signal() : 0, sums + 2);
    comm.allreduce_sum(sums, std::size(sums));
    const StopVote stop_vote = counted_stop_votes(sums + 2);
    phases.enter(TrainPhase::kOptimizer, &t.optimizer);
    const double grad_norm = model.clip_gradients();
    const float lr = learning_rate_at(schedule, step, total);
    const auto predictions = static_cast<double>(d.global_batch * per_row);
    const double loss = sums[0] / predictions;
    if (const auto diverged = non_finite_step(step, loss, grad_norm, lr, tc.clip_norm))
      throw TrainingDiverged(*diverged);
    phases.enter(TrainPhase::kCheckpoint, &t.checkpoint);
    ckpt.wait_copied();
    phases.enter(TrainPhase::kOptimizer, &t.optimizer);
    model.update(lr, step);
    phases.close();

    epoch_loss += loss;
    epoch_seconds += t.total();
    const StepMetrics step_metrics{step,
                                   step / d.per_epoch,
                                   loss,
                                   sums[1] / predictions,
                                   lr,
                                   grad_norm,
                                   static_cast<double>(d.global_batch) / t.total(),
                                   tokens ? per_row : 0,
                                   t};
    metrics.write(step_metrics);
    board.step(step_metrics, model);
    if (rank0 && hooks.stragglers)
      for (const RankSlowdown& s : hooks.stragglers()) {
        metrics.write_straggler(step + 1, s);
        stragglers.push_back(s);
      }
    if (hooks.on_step) hooks.on_step(step_metrics, total);
    if ((step + 1) % static_cast<std::uint64_t>(tc.prometheus_every) == 0) publish(step_metrics);

    if ((step + 1) % d.per_epoch == 0 || step + 1 == total) {
      const std::uint64_t steps_in_epoch = step % d.per_epoch + 1;
      phase(TrainPhase::kEvaluation, step + 1);
      const auto [test_loss, test_accuracy] = evaluate_test_set(
          model, d, static_cast<int>(tc.eval_batch), comm, [&] { phase(TrainPhase::kEvaluationReduce, step + 1); });
      EpochResult e{step / d.per_epoch + 1,
                    step + 1,
                    epoch_loss / static_cast<double>(steps_in_epoch),
                    test_loss,
                    test_accuracy,
                    static_cast<double>(steps_in_epoch * d.global_batch) / epoch_seconds};
      result.epochs.push_back(e);
      metrics.write_eval(e.epoch, e.step, e.test_loss, e.test_accuracy);
      board.evaluation(e.step, e.test_loss, e.test_accuracy);
      best.evaluated(e.step, {e.test_loss, e.test_accuracy, e.train_loss});
      latest_test_accuracy = e.test_accuracy;
      publish(step_metrics);
      // Every rank's GPU reading (the latest sample's copy), gathered to rank 0 for the metrics
      // file; a rank without a GPU sends nothing.
      const std::optional<GpuReading> gpu = hooks.gpu ? hooks.gpu(false) : std::nullopt;
      if (hooks.gpu) {
        const double mine[2] = {gpu ? gpu->utilization_percent : 0, gpu ? gpu->power_watts : 0};
        const auto parts = comm.gather_bytes(mine, gpu ? sizeof mine : 0, 0);
        const std::vector<RankGpuReading> ranks = rank_gpu_readings(parts);
        if (!ranks.empty()) metrics.write_gpu(e.step, rank0 ? gpu : std::nullopt, ranks);
        if (gpu && rank0) board.gpu(e.step, *gpu);
      }
      if (rank0)
        out << fmt::format("epoch {:>3}  step {:>6}  train_loss {:.4f}  {}  {}  {}/s {:.0f}{}\n", e.epoch, e.step,
                           e.train_loss, terms.loss(e.test_loss, true), terms.accuracy(e.test_accuracy), terms.unit,
                           e.samples_per_second * terms.per_sample,
                           gpu ? fmt::format("  gpu {:.0f}% {:.0f} W", gpu->utilization_percent, gpu->power_watts) : "")
            << std::flush;
      epoch_loss = epoch_seconds = 0;
    }

    // The step boundary: checkpoint (after the epoch bookkeeping, so that a resume continues it)
    // and stop, as the schedule, train.stop_after or a stop signal on any rank says.
    // A stop signal voted in the last step stops nothing: the training is complete, and a
    // requeued job would only resume to find no step left.
    const std::uint64_t done = step + 1;
    const bool stop = done < total && (stop_vote.signal != 0 || (stop_after > 0 && done == stop_after));
    if (done == total && stop_vote.signal != 0 && rank0)
      out << fmt::format(
                 "SIG{} on {} of {} rank(s) came with the last step: the training is complete and ends as planned\n",
                 sigabbrev_np(stop_vote.signal) ? sigabbrev_np(stop_vote.signal) : "?", stop_vote.ranks, comm.size())
          << std::flush;
    phase(TrainPhase::kCheckpoint, done);
    const std::optional<BestRecord> new_best = best.take(done);
    if (ckpt.due(done, stop) || new_best) {
      // Every rank holds the same parameters: all of them stop here together. A sharded state
      // is written shard by shard, never gathered: in host memory, the parameters and this
      // rank's shard (shard_to_host()).
      if (ckpt.together())
        model.shard_to_host();
      else
        model.state_to_host();
      if (const auto diverged = non_finite_parameters(done, *state.params)) throw TrainingDiverged(*diverged);
      ckpt.save(done, epoch_loss, epoch_seconds, new_best);
    }
    ckpt.check();  // a failed background write ends the run now, naming the path
    if (stop) {
      ++step;
      result.stopped_early = true;
      result.stop_signal = stop_vote.signal;
      result.stop_signal_ranks = stop_vote.ranks;
      if (rank0) out << fmt::format("stopping after step {} of {}\n", done, total) << std::flush;
      break;
    }
  }
  result.steps_done = step;
  phase(TrainPhase::kCheckpoint, step);
  ckpt.finish();  // waits for the write in flight; its error fails the run
  board.close();
  model.state_to_host();
  result.parameters = *state.params;
  if (!result.stopped_early) save_model_file();
  result.seconds = seconds_since(started);
  // The run's GPU energy: every rank's counters from the first step to now, summed. Unknown when
  // a rank's GPU has no counter (a sum without it would look complete and be low).
  std::optional<RunEnergy> energy;
  if (hooks.gpu) {
    const std::optional<GpuReading> gpu_at_end = hooks.gpu(true);
    double sums[3] = {0, 0, 0};  // joules, ranks that counted, ranks with a GPU and no count
    if (gpu_at_start && gpu_at_end && gpu_at_start->energy_joules && gpu_at_end->energy_joules) {
      sums[0] = *gpu_at_end->energy_joules - *gpu_at_start->energy_joules;
      sums[1] = 1;
    } else if (gpu_at_start || gpu_at_end) {
      sums[2] = 1;
    }
    comm.allreduce_sum(sums, 3);
    const std::uint64_t trained = step - start.step;
    if (sums[1] > 0 && sums[2] == 0 && trained > 0) {
      const double units = static_cast<double>(trained * d.global_batch) * (tokens ? static_cast<double>(per_row) : 1);
      energy = RunEnergy{trained, sums[0], sums[0] / static_cast<double>(trained), sums[0] / units,
                         tokens ? "token" : "sample"};
      metrics.write_energy(*energy);
    }
  }
  if (rank0 && !result.stopped_early && !result.epochs.empty())
    out << fmt::format("final: {}  {}  after {} steps in {:.1f} s{}\n",
                       terms.accuracy(result.epochs.back().test_accuracy),
                       terms.loss(result.epochs.back().test_loss, false), total, result.seconds,
                       energy ? fmt::format("; GPU energy {:.0f} J, {:.3g} J/step, {:.3g} J/{}", energy->joules,
                                            energy->per_step, energy->per_unit, energy->unit)
                              : "")
        << std::flush;
  return result;
}

}  // namespace slurm_train
