// mpi-layout: an MPI program of the tests' own. Every rank reports where it runs (host, Slurm
// task ids, GPUs Slurm gave it, allowed CPUs) and all ranks all-reduce a known sum. Rank 0
// prints one line per rank and the sum; the exit status is 0 only if the sum is right.
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

constexpr int kLineLength = 256;

void check(int rc, const char* call, int line) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  std::fprintf(stderr, "mpi-layout: %s failed at %s:%d: %s\n", call, __FILE__, line, text);
  MPI_Abort(MPI_COMM_WORLD, 1);
}
#define MPI_CHECK(call) check((call), #call, __LINE__)

const char* env_or(const char* name, const char* fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string list;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    if (!list.empty()) list += ',';
    list += last == cpu ? std::to_string(cpu) : std::to_string(cpu) + "-" + std::to_string(last);
    cpu = last;
  }
  return list;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_CHECK(MPI_Init(&argc, &argv));
  int rank = 0, size = 0;
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));

  char host[64] = {};
  gethostname(host, sizeof host - 1);
  char line[kLineLength];
  std::snprintf(line, sizeof line, "rank %d/%d host %s procid %s localid %s gpus %s cpus %s", rank, size, host,
                env_or("SLURM_PROCID", "-"), env_or("SLURM_LOCALID", "-"), env_or("CUDA_VISIBLE_DEVICES", "-"),
                allowed_cpus().c_str());

  std::vector<char> lines(rank == 0 ? static_cast<std::size_t>(size) * kLineLength : 0);
  MPI_CHECK(MPI_Gather(line, kLineLength, MPI_CHAR, lines.data(), kLineLength, MPI_CHAR, 0, MPI_COMM_WORLD));

  long contribution = rank + 1, sum = 0;
  MPI_CHECK(MPI_Allreduce(&contribution, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  long expected = static_cast<long>(size) * (size + 1) / 2;

  if (rank == 0) {
    for (int r = 0; r < size; ++r) std::printf("%s\n", &lines[static_cast<std::size_t>(r) * kLineLength]);
    std::printf("allreduce sum %ld expected %ld: %s\n", sum, expected, sum == expected ? "ok" : "WRONG");
  }
  MPI_CHECK(MPI_Finalize());
  return sum == expected ? 0 : 1;
}
