#include "train/config/config.h"
#include "train/checkpoint/best_checkpoint.h"
#include "train/config/toml_workarounds.h"

#include <fmt/format.h>

#include <stdexcept>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <sstream>
#include <string_view>
#include <utility>
#include <variant>

namespace slurm_train {

namespace {

using ValueRef = std::variant<std::string*, int*, std::int64_t*, double*, bool*, std::vector<int>*>;

struct Key {
  const char* name;
  const char* help;
  std::function<ValueRef(RunConfig&)> ref;
  const char* env = nullptr;  // its environment variable when not SLURM_TRAIN_<SECTION>_<KEY>
};

// The one table of keys: name, help, where the value lives.
const std::vector<Key>& keys() {
  static const std::vector<Key> table = {
      {"data.train", "HDF5 file of the training set (gpt: a token file, its training split)",
       [](RunConfig& c) -> ValueRef { return &c.data.train; }},
      {"data.test", "HDF5 file of the test set (gpt: a token file, its validation split)",
       [](RunConfig& c) -> ValueRef { return &c.data.test; }},
      {"data.features", "features dataset [N, ...], uint8 or float",
       [](RunConfig& c) -> ValueRef { return &c.data.features; }},
      {"data.labels", "integer labels dataset [N]", [](RunConfig& c) -> ValueRef { return &c.data.labels; }},
      {"data.num_classes", "number of classes", [](RunConfig& c) -> ValueRef { return &c.data.num_classes; }},
      {"model.kind", "mlp (a classifier of data.features) or gpt (a transformer of byte tokens)",
       [](RunConfig& c) -> ValueRef { return &c.model.kind; }},
      {"model.hidden", "mlp: hidden layer widths, e.g. [1024, 512]",
       [](RunConfig& c) -> ValueRef { return &c.model.hidden; }},
      {"model.activation", "mlp: relu or gelu", [](RunConfig& c) -> ValueRef { return &c.model.activation; }},
      {"model.dropout",
       "dropout in [0, 1): mlp after each hidden layer; gpt on the embeddings and each residual branch",
       [](RunConfig& c) -> ValueRef { return &c.model.dropout; }},
      {"model.layers", "gpt: transformer blocks (n_layer)", [](RunConfig& c) -> ValueRef { return &c.model.layers; }},
      {"model.heads", "gpt: attention heads (n_head)", [](RunConfig& c) -> ValueRef { return &c.model.heads; }},
      {"model.embd", "gpt: embedding width (n_embd), a multiple of model.heads",
       [](RunConfig& c) -> ValueRef { return &c.model.embd; }},
      {"model.block", "gpt: context in tokens (n_positions); a training row is a window of this many",
       [](RunConfig& c) -> ValueRef { return &c.model.block; }},
      {"train.epochs", "epochs to train (unless train.steps > 0)",
       [](RunConfig& c) -> ValueRef { return &c.train.epochs; }},
      {"train.steps", "steps to train; 0: train.epochs decides",
       [](RunConfig& c) -> ValueRef { return &c.train.steps; }},
      {"train.global_batch", "samples per step over all ranks",
       [](RunConfig& c) -> ValueRef { return &c.train.global_batch; }},
      {"train.seed", "seed of initialisation, shuffling and dropout",
       [](RunConfig& c) -> ValueRef { return &c.train.seed; }},
      {"train.optimizer", "adamw or sgd", [](RunConfig& c) -> ValueRef { return &c.train.optimizer; }},
      {"train.lr", "peak learning rate", [](RunConfig& c) -> ValueRef { return &c.train.lr; }},
      {"train.momentum", "SGD momentum", [](RunConfig& c) -> ValueRef { return &c.train.momentum; }},
      {"train.nesterov", "SGD with Nesterov momentum", [](RunConfig& c) -> ValueRef { return &c.train.nesterov; }},
      {"train.weight_decay", "decoupled (AdamW) or L2 (SGD) weight decay, weights only",
       [](RunConfig& c) -> ValueRef { return &c.train.weight_decay; }},
      {"train.beta1", "AdamW beta1", [](RunConfig& c) -> ValueRef { return &c.train.beta1; }},
      {"train.beta2", "AdamW beta2", [](RunConfig& c) -> ValueRef { return &c.train.beta2; }},
      {"train.eps", "AdamW epsilon", [](RunConfig& c) -> ValueRef { return &c.train.eps; }},
      {"train.schedule", "constant or cosine (linear warmup, then cosine decay)",
       [](RunConfig& c) -> ValueRef { return &c.train.schedule; }},
      {"train.warmup_steps", "linear warmup steps of the cosine schedule",
       [](RunConfig& c) -> ValueRef { return &c.train.warmup_steps; }},
      {"train.min_lr_ratio", "cosine decays to lr * min_lr_ratio",
       [](RunConfig& c) -> ValueRef { return &c.train.min_lr_ratio; }},
      {"train.clip_norm", "clip gradients to this global norm; 0: off",
       [](RunConfig& c) -> ValueRef { return &c.train.clip_norm; }},
      {"train.label_smoothing", "label smoothing of the cross-entropy, in [0, 1)",
       [](RunConfig& c) -> ValueRef { return &c.train.label_smoothing; }},
      {"train.bucket_mb", "gradient all-reduce bucket size (MiB)",
       [](RunConfig& c) -> ValueRef { return &c.train.bucket_mb; }},
      {"train.metrics", "JSON-lines file of per-step metrics; empty: none",
       [](RunConfig& c) -> ValueRef { return &c.train.metrics; }},
      {"train.save", "HDF5 file for the final model (/model/<layer>.weight|bias); empty: none",
       [](RunConfig& c) -> ValueRef { return &c.train.save; }},
      {"train.prometheus", "Prometheus textfile-collector file (.prom) rank 0 rewrites; empty: none",
       [](RunConfig& c) -> ValueRef { return &c.train.prometheus; }},
      {"train.prometheus_every", "steps between rewrites of train.prometheus",
       [](RunConfig& c) -> ValueRef { return &c.train.prometheus_every; }},
      {"train.tensorboard",
       "TensorBoard event folder rank 0 writes: the step's scalars every step, the evaluation's, the GPU's; \"{job}\" "
       "is the job id; empty: none",
       [](RunConfig& c) -> ValueRef { return &c.train.tensorboard; }},
      {"train.tensorboard_histograms",
       "steps between histograms of every weight and gradient tensor in train.tensorboard; 0: none",
       [](RunConfig& c) -> ValueRef { return &c.train.tensorboard_histograms; }},
      {"train.threads", "BLAS threads per rank; 0: this rank's share of its CPUs",
       [](RunConfig& c) -> ValueRef { return &c.train.threads; }},
      {"train.kernels", "cpu (OpenBLAS) or reference (plain loops, slow)",
       [](RunConfig& c) -> ValueRef { return &c.train.kernels; }},
      {"train.device",
       "auto (the GPU when this rank sees one, else the CPU, said in one line), cpu or cuda (a GPU or an error)",
       [](RunConfig& c) -> ValueRef { return &c.train.device; }},
      {"train.precision",
       "GPU arithmetic: auto (bf16), fp32, tf32 or bf16 (bf16 products and activations, fp32 master weights, gradients "
       "and optimizer); the CPU computes in fp32",
       [](RunConfig& c) -> ValueRef { return &c.train.precision; }},
      {"train.gpu",
       "the visible GPU this rank drives; -1: one GPU per rank (the one the binding left, or the rank's place on its "
       "node)",
       [](RunConfig& c) -> ValueRef { return &c.train.gpu; }},
      {"train.deterministic",
       "GPU: the same results bit for bit on every run (matrix-product algorithms without split reductions; a little "
       "slower); the CPU always is",
       [](RunConfig& c) -> ValueRef { return &c.train.deterministic; }},
      {"train.shard_optimizer",
       "shard the optimizer state over the ranks (ZeRO stage 1: gradients reduce-scattered, each rank updates its "
       "shard, parameters all-gathered): 1/N of the optimizer memory per rank; every rank writes its shard of each "
       "checkpoint; on a GPU for model.kind = gpt only so far",
       [](RunConfig& c) -> ValueRef { return &c.train.shard_optimizer; }},
      {"train.eval_batch", "rows per evaluation batch", [](RunConfig& c) -> ValueRef { return &c.train.eval_batch; }},
      {"train.stop_after",
       "stop once this many steps are done (checkpointing first), as a preempted job would; 0: run to the end",
       [](RunConfig& c) -> ValueRef { return &c.train.stop_after; }},
      {"train.log_every", "steps between progress lines on rank 0 and in every rank's log; 0: only the epoch lines",
       [](RunConfig& c) -> ValueRef { return &c.train.log_every; }},
      {"ckpt.dir", "checkpoint folder (step-<8 digits>.h5 and a 'latest' marker); empty: no checkpoints",
       [](RunConfig& c) -> ValueRef { return &c.ckpt.dir; }},
      {"ckpt.every", "save a checkpoint every N steps (and always at the end); 0: only at the end",
       [](RunConfig& c) -> ValueRef { return &c.ckpt.every; }},
      {"ckpt.keep", "keep the newest N checkpoints; 0: keep all",
       [](RunConfig& c) -> ValueRef { return &c.ckpt.keep; }},
      {"ckpt.keep_every", "also keep every checkpoint whose step is a multiple of K; 0: none",
       [](RunConfig& c) -> ValueRef { return &c.ckpt.keep_every; }},
      {"ckpt.keep_best",
       "keep the best checkpoint by this evaluation metric, test_loss, test_accuracy or train_loss (lower or higher as "
       "its name says, or :min / :max), marked 'best' in ckpt.dir and never removed; empty: none",
       [](RunConfig& c) -> ValueRef { return &c.ckpt.keep_best; }},
      {"ckpt.async", "write checkpoints on a background thread while training goes on",
       [](RunConfig& c) -> ValueRef { return &c.ckpt.async; }},
      {"ckpt.resume", "continue from the newest valid checkpoint in ckpt.dir when there is one (--no-resume: false)",
       [](RunConfig& c) -> ValueRef { return &c.ckpt.resume; }},
      {"run.log_dir", "every rank appends to <log_dir>/<job id>/rank-<N>.log; empty: no rank logs (--log-dir)",
       [](RunConfig& c) -> ValueRef { return &c.run.log_dir; }, "SLURM_TRAIN_LOG_DIR"},
      {"run.hang_timeout",
       "seconds a rank may go without progress before the watchdog ends the job (exit 4); 0: off (--hang-timeout)",
       [](RunConfig& c) -> ValueRef { return &c.run.hang_timeout; }, "SLURM_TRAIN_HANG_TIMEOUT"},
      {"run.straggler_threshold",
       "name a rank whose compute time per step (waits in collectives left out) stays above this many times the "
       "ranks' median for 3 windows of 2 s; 0: off (--straggler-threshold)",
       [](RunConfig& c) -> ValueRef { return &c.run.straggler_threshold; }},
      {"run.preempt_signal",
       "signals that mean 'checkpoint and stop', comma-separated: Slurm sends SIGTERM before preempting and the one of "
       "sbatch --signal before the time limit (--preempt-signal)",
       [](RunConfig& c) -> ValueRef { return &c.run.preempt_signal; }, "SLURM_TRAIN_PREEMPT_SIGNAL"},
      {"run.max_restarts_without_progress",
       "give up (exit 7) after this many starts in a row from the same checkpoint; 0: never "
       "(--max-restarts-without-progress)",
       [](RunConfig& c) -> ValueRef { return &c.run.max_restarts_without_progress; },
       "SLURM_TRAIN_MAX_RESTARTS_WITHOUT_PROGRESS"},
      {"run.progress",
       "rank 0's progress display: live (one line rewritten in place), lines (plain lines every train.log_every steps) "
       "or auto (live on a terminal) (--progress)",
       [](RunConfig& c) -> ValueRef { return &c.run.progress; }, "SLURM_TRAIN_PROGRESS"},
      {"run.inject_fault",
       "testing aid: hang@STEP:RANK, crash@STEP:RANK, nan@STEP:RANK, slow@MS, slow-ckpt@MS, comma-separated "
       "(--inject-fault)",
       [](RunConfig& c) -> ValueRef { return &c.run.inject_fault; }, "SLURM_TRAIN_INJECT_FAULT"},
  };
  return table;
}

const Key* find_key(const std::string& name) {
  for (const Key& k : keys())
    if (name == k.name) return &k;
  return nullptr;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string unknown_key_message(const std::string& key) {
  const std::string near = nearest_config_key(key);
  return near.empty() ? fmt::format("unknown key '{}'", key)
                      : fmt::format("unknown key '{}' (did you mean '{}'?)", key, near);
}

// What a key of type T accepts, for errors: "a whole number in [-2147483648, 2147483647]".
template <typename T>
std::string expected_number() {
  if constexpr (std::is_floating_point_v<T>)
    return "a finite number";
  else
    return fmt::format("a whole number in [{}, {}]", std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
}

// A whole number into T, refused when T cannot hold it (a cast would wrap 2^32 + 16 to 16).
template <typename T>
T narrow_integer(const std::string& key, std::int64_t value, const std::string& where) {
  if (!std::in_range<T>(value))
    throw ConfigError(fmt::format("{}{} = {}: expected {}", where, key, value, expected_number<T>()));
  return static_cast<T>(value);
}

// A non-finite value (inf, nan) is never a meaningful setting: it would train to NaN.
double finite_number(const std::string& key, double value, const std::string& where) {
  if (!std::isfinite(value)) throw ConfigError(fmt::format("{}{} = {}: expected a finite number", where, key, value));
  return value;
}

template <typename T>
T parse_number(const std::string& key, const std::string& text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  bool ok = ec == std::errc() && ptr == end;
  if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(value);
  if (!ok) throw ConfigError(fmt::format("{} = '{}': expected {}", key, text, expected_number<T>()));
  return value;
}

// Where `text` stops being UTF-8 (TOML's text, and so what the effective configuration that
// checkpoints record can hold), or npos.
std::size_t invalid_utf8_at(const std::string& text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xe ? 3 : (b >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > text.size()) return i;
    std::uint32_t cp = n == 1 ? b : b & (0x7f >> n);
    for (std::size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xc0) != 0x80) return i;
      cp = cp << 6 | (c & 0x3f);
    }
    constexpr std::uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kLeast[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;  // overlong, too big, surrogate
    i += n;
  }
  return std::string::npos;
}

// Text from the command line into the key's type.
void assign_text(const std::string& key, ValueRef ref, const std::string& text) {
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (const std::size_t at = invalid_utf8_at(text); at != std::string::npos)
            throw ConfigError(fmt::format("{}: byte {} of the value ({:#04x}) is not UTF-8 (expected UTF-8 text)", key,
                                          at + 1, static_cast<unsigned char>(text[at])));
          *p = text;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (text == "true" || text == "1" || text == "on")
            *p = true;
          else if (text == "false" || text == "0" || text == "off")
            *p = false;
          else
            throw ConfigError(fmt::format("{} = '{}': expected true or false", key, text));
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          // "[1024, 512]", "1024,512" or "" (no hidden layer)
          std::string list = text;
          list.erase(
              std::remove_if(list.begin(), list.end(), [](char ch) { return ch == '[' || ch == ']' || ch == ' '; }),
              list.end());
          p->clear();
          std::stringstream items(list);
          for (std::string item; std::getline(items, item, ',');) p->push_back(parse_number<int>(key, item));
        } else {
          *p = parse_number<T>(key, text);
        }
      },
      ref);
}

// A TOML value into the key's type; `where` is "file:line:column".
void assign_toml(const std::string& key, ValueRef ref, const toml::node& node, const std::string& where) {
  auto wrong = [&](const char* expected) {
    return ConfigError(fmt::format("{}: {}: expected {}", where, key, expected));
  };
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!node.is_string()) throw wrong("a string");
          *p = node.as_string()->get();
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!node.is_boolean()) throw wrong("true or false");
          *p = node.as_boolean()->get();
        } else if constexpr (std::is_same_v<T, std::vector<int>>) {
          if (!node.is_array()) throw wrong("an array of whole numbers, e.g. [1024, 512]");
          p->clear();
          for (const toml::node& item : *node.as_array()) {
            if (!item.is_integer()) throw wrong("an array of whole numbers, e.g. [1024, 512]");
            p->push_back(narrow_integer<int>(key, item.as_integer()->get(), where + ": "));
          }
        } else if constexpr (std::is_floating_point_v<T>) {
          if (node.is_floating_point())
            *p = finite_number(key, node.as_floating_point()->get(), where + ": ");
          else if (node.is_integer())
            *p = static_cast<T>(node.as_integer()->get());
          else
            throw wrong("a number");
        } else {
          if (!node.is_integer()) throw wrong("a whole number");
          *p = narrow_integer<T>(key, node.as_integer()->get(), where + ": ");
        }
      },
      ref);
}

std::string show(ValueRef ref) {
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          std::ostringstream quoted;  // TOML quoting and escaping
          quoted << toml::value<std::string>(*p);
          return quoted.str();
        } else if constexpr (std::is_same_v<T, bool>)
          return *p ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::vector<int>>)
          return fmt::format("[{}]", fmt::join(*p, ", "));
        else if constexpr (std::is_floating_point_v<T>)
          return fmt::format("{}", *p);
        else
          return std::to_string(*p);
      },
      ref);
}

}  // namespace

std::vector<std::string> config_keys() {
  std::vector<std::string> names;
  for (const Key& k : keys()) names.emplace_back(k.name);
  return names;
}

std::string config_key_help(const std::string& key) {
  const Key* k = find_key(key);
  return k ? k->help : "";
}

std::string config_key_type(const std::string& key) {
  const Key* k = find_key(key);
  if (!k) return "";
  RunConfig scratch;
  return std::visit(
      [](auto* p) -> std::string {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>)
          return "TEXT";
        else if constexpr (std::is_same_v<T, bool>)
          return "BOOL";
        else if constexpr (std::is_same_v<T, std::vector<int>>)
          return "[INT,...]";
        else if constexpr (std::is_floating_point_v<T>)
          return "NUMBER";
        else
          return "INT";
      },
      k->ref(scratch));
}

// Names other trainers (nanoGPT, Hugging Face's Trainer, PyTorch Lightning) give some keys, too far
// from ours for the edit distance to find; matched on the part after the section, if any.
constexpr std::pair<std::string_view, std::string_view> kOtherTrainersNames[] = {
    {"block_size", "model.block"},
    {"n_ctx", "model.block"},
    {"num_layers", "model.layers"},
    {"num_heads", "model.heads"},
    {"num_attention_heads", "model.heads"},
    {"d_model", "model.embd"},
    {"max_steps", "train.steps"},
    {"max_iters", "train.steps"},
    {"num_steps", "train.steps"},
    {"max_epochs", "train.epochs"},
    {"num_epochs", "train.epochs"},
    {"num_train_epochs", "train.epochs"},
    {"batch_size", "train.global_batch"},
    {"learning_rate", "train.lr"},
    {"grad_clip", "train.clip_norm"},
    {"max_grad_norm", "train.clip_norm"},
    {"gradient_clip_val", "train.clip_norm"},
    {"out_dir", "ckpt.dir"},
    {"output_dir", "ckpt.dir"},
    {"checkpoint_dir", "ckpt.dir"},
};

std::string nearest_config_key(const std::string& unknown) {
  const std::string_view last = std::string_view(unknown).substr(unknown.find('.') + 1);
  for (const auto& [other, ours] : kOtherTrainersNames)
    if (last == other) return std::string(ours);
  std::string best;
  std::size_t best_distance = 4;  // farther than this is no suggestion
  for (const Key& k : keys()) {
    const std::string name = k.name;
    std::size_t d = edit_distance(unknown, name);
    // A key given without its section ("lr") still finds "train.lr".
    d = std::min(d, edit_distance(unknown, name.substr(name.find('.') + 1)) + 1);
    if (d < best_distance) best_distance = d, best = name;
  }
  return best;
}

std::string config_key_env_name(const std::string& key) {
  if (const Key* k = find_key(key); k && k->env) return k->env;
  std::string name = "SLURM_TRAIN_";
  for (char c : key) name += c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

void apply_config_environment(RunConfig& config, const std::vector<std::string>& environment) {
  std::map<std::string, std::string> by_env_name;  // SLURM_TRAIN_TRAIN_LR -> train.lr
  std::vector<std::string> prefixes;               // SLURM_TRAIN_TRAIN_, ...
  for (const Key& k : keys()) {
    const std::string name = k.name;
    by_env_name[config_key_env_name(name)] = name;
    const std::string prefix = config_key_env_name(name.substr(0, name.find('.'))) + "_";
    if (std::find(prefixes.begin(), prefixes.end(), prefix) == prefixes.end()) prefixes.push_back(prefix);
  }
  for (const std::string& entry : environment) {
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq), value = entry.substr(eq + 1);
    auto it = by_env_name.find(name);
    const bool configuration =
        it != by_env_name.end() ||
        std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; });
    if (!configuration) continue;
    if (it == by_env_name.end()) {
      std::string key = name.substr(std::string("SLURM_TRAIN_").size());
      std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
      key[key.find('_')] = '.';
      const std::string near = nearest_config_key(key);
      throw ConfigError(fmt::format("environment variable {}: not a configuration key{}", name,
                                    near.empty() ? "" : fmt::format(" (did you mean {}?)", config_key_env_name(near))));
    }
    apply_config_override(config, it->second, value, "environment " + name);
  }
}

void apply_config_override(RunConfig& config, const std::string& key, const std::string& text,
                           const std::string& origin) {
  const Key* k = find_key(key);
  if (!k) throw ConfigError(unknown_key_message(key));
  if (text.find('\n') != std::string::npos) throw ConfigError(fmt::format("{}: a value must be one line", key));
  assign_text(key, k->ref(config), text);
  config.origin[key] = origin;
}

void apply_config_file(RunConfig& config, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(fmt::format("{}: cannot read the configuration file", path));
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw ConfigError(fmt::format("{}: cannot read the configuration file", path));
  refuse_what_the_toml_parser_cannot_take(text, path);
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw ConfigError(fmt::format("{}:{}:{}: {}", path, where.line, where.column, e.description()));
  } catch (const TomlAssertion& e) {
    throw ConfigError(
        fmt::format("{}: not TOML that the parser can read (it stopped on its check '{}')", path, e.what()));
  }
  auto at = [&](const toml::source_region& where) {
    return fmt::format("{}:{}:{}", path, where.begin.line, where.begin.column);
  };
  for (const auto& [section, value] : root) {
    const std::string section_name(section.str());
    if (!value.is_table()) {
      throw ConfigError(fmt::format("{}: '{}' must be a section ([data], [model], [train], [ckpt] or [run]); {}",
                                    at(section.source()), section_name, unknown_key_message(section_name)));
    }
    for (const auto& [name, node] : *value.as_table()) {
      const std::string key = section_name + "." + std::string(name.str());
      const Key* k = find_key(key);
      if (!k) throw ConfigError(fmt::format("{}: {}", at(name.source()), unknown_key_message(key)));
      assign_toml(key, k->ref(config), node, at(node.source()));
      config.origin[key] = path;
    }
  }
}

std::vector<std::string> validate_config(const RunConfig& c) {
  std::vector<std::string> problems;
  auto require = [&](bool ok, const std::string& message) {
    if (!ok) problems.push_back(message);
  };
  auto choice = [&](const std::string& key, const std::string& value, std::initializer_list<const char*> allowed) {
    for (const char* a : allowed)
      if (value == a) return;
    problems.push_back(fmt::format("{} = '{}': expected one of: {}", key, value, fmt::join(allowed, ", ")));
  };
  require(!c.data.train.empty(), "data.train: a training file is needed");
  require(c.data.num_classes >= 2 && c.data.num_classes <= 1 << 16,
          fmt::format("data.num_classes = {}: expected 2..65536", c.data.num_classes));
  for (int w : c.model.hidden)
    require(w > 0 && w <= 1 << 16, fmt::format("model.hidden: width {} is outside 1..65536", w));
  choice("model.activation", c.model.activation, {"relu", "gelu"});
  require(c.model.dropout >= 0 && c.model.dropout < 1,
          fmt::format("model.dropout = {}: expected a value in [0, 1)", c.model.dropout));
  choice("model.kind", c.model.kind, {"mlp", "gpt"});
  if (c.model.kind == "gpt") {
    const auto size = [&](const char* key, int v, int most) {
      require(v >= 1 && v <= most, fmt::format("model.{} = {}: expected 1 to {}", key, v, most));
    };
    size("layers", c.model.layers, 1024);
    size("heads", c.model.heads, 1024);
    size("embd", c.model.embd, 1 << 16);
    size("block", c.model.block, 1 << 16);
    require(c.model.heads < 1 || c.model.embd % c.model.heads == 0,
            fmt::format("model.embd = {}: expected a multiple of model.heads = {}", c.model.embd, c.model.heads));
    require(c.train.label_smoothing == 0,
            fmt::format("train.label_smoothing = {}: the gpt model trains without it; set 0", c.train.label_smoothing));
  }
  require(c.train.epochs >= 1 || c.train.steps > 0,
          fmt::format("train.epochs = {}: expected at least 1", c.train.epochs));
  require(c.train.steps >= 0, fmt::format("train.steps = {}: expected 0 or more", c.train.steps));
  require(c.train.global_batch >= 1, fmt::format("train.global_batch = {}: expected at least 1", c.train.global_batch));
  choice("train.optimizer", c.train.optimizer, {"adamw", "sgd"});
  // Beyond these bounds a step overshoots by orders of magnitude and the loss becomes NaN.
  require(c.train.lr > 0 && c.train.lr <= 10, fmt::format("train.lr = {}: expected a number in (0, 10]", c.train.lr));
  require(c.train.momentum >= 0 && c.train.momentum < 1,
          fmt::format("train.momentum = {}: expected [0, 1)", c.train.momentum));
  require(c.train.weight_decay >= 0 && c.train.weight_decay <= 10,
          fmt::format("train.weight_decay = {}: expected a number in [0, 10]", c.train.weight_decay));
  require(c.train.beta1 >= 0 && c.train.beta1 < 1, fmt::format("train.beta1 = {}: expected [0, 1)", c.train.beta1));
  require(c.train.beta2 >= 0 && c.train.beta2 < 1, fmt::format("train.beta2 = {}: expected [0, 1)", c.train.beta2));
  require(c.train.eps > 0 && c.train.eps <= 1, fmt::format("train.eps = {}: expected a number in (0, 1]", c.train.eps));
  choice("train.schedule", c.train.schedule, {"cosine", "constant"});
  require(c.train.warmup_steps >= 0, fmt::format("train.warmup_steps = {}: expected 0 or more", c.train.warmup_steps));
  require(c.train.min_lr_ratio >= 0 && c.train.min_lr_ratio <= 1,
          fmt::format("train.min_lr_ratio = {}: expected [0, 1]", c.train.min_lr_ratio));
  require(c.train.clip_norm >= 0 && std::isfinite(c.train.clip_norm),
          fmt::format("train.clip_norm = {}: expected 0 (off) or a finite norm", c.train.clip_norm));
  require(c.train.label_smoothing >= 0 && c.train.label_smoothing < 1,
          fmt::format("train.label_smoothing = {}: expected [0, 1)", c.train.label_smoothing));
  require(c.train.bucket_mb > 0 && c.train.bucket_mb <= 4096,
          fmt::format("train.bucket_mb = {}: expected a size in (0, 4096]", c.train.bucket_mb));
  require(c.train.prometheus_every >= 1,
          fmt::format("train.prometheus_every = {}: expected at least 1", c.train.prometheus_every));
  require(c.train.tensorboard_histograms >= 0,
          fmt::format("train.tensorboard_histograms = {}: expected 0 (none) or a number of steps",
                      c.train.tensorboard_histograms));
  require(c.train.threads >= 0 && c.train.threads <= 4096,
          fmt::format("train.threads = {}: expected 0 (automatic) to 4096", c.train.threads));
  choice("train.kernels", c.train.kernels, {"cpu", "reference"});
  choice("train.device", c.train.device, {"auto", "cpu", "cuda"});
  choice("train.precision", c.train.precision, {"auto", "fp32", "tf32", "bf16"});
  // The sharded norm reproduces the cpu kernels' block sums (kernels.h), not the reference loop's.
  require(
      !c.train.shard_optimizer || c.train.kernels == "cpu",
      "train.shard_optimizer = true needs train.kernels = cpu (the reference kernels sum the norm in another order)");
  // On a GPU only the GPT's step shards (train.device = auto finds out on the node, model_step.cc).
  require(!c.train.shard_optimizer || c.train.device != "cuda" || c.model.kind == "gpt",
          fmt::format("train.shard_optimizer = true with train.device = cuda: on a GPU the optimizer is sharded for "
                      "model.kind = \"gpt\" only so far, and model.kind = \"{}\"; set train.shard_optimizer = false "
                      "or train.device = cpu",
                      c.model.kind));
  require(c.train.gpu >= -1 && c.train.gpu <= 1023,
          fmt::format("train.gpu = {}: expected -1 (one GPU per rank, automatically) or a GPU number 0 to 1023",
                      c.train.gpu));
  require(c.train.eval_batch >= 1, fmt::format("train.eval_batch = {}: expected at least 1", c.train.eval_batch));
  require(c.train.log_every >= 0,
          fmt::format("train.log_every = {}: expected 0 (epoch lines only) or more", c.train.log_every));
  require(c.train.stop_after >= 0, fmt::format("train.stop_after = {}: expected 0 (off) or more", c.train.stop_after));
  require(c.ckpt.every >= 0, fmt::format("ckpt.every = {}: expected 0 (only at the end) or more", c.ckpt.every));
  require(c.ckpt.keep >= 0, fmt::format("ckpt.keep = {}: expected 0 (keep all) or more", c.ckpt.keep));
  if (!c.ckpt.keep_best.empty()) {
    require(
        !c.ckpt.dir.empty(),
        fmt::format("ckpt.keep_best = '{}' needs ckpt.dir, the folder that keeps the checkpoints", c.ckpt.keep_best));
    try {
      parse_best_metric(c.ckpt.keep_best);
    } catch (const std::invalid_argument& e) {
      require(false, e.what());
    }
  }
  require(c.ckpt.keep_every >= 0, fmt::format("ckpt.keep_every = {}: expected 0 (off) or more", c.ckpt.keep_every));
  require(c.run.straggler_threshold == 0 || (c.run.straggler_threshold > 1 && c.run.straggler_threshold <= 100),
          fmt::format("run.straggler_threshold = {}: expected a factor above 1 (1.2: 20% slower than the median), or 0 "
                      "to turn straggler detection off",
                      c.run.straggler_threshold));
  require(c.run.hang_timeout >= 0,
          fmt::format("run.hang_timeout = {}: expected seconds (a finite number), or 0 to turn hang detection off",
                      c.run.hang_timeout));
  require(c.run.max_restarts_without_progress >= 0,
          fmt::format("run.max_restarts_without_progress = {}: expected 0 (never give up) or more",
                      c.run.max_restarts_without_progress));
  choice("run.progress", c.run.progress, {"auto", "live", "lines"});
  return problems;
}

std::string describe_config(const RunConfig& config) {
  RunConfig copy = config;
  std::string out;
  for (const Key& k : keys()) {
    auto it = config.origin.find(k.name);
    out += fmt::format("{:<22} = {:<32} # {}\n", k.name, show(k.ref(copy)),
                       it == config.origin.end() ? "default" : it->second);
  }
  return out;
}

std::string config_as_toml(const RunConfig& config) {
  RunConfig copy = config;
  std::string out, section;
  for (const Key& k : keys()) {
    const std::string name = k.name;
    const std::string s = name.substr(0, name.find('.'));
    if (s != section) out += fmt::format("{}[{}]\n", out.empty() ? "" : "\n", section = s);
    out += fmt::format("{} = {}\n", name.substr(name.find('.') + 1), show(k.ref(copy)));
  }
  return out;
}

}  // namespace slurm_train
