// spank_train.so: the only file that defines the slurm_spank_* symbols. One dispatch per
// callback; the logic lives in options.*, site_config.*, task_env.* and jobenv/.
//
//   init           (every context) parse the site's plugstack.conf arguments; register options
//   init_post_opt  (srun, sbatch, salloc) resolve and validate the options and their
//                  SLURM_TRAIN_* defaults, and that the NCCL profile exists: errors stop the
//                  command before any task starts
//   user_init      (slurmstepd, once per node, as the user) gather the step's facts once
//   task_init      (slurmstepd, per task, as the user) compute and export the task's
//                  environment, narrow its CPU set
// No exception crosses into Slurm; every failure is -1 with a message prefixed "spank_train:".
// user_init's errors are swallowed by srun (it exits 0), so they are kept and fail task_init.
// The privileged callbacks (init, init_post_opt in slurmstepd) read no user-named file.

#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" {
#include <slurm/spank.h>
}

#include "spank/jobenv/host.h"
#include "spank/jobenv/nccl_profile.h"
#include "spank/jobenv/text.h"
#include "spank/options.h"
#include "spank/site_config.h"
#include "spank/task_env.h"

// C++ gives namespace-scope consts internal linkage; Slurm must find these by name.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(spank_train, 1)
}

namespace {

using namespace slurm_train;

// Step ids at and above this are Slurm's special steps: pending, batch script (0xfffffffb),
// extern (0xfffffffc), interactive (0xfffffffa): no training environment there.
constexpr std::uint32_t kFirstSpecialStepId = 0xfffffff0u;
constexpr int kEnvValueMax = 64 * 1024;

struct PluginState {
  SiteConfig site;
  RecordedOptions recorded;
  std::optional<StepContext> step;  // remote: set in user_init for a real task step
  bool special_step = false;
  std::string deferred_error;  // found where Slurm swallows errors; fails task_init
};

PluginState& state() {
  static PluginState s;
  return s;
}

void report(const std::string& message) { slurm_error("spank_train: %s", message.c_str()); }

// Runs fn; any exception becomes a reported error and -1.
template <typename Fn>
int guarded(const char* callback, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (const std::exception& e) {
    report(e.what());
  } catch (...) {
    report(std::string("unexpected error in ") + callback);
  }
  return -1;
}

std::optional<std::string> job_getenv(spank_t sp, const std::string& name) {
  std::vector<char> buffer(kEnvValueMax + 1);
  spank_err_t rc = spank_getenv(sp, name.c_str(), buffer.data(), static_cast<int>(buffer.size()));
  if (rc == ESPANK_ENV_NOEXIST) return std::nullopt;
  if (rc == ESPANK_NOSPACE) throw InputError(name + " is longer than " + std::to_string(kEnvValueMax) + " characters");
  if (rc != ESPANK_SUCCESS) throw std::runtime_error("cannot read " + name + ": " + spank_strerror(rc));
  return std::string(buffer.data());
}

std::optional<std::string> process_getenv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (!value) return std::nullopt;
  return std::string(value);
}

template <typename T>
T get_item(spank_t sp, spank_item_t item, const char* what) {
  T value{};
  spank_err_t rc = spank_get_item(sp, item, &value);
  if (rc != ESPANK_SUCCESS) throw std::runtime_error(std::string("cannot get ") + what + ": " + spank_strerror(rc));
  return value;
}

CpuSet current_affinity() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0)
    throw std::runtime_error(std::string("sched_getaffinity: ") + std::strerror(errno));
  CpuSet cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  return cpus;
}

void set_affinity(const CpuSet& cpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int c : cpus)
    if (c < CPU_SETSIZE) CPU_SET(c, &mask);
  if (sched_setaffinity(0, sizeof mask, &mask) != 0)
    throw std::runtime_error("sched_setaffinity(" + format_cpulist(cpus) + "): " + std::strerror(errno));
}

std::vector<std::string> interfaces() {
  std::vector<std::string> names;
  struct if_nameindex* list = if_nameindex();
  if (!list) return names;
  for (auto* i = list; i->if_index != 0 && i->if_name; ++i) names.emplace_back(i->if_name);
  if_freenameindex(list);
  return names;
}

int option_callback(int val, const char* optarg, int remote) {
  return guarded("option callback", [&] {
    auto id = static_cast<OptionId>(val);
    // srun in a batch job replays sbatch's options from this variable before its own.
    auto replayed = process_getenv(inherited_option_variable(id));
    bool inherited = !remote && replayed && optarg && *replayed == optarg;
    std::string error = record_option(state().recorded, id, optarg, inherited);
    if (error.empty()) return 0;
    report(error);
    return -1;
  });
}

// Slurm may keep pointers to these: built once, never moved. Slurm never writes through the
// char* members (C's struct spank_option is not const-correct).
const std::vector<spank_option>& spank_options_table() {
  static const std::vector<spank_option> options = [] {
    std::vector<spank_option> table;
    for (const auto& spec : option_table())
      table.push_back({const_cast<char*>(spec.name), const_cast<char*>(spec.arginfo), const_cast<char*>(spec.usage),
                       spec.arginfo ? 1 : 0, static_cast<int>(spec.id), option_callback});
    return table;
  }();
  return options;
}

int register_options(spank_t sp) {
  for (const auto& option : spank_options_table()) {
    spank_err_t rc = spank_option_register(sp, const_cast<spank_option*>(&option));
    if (rc != ESPANK_SUCCESS) {
      report(std::string("cannot register --") + option.name + ": " + spank_strerror(rc));
      return -1;
    }
  }
  return 0;
}

// The profile the settings name; errors say where the name came from.
NcclProfile chosen_profile(const Settings& settings, const SiteConfig& site) {
  try {
    return load_profile(settings.nccl_profile, site.profiles_dir);
  } catch (const InputError& e) {
    throw InputError(settings.nccl_origin + "=" + settings.nccl_profile + ": " + e.what());
  }
}

// Options and their environment defaults, in srun/sbatch/salloc, before anything starts.
int validate_locally() {
  PluginState& s = state();
  Settings settings = resolve_settings(s.recorded, s.site, process_getenv);
  chosen_profile(settings, s.site);
  return 0;
}

void gather_step(spank_t sp) {
  PluginState& s = state();
  auto step_id = get_item<std::uint32_t>(sp, S_JOB_STEPID, "the step id");
  if (step_id >= kFirstSpecialStepId) {
    s.special_step = true;
    return;
  }
  StepContext step;
  step.site = s.site;
  step.settings = resolve_settings(s.recorded, s.site, [&](const std::string& n) { return job_getenv(sp, n); });
  step.profile = chosen_profile(step.settings, s.site);
  step.topology = read_topology(s.site.sysfs);
  step.step_cpus = current_affinity();
  step.node = host_name();
  step.interfaces = interfaces();
  step.job_id = get_item<std::uint32_t>(sp, S_JOB_ID, "the job id");
  step.step_id = step_id;
  step.node_id = get_item<std::uint32_t>(sp, S_JOB_NODEID, "the node id");
  step.local_tasks = get_item<std::uint32_t>(sp, S_JOB_LOCAL_TASK_COUNT, "the local task count");
  step.total_tasks = get_item<std::uint32_t>(sp, S_JOB_TOTAL_TASK_COUNT, "the total task count");
  s.step = std::move(step);
}

int apply_task_env(spank_t sp) {
  PluginState& s = state();
  if (s.special_step) return 0;
  if (!s.deferred_error.empty()) throw std::runtime_error(s.deferred_error);
  if (!s.step) throw std::runtime_error("task_init without the step's facts (user_init did not run)");
  TaskInput task;
  task.local_id = static_cast<std::uint32_t>(get_item<int>(sp, S_TASK_ID, "the local task id"));
  task.global_id = get_item<std::uint32_t>(sp, S_TASK_GLOBAL_ID, "the global task id");
  task.task_cpus = current_affinity();
  task.getenv = [&](const std::string& n) { return job_getenv(sp, n); };
  if (auto name = task.getenv("SLURMD_NODENAME")) s.step->node = *name;  // set per task only
  TaskEnv env = plan_task_env(*s.step, task);
  for (const auto& [key, value] : env.set) {
    spank_err_t rc = spank_setenv(sp, key.c_str(), value.c_str(), 1);
    if (rc != ESPANK_SUCCESS) throw std::runtime_error("cannot set " + key + ": " + spank_strerror(rc));
  }
  if (env.set_affinity) set_affinity(env.cpus);
  // The task's stderr is the user's: one line each, written whole.
  if (task.local_id == 0)
    for (const auto& warning : env.warnings)
      dprintf(STDERR_FILENO, "spank_train: warning: %s: %s\n", s.step->node.c_str(), warning.c_str());
  if (s.step->settings.verbose) dprintf(STDERR_FILENO, "spank_train: %s\n", env.verbose_line.c_str());
  return 0;
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("init", [&] {
    state().site = parse_site_args(std::vector<std::string>(av, av + ac));
    switch (spank_context()) {
      case S_CTX_LOCAL:
      case S_CTX_REMOTE:
      case S_CTX_ALLOCATOR:
        return register_options(sp);
      default:
        return 0;
    }
  });
}

int slurm_spank_init_post_opt(spank_t, int, char**) {
  return guarded("init_post_opt", [&] {
    switch (spank_context()) {
      case S_CTX_LOCAL:
      case S_CTX_ALLOCATOR:
        return validate_locally();
      default:
        return 0;  // slurmstepd: still privileged here; the step is read in user_init
    }
  });
}

// A -1 here makes srun report "launch failed" and still exit 0 (Slurm 22.05): the error is
// kept instead, and task_init fails each task with it, which srun does report as a failure.
int slurm_spank_user_init(spank_t sp, int, char**) {
  int rc = guarded("user_init", [&] {
    try {
      gather_step(sp);
    } catch (const std::exception& e) {
      state().deferred_error = e.what();
      throw;
    }
    return 0;
  });
  return rc == 0 || state().deferred_error.empty() ? rc : 0;
}

int slurm_spank_task_init(spank_t sp, int, char**) {
  return guarded("task_init", [&] { return apply_task_env(sp); });
}

}  // extern "C"
