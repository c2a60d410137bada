// The run configuration: sections [data], [model], [train], [ckpt] and [run] (the launcher's own:
// logs, watchdog, preemption) of a TOML file, each key also settable in the environment
// (SLURM_TRAIN_<SECTION>_<KEY>; a [run] key by its older name, SLURM_TRAIN_LOG_DIR, ...) and on
// the command line as --section.key=value. Precedence: built-in default < file < environment <
// command line. Every key is declared once, in config.cc's table, with its type, default (the
// member initialisers below), help and environment name.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace slurm_train {

struct ConfigError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct DataConfig {
  std::string train = "data/fashion-mnist/train.h5";
  std::string test = "data/fashion-mnist/test.h5";
  std::string features = "/images";
  std::string labels = "/labels";
  int num_classes = 10;
};

struct ModelConfig {
  std::string kind = "mlp";  // mlp | gpt
  std::vector<int> hidden = {1024, 512};
  std::string activation = "relu";  // relu | gelu
  double dropout = 0.1;
  // gpt: GPT-2's n_layer, n_head, n_embd and n_positions (the training window).
  int layers = 4;
  int heads = 4;
  int embd = 128;
  int block = 128;
};

struct TrainConfig {
  int epochs = 10;
  std::int64_t steps = 0;  // > 0: stop after this many steps instead of `epochs`
  std::int64_t global_batch = 256;
  std::int64_t seed = 42;
  std::string optimizer = "adamw";  // adamw | sgd
  double lr = 1e-3;
  double momentum = 0.9;
  bool nesterov = false;
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::string schedule = "cosine";  // cosine | constant
  std::int64_t warmup_steps = 0;
  double min_lr_ratio = 0.0;
  double clip_norm = 0.0;
  double label_smoothing = 0.0;
  double bucket_mb = 4.0;
  std::string metrics;     // JSON-lines file of per-step metrics (rank 0); empty: none
  std::string save;        // HDF5 file for the final model (rank 0); empty: none
  std::string prometheus;  // Prometheus textfile-collector file (rank 0); empty: none
  std::int64_t prometheus_every = 10;
  std::string tensorboard;                  // TensorBoard event folder (rank 0); empty: none
  std::int64_t tensorboard_histograms = 0;  // steps between weight and gradient histograms; 0: none
  int threads = 0;                          // BLAS threads per rank; 0: this rank's share of its CPUs
  std::string kernels = "cpu";              // cpu | reference
  std::string device = "auto";              // auto | cpu | cuda (train/steps/device.h)
  std::string precision = "auto";           // auto | fp32 | tf32 | bf16 (the GPU's; the CPU computes in fp32)
  int gpu = -1;                             // the visible GPU this rank drives; -1: one per rank, automatically
  bool deterministic = false;               // GPU: the same bits on every run (the CPU path always is)
  bool shard_optimizer = false;             // the optimizer state sharded over the ranks (ZeRO stage 1)
  std::int64_t eval_batch = 1000;
  // > 0: stop once this many steps are done (saving a checkpoint when ckpt.dir is set), as a
  // preempted job would; train.steps/epochs still define the schedule. 0: run to the end.
  std::int64_t stop_after = 0;
  std::int64_t log_every = 100;  // steps between progress lines (and rank-log lines); 0: epochs only
};

struct CkptConfig {
  std::string dir;              // checkpoint folder; empty: no checkpoints
  std::int64_t every = 0;       // save every N steps (and at the end); 0: only at the end
  std::int64_t keep = 3;        // keep the newest N; 0: keep all
  std::int64_t keep_every = 0;  // also keep every K-th step; 0: none extra
  bool async = true;            // write on a background thread while training goes on
  bool resume = true;           // continue from the newest valid checkpoint in dir
  std::string keep_best;        // metric whose best checkpoint is kept (best_checkpoint.h); empty: none
};

// The launcher's settings: what `slurm-train run` does around the training.
struct RunSection {
  std::string log_dir = "slurm-train-logs";        // <log_dir>/<job id>/rank-<N>.log; empty: no rank logs
  double hang_timeout = 600;                       // seconds without progress before the job ends; 0: off
  std::string preempt_signal = "USR2,TERM";        // signals that mean "checkpoint and stop"
  std::int64_t max_restarts_without_progress = 3;  // then exit 7; 0: never give up
  double straggler_threshold = 1.2;                // a rank's compute time over the ranks' median that names it; 0: off
  std::string progress = "auto";                   // auto | live | lines
  std::string inject_fault;                        // a testing aid (launcher/fault_injection.h)
};

struct RunConfig {
  DataConfig data;
  ModelConfig model;
  TrainConfig train;
  CkptConfig ckpt;
  RunSection run;
  // Where each key's value came from ("default", the file path, "command line").
  std::map<std::string, std::string> origin;
};

// Every key's "section.key" name, in declaration order.
std::vector<std::string> config_keys();
std::string config_key_help(const std::string& key);
// The key's type as --help shows it: TEXT, INT, NUMBER, BOOL or [INT,...].
std::string config_key_type(const std::string& key);

// Applies a TOML file; throws ConfigError with file:line:column for syntax errors, unknown
// sections or keys (with the nearest known key), and values of the wrong type.
void apply_config_file(RunConfig& config, const std::string& path);

// The environment variable of a key: "train.lr" -> SLURM_TRAIN_TRAIN_LR; "run.log_dir" ->
// SLURM_TRAIN_LOG_DIR (the [run] keys keep the names they had as launcher options).
std::string config_key_env_name(const std::string& key);

// Applies the keys' variables of `environment` ("NAME=value" entries). Other
// SLURM_TRAIN_* names (the plugin's facts, SLURM_TRAIN_BIND, ...) are not configuration and are
// left alone; an unknown name with a section's prefix is an error naming the nearest key.
void apply_config_environment(RunConfig& config, const std::vector<std::string>& environment);

// Applies "section.key" = text from the command line.
void apply_config_override(RunConfig& config, const std::string& key, const std::string& text,
                           const std::string& origin = "command line");

// Checks ranges and choices; returns one message per problem (empty when all is well).
std::vector<std::string> validate_config(const RunConfig& config);

// Every effective value with its origin, one "section.key = value  # origin" line each.
std::string describe_config(const RunConfig& config);
// The effective configuration as TOML text (for logs and checkpoints).
std::string config_as_toml(const RunConfig& config);

// The known key nearest to `unknown` by edit distance, or the one it names as other trainers
// name it ("max_steps": train.steps); "" when none is close.
std::string nearest_config_key(const std::string& unknown);

}  // namespace slurm_train
