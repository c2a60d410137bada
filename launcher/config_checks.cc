#include "launcher/config_checks.h"

#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "train/batches.h"
#include "train/dataset.h"

namespace slurm_train {

std::vector<Check> check_configuration(const RunConfig& c, const Environment& env) {
  std::vector<Check> checks;
  auto load = [&](const char* what, const std::string& path) -> std::optional<Dataset> {
    try {
      Dataset d = load_dataset({path, c.data.features, c.data.labels, c.data.num_classes});
      checks.push_back({Verdict::kOk, what, fmt::format("{}: {} samples of {} features, {} classes", path, d.count,
                                                        d.feature_size, d.num_classes)});
      return d;
    } catch (const std::exception& e) {
      checks.push_back({Verdict::kFail, what, e.what()});
      return std::nullopt;
    }
  };
  const auto train = load("train data", c.data.train);
  const auto test = load("test data", c.data.test);
  if (train && test && train->feature_size != test->feature_size)
    checks.push_back({Verdict::kFail, "data", fmt::format("{} has {} features per sample but {} has {}", c.data.test,
                                                          test->feature_size, c.data.train, train->feature_size)});
  if (train && batches_per_epoch(train->count, static_cast<std::size_t>(c.train.global_batch)) == 0)
    checks.push_back({Verdict::kFail, "data", fmt::format("train.global_batch = {} is larger than the {} samples of {}",
                                                          c.train.global_batch, train->count, c.data.train)});
  for (const std::string& out : {c.train.metrics, c.train.save, c.train.prometheus}) {
    if (out.empty()) continue;
    checks.push_back(check_folder("output", std::filesystem::absolute(out).parent_path().string(), env));
  }
  if (!c.ckpt.dir.empty()) {
    // The run creates the folder; until then its parent must take it.
    std::error_code ec;
    const auto dir = std::filesystem::absolute(c.ckpt.dir);
    checks.push_back(std::filesystem::exists(dir, ec) ? check_folder("checkpoints", dir.string(), env)
                                                      : check_folder("checkpoints", dir.parent_path().string(), env));
  }
  return checks;
}

}  // namespace slurm_train
