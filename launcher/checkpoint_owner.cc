#include "launcher/checkpoint_owner.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "launcher/subprocess.h"
#include "spank/jobenv/host.h"
#include "spank/jobenv/utc_time.h"
#include "train/io/durable_file.h"
#include "train/io/folder_trust.h"

namespace slurm_train {

namespace fs = std::filesystem;

namespace {

template <typename T>
bool parse_number(const std::string& text, T& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

bool is_slurm_job_id(const std::string& job) {
  if (job.empty()) return false;
  for (char c : job)
    if (!(c >= '0' && c <= '9') && c != '_') return false;
  return true;
}

std::optional<CheckpointOwner> read_owner(const std::string& path, std::string& problem) {
  std::ifstream in(path);
  if (!in) {
    problem = fmt::format("cannot read '{}': {}", path, std::strerror(errno));
    return std::nullopt;
  }
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse_checkpoint_owner(text.str());
  } catch (const std::invalid_argument& e) {
    problem = fmt::format("cannot read the owner record '{}': {}", path, e.what());
    return std::nullopt;
  }
}

// This process's record under a name of its own, complete and durable before it is linked.
std::string write_own_record(const std::string& dir, const CheckpointOwner& me) {
  const std::string path = temporary_path_for(dir + "/owner");
  const std::string text = format_checkpoint_owner(me);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  if (!written) {
    ::unlink(path.c_str());
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path, std::strerror(err)));
  }
  return path;
}

// Moves a stale record out of the way under a name of ours: of two runs taking over at once,
// one rename wins and the other finds the record gone and tries the link again.
void remove_stale_record(const std::string& dir, const CheckpointOwner& stale) {
  const std::string aside = temporary_path_for(dir + "/owner.stale");
  if (::rename((dir + "/owner").c_str(), aside.c_str()) == 0) ::unlink(aside.c_str());
  // The stale owner's temporary files: its process is gone.
  std::error_code ec;
  const std::string tag = fmt::format(".tmp-{}-{}", stale.host, stale.pid);
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().filename().string().ends_with(tag)) fs::remove(entry.path(), ec);
}

}  // namespace

std::string format_checkpoint_owner(const CheckpointOwner& o) {
  return fmt::format(
      "# the job whose run writes this checkpoint folder (slurm-train removes it when the run ends)\n"
      "job = {}\nstep = {}\nhost = {}\npid = {}\nstarted = {}\n",
      o.job, o.step, o.host, o.pid, o.started);
}

CheckpointOwner parse_checkpoint_owner(const std::string& text) {
  CheckpointOwner o;
  std::set<std::string> seen;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find(" = ");
    if (eq == std::string::npos)
      throw std::invalid_argument(fmt::format("cannot read the line '{}': expected KEY = VALUE", line));
    const std::string key = line.substr(0, eq), value = line.substr(eq + 3);
    bool ok = true;
    if (key == "job")
      o.job = value;
    else if (key == "step")
      o.step = value;
    else if (key == "host")
      o.host = value;
    else if (key == "pid")
      ok = parse_number(value, o.pid) && o.pid > 0;
    else if (key == "started")
      ok = parse_number(value, o.started);
    else
      throw std::invalid_argument(fmt::format("unknown key '{}'", key));
    if (!ok) throw std::invalid_argument(fmt::format("cannot read the line '{}': expected a number", line));
    seen.insert(key);
  }
  if (seen.size() != 5 || o.job.empty() || o.host.empty())
    throw std::invalid_argument("expected the keys job, step, host, pid and started");
  return o;
}

std::string describe_checkpoint_owner(const CheckpointOwner& o) {
  return fmt::format("job {} ({}host {}, pid {}, since {})", o.job,
                     o.step.empty() ? "" : fmt::format("step {}, ", o.step), o.host, o.pid, utc_iso8601(o.started));
}

std::string stale_owner_reason(const CheckpointOwner& recorded, const CheckpointOwner& me, const OwnerFacts& facts) {
  if (recorded.host == me.host && recorded.pid == me.pid && recorded.started == me.started) return "";
  if (is_slurm_job_id(recorded.job) && recorded.job == me.job)
    return fmt::format("it is this job's own record (job {} requeued or restarted)", me.job);
  if (recorded.host == me.host && !facts.process_alive)
    return fmt::format("its process (pid {} on {}) is gone", recorded.pid, recorded.host);
  if (facts.job_active == false) return fmt::format("Slurm says job {} has ended", recorded.job);
  return "";
}

FolderClaim claim_checkpoint_folder(const std::string& dir, const CheckpointOwner& me,
                                    const std::function<std::optional<bool>(const std::string& job)>& job_active) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot create the checkpoint folder '{}': {}", dir, ec.message()));
  require_trusted_folder(fmt::format("the checkpoint folder '{}'", dir), dir);
  const std::string mine = write_own_record(dir, me), owner_path = dir + "/owner";
  FolderClaim claim;
  std::string took_over;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (::link(mine.c_str(), owner_path.c_str()) == 0) {
      claim = {true, took_over};
      break;
    }
    if (errno != EEXIST) {
      const int err = errno;
      ::unlink(mine.c_str());
      throw std::runtime_error(fmt::format("cannot create '{}': {}", owner_path, std::strerror(err)));
    }
    std::string problem;
    const auto recorded = read_owner(owner_path, problem);
    if (!recorded) {
      if (!fs::exists(owner_path)) continue;  // released meanwhile
      claim = {false, fmt::format("the checkpoint folder '{}' has an owner record this run cannot read ({}); if no "
                                  "other job uses the folder, delete {}",
                                  dir, problem, owner_path)};
      break;
    }
    OwnerFacts facts;
    if (recorded->host == me.host) facts.process_alive = process_alive(recorded->pid);
    if (is_slurm_job_id(recorded->job) && recorded->job != me.job) facts.job_active = job_active(recorded->job);
    const std::string stale = stale_owner_reason(*recorded, me, facts);
    if (stale.empty()) {
      claim = {false,
               fmt::format("the checkpoint folder '{}' belongs to {}, which is still running: a folder holds the "
                           "checkpoints of one job at a time. Give this run its own ckpt.dir, or wait until "
                           "that job has ended",
                           dir, describe_checkpoint_owner(*recorded))};
      break;
    }
    took_over = fmt::format("taking over the checkpoint folder '{}' from {}: {}", dir,
                            describe_checkpoint_owner(*recorded), stale);
    remove_stale_record(dir, *recorded);
  }
  ::unlink(mine.c_str());
  if (!claim.granted && claim.message.empty())
    claim.message = fmt::format(
        "the checkpoint folder '{}': its owner record '{}' kept changing; another run is "
        "claiming it",
        dir, owner_path);
  return claim;
}

void release_checkpoint_folder(const std::string& dir, const CheckpointOwner& me) {
  std::string problem;
  const auto recorded = read_owner(dir + "/owner", problem);
  if (recorded && recorded->host == me.host && recorded->pid == me.pid && recorded->started == me.started)
    ::unlink((dir + "/owner").c_str());
}

std::optional<bool> slurm_job_active(const std::string& job) {
  if (!is_slurm_job_id(job)) return std::nullopt;
  try {
    // Its error text too (the id holds only digits and '_'): squeue refuses an id slurmctld no
    // longer knows with "Invalid job id specified", and any other failure (no controller) says
    // nothing about the job.
    const ProcessResult r =
        run_process({"sh", "-c", fmt::format("exec squeue --noheader --states=all --jobs {} --format=%T 2>&1", job)});
    if (r.exit_code != 0)
      return r.out.find("Invalid job id") != std::string::npos ? std::optional<bool>(false) : std::nullopt;
    std::istringstream states(r.out);
    for (std::string state; states >> state;)
      if (state == "PENDING" || state == "RUNNING" || state == "SUSPENDED" || state == "COMPLETING" ||
          state == "CONFIGURING" || state == "REQUEUED" || state == "REQUEUE_HOLD" || state == "REQUEUE_FED" ||
          state == "RESIZING" || state == "SIGNALING" || state == "STOPPED" || state == "STAGE_OUT")
        return true;
    return false;
  } catch (const std::runtime_error&) {
    return std::nullopt;  // no squeue here
  }
}

}  // namespace slurm_train
