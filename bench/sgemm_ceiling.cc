// sgemm-ceiling: the CPU's practical ceiling for the engine's matrix products, measured with
// OpenBLAS cblas_sgemm on square matrices, on 1 thread and on every core. The engine's step rate
// is quoted as a fraction of this figure, measured in the same `make bench` run.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

// Best of `repeats` timed runs after one warm-up: the ceiling, not the average.
double sgemm_gflops(int n, int threads, int repeats) {
  openblas_set_num_threads(threads);
  std::vector<float> a(static_cast<std::size_t>(n) * n), b(a.size()), c(a.size());
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  for (auto* m : {&a, &b})
    for (auto& x : *m) x = uniform(rng);
  auto run = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n,
                0.f, c.data(), n);
  };
  run();
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * n * n * static_cast<double>(n) / best / 1e9;
}

}  // namespace

int main() {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("sgemm ceiling (%s; OPENBLAS_CORETYPE=%s)\n", openblas_get_config(),
              coretype ? coretype : "unset");
  std::string all_header = std::to_string(cores) + " threads GF/s";
  std::printf("%-8s %14s %16s %11s\n", "n", "1 thread GF/s", all_header.c_str(), "scaling");
  for (int n : {512, 1024, 2048, 4096}) {
    int repeats = n >= 4096 ? 2 : 5;
    double one = sgemm_gflops(n, 1, repeats);
    double all = sgemm_gflops(n, cores, repeats);
    std::printf("%-8d %14.1f %16.1f %11.0f%%\n", n, one, all, 100.0 * all / (one * cores));
  }
  return 0;
}
