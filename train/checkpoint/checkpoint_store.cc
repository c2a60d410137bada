#include "train/checkpoint/checkpoint_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "train/checkpoint/checkpoint_file.h"
#include "train/checkpoint/checkpoint_policy.h"
#include "train/io/durable_file.h"

namespace slurm_train {

namespace fs = std::filesystem;

namespace {

// write_file_durably, its errors as CheckpointWriteError.
template <typename Content>
void commit(const std::string& path, const Content& content) {
  try {
    write_file_durably(path, content);
  } catch (const CheckpointWriteError&) {
    throw;
  } catch (const std::runtime_error& e) {
    throw CheckpointWriteError(e.what());
  }
}

}  // namespace

void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    const auto dot_tmp = file.find(".tmp-");
    if (dot_tmp == std::string::npos) continue;
    const std::string final_name = file.substr(0, dot_tmp);
    if (!checkpoint_step_of(final_name) && final_name != "latest" && final_name != "restarts") continue;
    const auto writer = temporary_writer(file, final_name);
    if (writer && temporary_is_removable(*writer)) fs::remove(entry.path(), ec);
  }
}

std::string save_checkpoint(const std::string& dir, const CheckpointState& state, KeepPolicy keep, unsigned slow_ms) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw CheckpointWriteError(fmt::format("cannot create the checkpoint folder '{}': {}", dir, ec.message()));
  const std::string name = checkpoint_file_name(state.counters.step);
  const std::string path = dir + "/" + name;
  commit(path, std::function<void(const std::string&)>(
                   [&](const std::string& tmp) { write_checkpoint_file(tmp, state, slow_ms); }));
  record_latest_and_keep(dir, state.counters.step, keep);
  return path;
}

void record_latest_and_keep(const std::string& dir, std::uint64_t step, KeepPolicy keep) {
  commit(dir + "/latest", checkpoint_file_name(step) + "\n");
  // The keep policy, and temporary files that a killed writer left behind (never the newest).
  std::vector<std::uint64_t> steps;
  for (const auto& e : list_checkpoints(dir)) steps.push_back(e.step);
  std::error_code ec;
  for (std::uint64_t old : checkpoints_to_remove(steps, keep.keep, keep.keep_every))
    if (old != step) fs::remove(dir + "/" + checkpoint_file_name(old), ec);
  remove_stale_temporaries(dir);
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

bool load_newest_valid_checkpoint(const std::string& dir, const std::function<void(const std::string&)>& warn,
                                  CheckpointState& into, const ModelLayout* expected) {
  std::vector<std::uint64_t> steps;
  for (const auto& e : list_checkpoints(dir)) steps.push_back(e.step);
  const auto chosen = choose_newest_valid(
      steps,
      [&](std::uint64_t step) -> std::string {
        try {
          read_checkpoint_file(dir + "/" + checkpoint_file_name(step), into, expected);
          return "";
        } catch (const CheckpointMismatch&) {
          throw;
        } catch (const std::exception& e) {
          return e.what();
        }
      },
      [&](const std::string& line) { warn(fmt::format("warning: checkpoint folder {}: {}", dir, line)); });
  return chosen.has_value();
}

std::optional<CheckpointState> load_newest_valid_checkpoint(const std::string& dir,
                                                            const std::function<void(const std::string&)>& warn) {
  CheckpointState state;
  if (!load_newest_valid_checkpoint(dir, warn, state)) return std::nullopt;
  return state;
}

std::string find_newest_valid_checkpoint(const std::string& dir, const std::function<void(const std::string&)>& warn) {
  auto state = load_newest_valid_checkpoint(dir, warn);
  return state ? dir + "/" + checkpoint_file_name(state->counters.step) : "";
}

}  // namespace slurm_train
