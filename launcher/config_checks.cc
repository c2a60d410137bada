#include "launcher/config_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "launcher/launch_position.h"
#include "train/data/batches.h"
#include "train/data/dataset.h"
#include "train/data/token_dataset.h"
#include "train/models/model_memory.h"
#include "train/steps/device.h"

namespace slurm_train {

namespace {

namespace fs = std::filesystem;

DatasetSpec spec_of(const RunConfig& c, const std::string& path) {
  return {path, c.data.features, c.data.labels, c.data.num_classes};
}

// The folder an output file (train.save, ...) goes into must exist: the run does not create it,
// and finding that out after the training would lose the training.
std::optional<Check> missing_output_folder(const std::string& key, const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::error_code ec;
  const fs::path folder = fs::absolute(path, ec).parent_path();
  if (fs::is_directory(folder, ec)) return std::nullopt;
  return Check{Verdict::kFail, "output",
               fmt::format("{} = '{}': its folder '{}' does not exist (create it first)", key, path, folder.string())};
}

}  // namespace

std::vector<Check> check_before_start(const RunConfig& c, std::uint64_t ranks, const MemoryFacts& memory) {
  std::vector<Check> checks;
  std::uint64_t data_bytes = 0;
  auto inspect = [&](const char* what, const std::string& path) -> std::optional<DatasetLayout> {
    try {
      const DatasetLayout layout = inspect_dataset(spec_of(c, path));
      require_dataset_memory(spec_of(c, path), layout, memory);
      data_bytes += *layout.feature_bytes;
      checks.push_back({Verdict::kOk, what,
                        fmt::format("{}: {} samples of {} features, {} classes", path, layout.count,
                                    layout.feature_size, c.data.num_classes)});
      return layout;
    } catch (const std::exception& e) {
      checks.push_back({Verdict::kFail, what, e.what()});
      return std::nullopt;
    }
  };
  // What the model sees of the training data: rows (samples or token windows) and inputs per
  // row (features or the vocabulary).
  struct Rows {
    std::size_t count = 0, inputs = 0;
  };
  std::optional<Rows> train;
  if (c.model.kind == "gpt") {
    const auto block = static_cast<std::uint64_t>(std::max(c.model.block, 1));
    auto tokens = [&](const char* what, const std::string& path, bool training) -> std::optional<Rows> {
      try {
        const TokenFileLayout t = inspect_token_file(path);
        const std::uint64_t n = training ? t.train_tokens : t.validation_tokens;
        const std::uint64_t windows = n == 0 ? 0 : (n - 1) / block;
        data_bytes += n;
        if (windows == 0)
          throw std::invalid_argument(fmt::format("{}: its {} split has {} tokens; model.block = {} needs at least {}",
                                                  path, training ? "training" : "validation", n, block, block + 1));
        checks.push_back({Verdict::kOk, what,
                          fmt::format("{}: {} {} tokens, {} windows of {}", path, n,
                                      training ? "training" : "validation", windows, block)});
        return Rows{windows, static_cast<std::size_t>(t.vocab_size)};
      } catch (const std::exception& e) {
        checks.push_back({Verdict::kFail, what, e.what()});
        return std::nullopt;
      }
    };
    train = tokens("train data", c.data.train, true);
    tokens("test data", c.data.test, false);
  } else {
    probe_datasets({spec_of(c, c.data.train), spec_of(c, c.data.test)});
    const auto train_layout = inspect("train data", c.data.train);
    const auto test = inspect("test data", c.data.test);
    if (train_layout && test && train_layout->feature_size != test->feature_size)
      checks.push_back({Verdict::kFail, "data",
                        fmt::format("{} has {} features per sample but {} has {}", c.data.test, test->feature_size,
                                    c.data.train, train_layout->feature_size)});
    if (train_layout) train = Rows{train_layout->count, train_layout->feature_size};
  }
  if (ranks > 0 && static_cast<std::uint64_t>(c.train.global_batch) < ranks)
    checks.push_back({Verdict::kFail, "data",
                      fmt::format("train.global_batch = {} is smaller than the {} ranks: every "
                                  "rank needs a row",
                                  c.train.global_batch, ranks)});
  if (train && batches_per_epoch(train->count, static_cast<std::size_t>(c.train.global_batch)) == 0)
    checks.push_back({Verdict::kFail, "data",
                      fmt::format("train.global_batch = {} is larger than the {} {} of {}", c.train.global_batch,
                                  train->count, c.model.kind == "gpt" ? "token windows" : "samples", c.data.train)});
  if (train) {
    const ModelMemory model = model_training_memory(c, train->inputs, ranks);
    MemoryFacts rest = memory;  // what the datasets leave
    rest.mem_available =
        memory.mem_available > data_bytes ? memory.mem_available - data_bytes : (memory.mem_available ? 1 : 0);
    rest.mapped += data_bytes;
    rest.data += data_bytes;
    try {
      const std::string what = c.model.kind == "gpt"
                                   ? fmt::format("model.layers = {}, model.embd = {}, model.block = {}", c.model.layers,
                                                 c.model.embd, c.model.block)
                                   : fmt::format("model.hidden = [{}]", fmt::join(c.model.hidden, ", "));
      require_memory(what, model.bytes, model.why, rest);
      checks.push_back({Verdict::kOk, "model",
                        fmt::format("{} parameters, {} to train", model.parameters, format_bytes(*model.bytes))});
    } catch (const MemoryError& e) {
      checks.push_back({Verdict::kFail, "model", e.what()});
    }
  }
  // train.device = cuda on a node without a usable GPU is refused here, on every rank alike,
  // rather than by each rank once MPI has started.
  if (c.train.device != "cpu") {
    try {
      choose_device(c.train.device, probe_cuda());
    } catch (const std::exception& e) {
      checks.push_back({Verdict::kFail, "device", e.what()});
    }
  }
  for (const auto& [key, path] : {std::pair{"train.save", c.train.save}, std::pair{"train.metrics", c.train.metrics},
                                  std::pair{"train.prometheus", c.train.prometheus}})
    if (auto missing = missing_output_folder(key, path)) checks.push_back(*missing);
  // ckpt.dir is not among them: the run creates it, parents and all.
  return checks;
}

std::vector<Check> check_configuration(const RunConfig& c, const Environment& env) {
  std::vector<Check> checks =
      check_before_start(c, static_cast<std::uint64_t>(launch_position(env).size), current_memory_facts());
  const bool data_inspected = !any_failed(checks);
  for (const auto& [what, path] : {std::pair{"train data", c.data.train}, std::pair{"test data", c.data.test}}) {
    if (!data_inspected || c.model.kind == "gpt") break;  // token files: inspect_token_file checked them
    try {
      load_dataset(spec_of(c, path));
    } catch (const std::exception& e) {
      checks.push_back({Verdict::kFail, what, e.what()});
    }
  }
  for (const std::string& out : {c.train.metrics, c.train.save, c.train.prometheus}) {
    if (out.empty()) continue;
    checks.push_back(check_folder("output", fs::absolute(out).parent_path().string(), env));
  }
  if (!c.ckpt.dir.empty()) {
    // The run creates the folder; until then its parent must take it.
    std::error_code ec;
    const auto dir = fs::absolute(c.ckpt.dir);
    checks.push_back(fs::exists(dir, ec) ? check_folder("checkpoints", dir.string(), env)
                                         : check_folder("checkpoints", dir.parent_path().string(), env));
  }
  return checks;
}

}  // namespace slurm_train
