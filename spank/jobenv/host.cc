#include "spank/jobenv/host.h"

#include <sched.h>
#include <unistd.h>

#include "spank/jobenv/cpuset.h"

namespace slurm_train {

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

std::string allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  CpuSet cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return format_cpulist(cpus);
}

}  // namespace slurm_train
