// OpenBLAS sgemm on square n x n matrices, C = A B, timed: the ceiling a training step's matrix
// products are measured against, run on the same threads and alternating with the steps.
#pragma once

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

namespace slurm_train::bench {

class SquareSgemm {
 public:
  explicit SquareSgemm(int n) : n_(n), a_(std::size_t(n) * n), b_(a_.size()), c_(a_.size()) {
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> uniform(-1.f, 1.f);
    for (auto* m : {&a_, &b_})
      for (auto& x : *m) x = uniform(rng);
  }
  // GFLOP/s of as many products as make up `flops` (at least one).
  double run(double flops) {
    const double per_product = 2.0 * n_ * n_ * static_cast<double>(n_);
    const int products = std::max(1, static_cast<int>(std::lround(flops / per_product)));
    const auto t0 = Clock::now();
    for (int i = 0; i < products; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n_, n_, n_, 1.f, a_.data(), n_, b_.data(), n_, 0.f,
                  c_.data(), n_);
    return products * per_product / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9;
  }

 private:
  using Clock = std::chrono::steady_clock;
  int n_;
  std::vector<float> a_, b_, c_;
};

}  // namespace slurm_train::bench
