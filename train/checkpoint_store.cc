#include "train/checkpoint_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "train/checkpoint_file.h"
#include "train/checkpoint_policy.h"
#include "train/durable_file.h"

namespace slurm_train {

namespace fs = std::filesystem;

namespace {

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw CheckpointWriteError(fmt::format("cannot open the folder '{}' to fsync it: {}", dir, std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw CheckpointWriteError(fmt::format("cannot fsync the folder '{}': {}", dir, std::strerror(err)));
}

void rename_or_throw(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw CheckpointWriteError(fmt::format("cannot rename '{}' to '{}': {}", from, to, std::strerror(errno)));
}

// The `latest` marker, written like a checkpoint: temp file, fsync, rename, fsync the folder.
void write_latest(const std::string& dir, const std::string& name) {
  try {
    write_file_durably(dir + "/latest", name + "\n");
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

std::string save_checkpoint(const std::string& dir, const CheckpointState& state, KeepPolicy keep) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw CheckpointWriteError(fmt::format("cannot create the checkpoint folder '{}': {}", dir, ec.message()));
  const std::string name = checkpoint_file_name(state.counters.step);
  const std::string path = dir + "/" + name, tmp = temporary_path_for(path);
  try {
    write_checkpoint_file(tmp, state);
  } catch (...) {
    ::unlink(tmp.c_str());  // a partial file only wastes space: it is never read
    throw;
  }
  rename_or_throw(tmp, path);
  fsync_dir(dir);
  write_latest(dir, name);

  // The keep policy, and temporary files that a killed writer left behind (never the newest).
  std::vector<std::uint64_t> steps;
  for (const auto& e : list_checkpoints(dir)) steps.push_back(e.step);
  for (std::uint64_t step : checkpoints_to_remove(steps, keep.keep, keep.keep_every))
    if (step != state.counters.step) fs::remove(dir + "/" + checkpoint_file_name(step), ec);
  remove_stale_temporaries(dir);
  return path;
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
                                  CheckpointState& into, const std::vector<LayerLayout>* expected_layers) {
  std::vector<std::uint64_t> steps;
  for (const auto& e : list_checkpoints(dir)) steps.push_back(e.step);
  const auto chosen = choose_newest_valid(
      steps,
      [&](std::uint64_t step) -> std::string {
        try {
          read_checkpoint_file(dir + "/" + checkpoint_file_name(step), into, expected_layers);
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
