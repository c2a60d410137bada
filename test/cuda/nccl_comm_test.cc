// The NCCL Comm on one GPU as a one-rank job: the id exchange over the bootstrap Comm, in-place
// sums, buckets started during "backward" and completed by wait_all in stream order.
#include <doctest/doctest.h>

#include <numeric>

#include "test/cuda/cuda_test_support.h"
#include "train/comm/comm_nccl.h"

namespace {

using namespace slurm_train;
using namespace slurm_train::cuda_test;

TEST_CASE("nccl: a one-rank communicator sums in place, in buckets ordered after the compute stream" *
          doctest::skip(no_gpu())) {
  const auto boot = make_single_process_comm();
  cudaStream_t compute = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  {
    auto nccl = make_nccl_comm(*boot, {0, compute, std::chrono::seconds(60)});
    CHECK(nccl->size() == 1);
    std::vector<float> host(1 << 20);
    std::iota(host.begin(), host.end(), 0.0f);
    cuda::DeviceBuffer<float> d(host.size());
    // The copy is queued on the compute stream: the buckets must wait for it (events), not the host.
    CUDA_CHECK(cudaMemcpyAsync(d.data(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice, compute));
    nccl->start_allreduce_sum(d.data() + 1000, host.size() - 1000);
    nccl->progress();
    nccl->start_allreduce_sum(d.data(), 1000);
    nccl->wait_all();
    CUDA_CHECK(cudaStreamSynchronize(compute));
    CHECK(to_host(d.data(), host.size()) == host);  // one rank: the sum is the value itself
    cuda::DeviceBuffer<double> sums(2);
    const std::vector<double> two{1.5, -2.0};
    CUDA_CHECK(cudaMemcpy(sums.data(), two.data(), sizeof(double) * 2, cudaMemcpyHostToDevice));
    nccl->allreduce_sum(sums.data(), 2);
    CHECK(to_host(sums.data(), 2) == two);
  }
  CUDA_CHECK(cudaStreamDestroy(compute));
}

}  // namespace
