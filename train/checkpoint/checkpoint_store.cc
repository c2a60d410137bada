#include "train/checkpoint/checkpoint_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_policy.h"
#include "train/io/durable_file.h"
#include "train/io/trusted_folder.h"

namespace slurm_train {

namespace fs = std::filesystem;

namespace {

// The folder's durable replacement, its errors as CheckpointWriteError.
template <typename Content>
void commit(const TrustedFolder& folder, const std::string& name, const Content& content) {
  try {
    folder.replace(name, content);
  } catch (const CheckpointWriteError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw CheckpointWriteError(e.what());
  }
}

std::optional<BestRecord> best_marker_in(const TrustedFolder& folder) {
  try {
    const auto text = folder.read("best", 4096);
    return text ? std::optional<BestRecord>(parse_best_marker(*text)) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;  // read_best_marker says why to those who read it
  }
}

}  // namespace

TrustedFolder open_checkpoint_folder(const std::string& dir, bool create) {
  try {
    return TrustedFolder("the checkpoint folder", dir, create);
  } catch (const UntrustedFolder&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw CheckpointWriteError(e.what());
  }
}

void remove_stale_temporaries(const TrustedFolder& folder) {
  std::vector<std::string> names;
  try {
    names = folder.names();
  } catch (const std::runtime_error&) {
    return;  // a temporary file left behind wastes space only; the next save tries again
  }
  for (const std::string& file : names) {
    const auto dot_tmp = file.find(".tmp-");
    if (dot_tmp == std::string::npos) continue;
    const std::string final_name = file.substr(0, dot_tmp);
    if (!checkpoint_step_of(final_name) && final_name != "latest" && final_name != "best" && final_name != "restarts")
      continue;
    const auto writer = temporary_writer(file, final_name);
    if (!writer || !temporary_is_removable(*writer)) continue;
    try {
      folder.remove(file);
    } catch (const std::runtime_error&) {
      // As above: it wastes space only.
    }
  }
}

std::string save_checkpoint(const TrustedFolder& folder, const CheckpointState& state, KeepPolicy keep,
                            unsigned slow_ms) {
  const std::string name = checkpoint_file_name(state.counters.step);
  commit(folder, name, std::function<void(const FilePath&)>([&](const FilePath& tmp) {
           write_checkpoint_file(tmp, state, slow_ms);
         }));
  record_latest_and_keep(folder, state.counters.step, keep, state.best);
  return folder.shown(name);
}

std::string save_checkpoint(const std::string& dir, const CheckpointState& state, KeepPolicy keep, unsigned slow_ms) {
  return save_checkpoint(open_checkpoint_folder(dir, true), state, keep, slow_ms);
}

void record_latest_and_keep(const TrustedFolder& folder, std::uint64_t step, KeepPolicy keep,
                            const std::optional<BestRecord>& best) {
  commit(folder, "latest", checkpoint_file_name(step) + "\n");
  if (best) commit(folder, "best", format_best_marker(*best));
  // The keep policy, and temporary files that a killed writer left behind (never the newest,
  // never the best: the marker read back, whoever wrote it).
  const std::optional<BestRecord> kept_best = best ? best : best_marker_in(folder);
  // The checkpoint is committed: an old one that cannot be listed or removed now costs space
  // only, and the next save tries again.
  std::vector<std::uint64_t> steps;
  try {
    for (const std::string& name : folder.names())
      if (const auto s = checkpoint_step_of(name)) steps.push_back(*s);
  } catch (const std::runtime_error&) {
    return;
  }
  std::sort(steps.begin(), steps.end());
  for (std::uint64_t old : checkpoints_to_remove(steps, keep.keep, keep.keep_every)) {
    if (old == step || (kept_best && old == kept_best->step)) continue;
    try {
      folder.remove(checkpoint_file_name(old));
    } catch (const std::runtime_error&) {
    }
  }
  remove_stale_temporaries(folder);
}

namespace {

std::optional<std::string> read_small_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > 4096) return std::nullopt;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return std::nullopt;
  char buffer[4097];
  const std::size_t n = std::fread(buffer, 1, sizeof buffer - 1, f);
  std::fclose(f);
  return std::string(buffer, n);
}

}  // namespace

std::optional<BestRecord> read_best_marker(const std::string& dir,
                                           const std::function<void(const std::string&)>& warn) {
  const auto text = read_small_file(dir + "/best");
  if (!text) return std::nullopt;
  try {
    return parse_best_marker(*text);
  } catch (const std::invalid_argument& e) {
    if (warn) warn(fmt::format("warning: {}/best: {}; taken as no best yet", dir, e.what()));
    return std::nullopt;
  }
}

std::string resolve_checkpoint_marker(const std::string& path) {
  const fs::path p(path);
  const std::string name = p.filename().string();
  if (name != "best" && name != "latest") return path;
  std::error_code ec;
  if (fs::is_directory(p, ec)) return path;
  const std::string dir = p.parent_path().empty() ? "." : p.parent_path().string();
  const auto text = read_small_file(path);
  if (!text) throw std::runtime_error(fmt::format("cannot read the checkpoint marker '{}'", path));
  std::uint64_t step = 0;
  if (name == "best") {
    try {
      step = parse_best_marker(*text).step;
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(fmt::format("'{}': {}", path, e.what()));
    }
  } else {
    const std::string first = text->substr(0, text->find('\n'));
    const auto s = checkpoint_step_of(first);
    if (!s) throw std::runtime_error(fmt::format("'{}' names no checkpoint (expected step-NNNNNNNN.h5)", path));
    step = *s;
  }
  const std::string target = dir + "/" + checkpoint_file_name(step);
  if (!fs::exists(target, ec)) throw std::runtime_error(fmt::format("'{}' names {}, which is not there", path, target));
  return target;
}

std::vector<CheckpointEntry> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointEntry> entries;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto step = checkpoint_step_of(entry.path().filename().string());
    if (!step || !entry.is_regular_file(ec)) continue;
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0) continue;
    entries.push_back({*step, entry.path().string(), static_cast<std::uintmax_t>(st.st_size), st.st_mtime});
  }
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return entries;
}

namespace {

// The newest checkpoint of `dir` that `refusal` (the reason it is unusable, or "") accepts, the
// newer ones told to `warn` as they are skipped.
std::optional<std::uint64_t> newest_accepted(const std::string& dir,
                                             const std::function<std::string(const std::string& path)>& refusal,
                                             const std::function<void(const std::string&)>& warn) {
  std::vector<std::uint64_t> steps;
  for (const auto& e : list_checkpoints(dir)) steps.push_back(e.step);
  return choose_newest_valid(
      steps, [&](std::uint64_t step) { return refusal(dir + "/" + checkpoint_file_name(step)); },
      [&](const std::string& line) { warn(fmt::format("warning: checkpoint folder {}: {}", dir, line)); });
}

}  // namespace

bool load_newest_valid_checkpoint(const std::string& dir, const std::function<void(const std::string&)>& warn,
                                  CheckpointState& into, const ModelLayout* expected) {
  const auto read = [&](const std::string& path) -> std::string {
    try {
      read_checkpoint_file(path, into, expected);
      return "";
    } catch (const CheckpointMismatch&) {
      throw;
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  return newest_accepted(dir, read, warn).has_value();
}

std::optional<CheckpointState> load_newest_valid_checkpoint(const std::string& dir,
                                                            const std::function<void(const std::string&)>& warn) {
  CheckpointState state;
  if (!load_newest_valid_checkpoint(dir, warn, state)) return std::nullopt;
  return state;
}

std::string find_newest_valid_checkpoint(const std::string& dir, const std::function<void(const std::string&)>& warn) {
  // Each candidate is checked as `ckpt verify` checks it (its structure in a separate process,
  // every dataset's checksum), which reads the file at the disk's speed into no memory of its
  // size: the caller then reads the one chosen, often only its model's third.
  const auto verify = [](const std::string& path) -> std::string {
    try {
      std::string problems;
      for (const std::string& p : verify_checkpoint_file(path)) problems += (problems.empty() ? "" : "; ") + p;
      return problems;
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  const auto chosen = newest_accepted(dir, verify, warn);
  return chosen ? dir + "/" + checkpoint_file_name(*chosen) : "";
}

std::string checkpoint_to_read(const std::string& given, const std::function<void(const std::string&)>& warn) {
  const std::string path = resolve_checkpoint_marker(given);
  if (!fs::is_directory(path)) return path;
  const std::string newest = find_newest_valid_checkpoint(path, warn);
  if (newest.empty())
    throw std::runtime_error(fmt::format("{}: no valid checkpoint (step-<8 digits>.h5) in this folder", given));
  return newest;
}

}  // namespace slurm_train
