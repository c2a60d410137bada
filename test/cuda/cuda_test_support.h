// Shared by the CUDA tests: whether this machine has a usable GPU (and if not, why), device
// copies of host vectors, random inputs drawn fresh every run (the seed is printed on failure),
// and the error measure the precision bounds are stated in.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/device_buffer.h"
#include "train/comm/comm.h"

namespace slurm_train::cuda_test {

// "" when a GPU is usable, else why not (the probe's own words). Every test case carries
// `* doctest::skip(no_gpu())`; the listener in main.cc prints each skipped case with this reason.
const std::string& no_gpu_reason();
inline bool no_gpu() { return !no_gpu_reason().empty(); }

template <typename T>
cuda::DeviceBuffer<T> to_device(const std::vector<T>& host) {
  cuda::DeviceBuffer<T> d(std::max<std::size_t>(host.size(), 1));
  CUDA_CHECK(cudaMemcpy(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T>
std::vector<T> to_host(const T* device, std::size_t n) {
  std::vector<T> host(n);
  CUDA_CHECK(cudaDeviceSynchronize());
  CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

// A fresh seed per call, so that every run tests new inputs; tests CAPTURE it.
inline std::uint64_t fresh_seed() {
  static std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

template <typename T>
std::vector<T> uniform(std::size_t n, std::uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(rng));
  return v;
}

// max |got - want| / max |want|: the error relative to the result's scale, the measure in which
// the bounds are given (fp32 ~1e-6, tf32 ~1e-3, bf16 ~1e-2 for sums of products).
template <typename A, typename B, typename AllocA, typename AllocB>
double scaled_error(const std::vector<A, AllocA>& got, const std::vector<B, AllocB>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0.0, scale = 1e-30;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i])));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return worst / scale;
}

}  // namespace slurm_train::cuda_test
