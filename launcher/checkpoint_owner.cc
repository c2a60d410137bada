#include "launcher/checkpoint_owner.h"

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <set>
#include <sstream>
#include <stdexcept>

#include "launcher/subprocess.h"
#include "spank/jobenv/host.h"
#include "spank/jobenv/utc_time.h"
#include "train/io/durable_file.h"
#include "train/io/write_all.h"

namespace slurm_train {

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

std::optional<CheckpointOwner> read_owner(const TrustedFolder& dir, std::string& problem) {
  std::optional<std::string> text;
  try {
    text = dir.read("owner", 4096);
  } catch (const std::runtime_error& e) {
    problem = e.what();
    return std::nullopt;
  }
  if (!text) return std::nullopt;  // released meanwhile: no problem
  try {
    return parse_checkpoint_owner(*text);
  } catch (const std::invalid_argument& e) {
    problem = fmt::format("cannot read the owner record '{}': {}", dir.shown("owner"), e.what());
    return std::nullopt;
  }
}

// Removes a file that only wastes space when left behind (a record of this process's own name,
// which no one reads; a gone owner's partial file): a failure is not the error to report.
void forget(const TrustedFolder& dir, const std::string& name) noexcept {
  try {
    dir.remove(name);
  } catch (const std::runtime_error&) {
  }
}

// This process's record under a name of its own (made exclusively, unforeseeable), complete and
// durable before it is linked.
std::string write_own_record(const TrustedFolder& dir, const CheckpointOwner& me) {
  const std::string name = temporary_name_for("owner");
  const std::string text = format_checkpoint_owner(me);
  const int fd = dir.create_exclusive(name);
  const bool written = write_all(fd, text) == text.size() && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);  // fsynced (or failed): its close reports nothing more
  if (!written) {
    forget(dir, name);
    throw std::runtime_error(fmt::format("cannot write '{}': {}", dir.shown(name), std::strerror(err)));
  }
  return name;
}

// Moves a stale record out of the way under a name of ours: of two runs taking over at once,
// one rename wins and the other finds the record gone and tries the link again.
void remove_stale_record(const TrustedFolder& dir, const CheckpointOwner& stale) {
  const std::string aside = temporary_name_for("owner.stale");
  if (dir.rename("owner", aside)) forget(dir, aside);
  // The stale owner's temporary files: its process is gone.
  for (const std::string& name : dir.names()) {
    const auto tmp = name.find(".tmp-");
    if (tmp == std::string::npos) continue;
    const auto writer = temporary_writer(name, name.substr(0, tmp));
    if (writer && writer->host == stale.host && writer->pid == stale.pid) forget(dir, name);
  }
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

FolderClaim claim_checkpoint_folder(const TrustedFolder& dir, const CheckpointOwner& me,
                                    const std::function<std::optional<bool>(const std::string& job)>& job_active) {
  const std::string mine = write_own_record(dir, me), owner_path = dir.shown("owner");
  FolderClaim claim;
  std::string took_over;
  try {
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (dir.link(mine, "owner")) {
        claim = {true, took_over};
        break;
      }
      std::string problem;
      const auto recorded = read_owner(dir, problem);
      if (!recorded) {
        if (problem.empty()) continue;  // released meanwhile
        claim = {false, fmt::format("the checkpoint folder '{}' has an owner record this run cannot read ({}); if no "
                                    "other job uses the folder, delete {}",
                                    dir.path(), problem, owner_path)};
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
                             dir.path(), describe_checkpoint_owner(*recorded))};
        break;
      }
      took_over = fmt::format("taking over the checkpoint folder '{}' from {}: {}", dir.path(),
                              describe_checkpoint_owner(*recorded), stale);
      remove_stale_record(dir, *recorded);
    }
  } catch (...) {
    forget(dir, mine);
    throw;
  }
  forget(dir, mine);
  if (!claim.granted && claim.message.empty())
    claim.message = fmt::format(
        "the checkpoint folder '{}': its owner record '{}' kept changing; another run is "
        "claiming it",
        dir.path(), owner_path);
  return claim;
}

void release_checkpoint_folder(const TrustedFolder& dir, const CheckpointOwner& me) noexcept {
  try {
    std::string problem;
    const auto recorded = read_owner(dir, problem);
    if (recorded && recorded->host == me.host && recorded->pid == me.pid && recorded->started == me.started)
      dir.remove("owner");
  } catch (const std::exception&) {
    // Left behind, the record is stale: the next run takes it over (its process is gone).
  }
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
