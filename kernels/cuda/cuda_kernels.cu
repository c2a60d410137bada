// Kernels<float> on the GPU: cuBLASLt for gemm, elementwise_kernels.h for the rest.
#include "kernels/cuda/cuda_kernels.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise_kernels.h"

namespace slurm_train::cuda {
namespace {

using kernels::LossResult;

class CudaKernels final : public kernels::Kernels<float> {
 public:
  explicit CudaKernels(const CudaKernelOptions& o) : matmul_(o.tf32, o.deterministic), stream_(o.stream) {
    if (!stream_) {
      CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      own_stream_ = true;
    }
    sums_.resize(1);
    result_.resize(1);
  }
  ~CudaKernels() override {
    if (own_stream_) cudaStreamDestroy(stream_);
  }
  const char* name() const override { return "cuda"; }
  cudaStream_t stream() const { return stream_; }

  void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
            int ldb, float beta, float* c, int ldc) override {
    MatmulArgs args;
    args.trans_a = trans_a, args.trans_b = trans_b, args.m = m, args.n = n, args.k = k;
    args.a = a, args.lda = lda, args.b = b, args.ldb = ldb, args.c = c, args.ldc = ldc;
    args.alpha = alpha, args.beta = beta;
    matmul_.run(args, stream_);
  }

  void bias_activation_forward(kernels::Activation act, int rows, int cols, const float* bias, float* z, float* out,
                               const kernels::DropoutParams& dropout) override {
    cuda::bias_activation_forward(act, rows, cols, bias, z, out, dropout, stream_);
  }

  void activation_backward(kernels::Activation act, int rows, int cols, const float* z, const float* dout, float* dz,
                           float* dbias, const kernels::DropoutParams& dropout) override {
    cuda::activation_backward(act, rows, cols, z, dout, dz, dbias, dropout, stream_);
  }

  void bias_gelu_forward(int rows, int cols, const float* bias, float* z, float* out) override {
    cuda::bias_gelu_forward(rows, cols, bias, z, out, stream_);
  }

  void gelu_backward(int rows, int cols, const float* derivative, const float* dout, float* dz, float* dbias) override {
    cuda::gelu_backward(rows, cols, derivative, dout, dz, dbias, stream_);
  }

  LossResult softmax_cross_entropy(int rows, int classes, const float* logits, const std::int32_t* labels,
                                   float label_smoothing, float grad_scale, float* dlogits) override {
    row_loss_.resize(static_cast<std::size_t>(rows) + 1);
    row_flag_.resize(static_cast<std::size_t>(rows) + 1);
    cuda::softmax_cross_entropy(rows, classes, logits, labels, label_smoothing, grad_scale, dlogits,
                                LossScratch{row_loss_.data(), row_flag_.data()}, sums_.data(), stream_);
    LossSums sums{};
    CUDA_CHECK(cudaMemcpyAsync(&sums, sums_.data(), sizeof sums, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (sums.first_bad_row >= 0)
      throw std::out_of_range("softmax_cross_entropy: row " + std::to_string(sums.first_bad_row) +
                              " has a label outside [0, " + std::to_string(classes) + ")");
    return {sums.loss_sum, sums.correct};
  }

  void adamw_update(std::size_t n, float* param, const float* grad, float* m, float* v,
                    const kernels::AdamWParams& h) override {
    cuda::adamw_update(n, param, grad, m, v, h, {}, nullptr, nullptr, stream_);
  }

  void sgd_update(std::size_t n, float* param, const float* grad, float* momentum_buffer,
                  const kernels::SgdParams& h) override {
    cuda::sgd_update(n, param, grad, momentum_buffer, h, {}, nullptr, nullptr, stream_);
  }

  double sum_of_squares(std::size_t n, const float* x) override {
    partials_.resize(cuda::norm_blocks(n));
    cuda::sum_of_squares(n, x, partials_.data(), result_.data(), stream_);
    double result = 0;
    CUDA_CHECK(cudaMemcpyAsync(&result, result_.data(), sizeof result, cudaMemcpyDeviceToHost, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return result;
  }

  void scale(std::size_t n, float alpha, float* x) override { cuda::scale(n, alpha, x, stream_); }

 private:
  LtMatmul matmul_;
  cudaStream_t stream_ = nullptr;
  bool own_stream_ = false;
  DeviceBuffer<float> row_loss_;
  DeviceBuffer<int> row_flag_;
  DeviceBuffer<LossSums> sums_;
  DeviceBuffer<double> partials_, result_;
};

}  // namespace

std::unique_ptr<kernels::Kernels<float>> make_cuda_kernels(const CudaKernelOptions& options) {
  return std::make_unique<CudaKernels>(options);
}

cudaStream_t stream_of(kernels::Kernels<float>& cuda_kernels) {
  auto* k = dynamic_cast<CudaKernels*>(&cuda_kernels);
  if (!k)
    throw std::invalid_argument(std::string("stream_of: '") + cuda_kernels.name() + "' kernels are not CUDA kernels");
  return k->stream();
}

}  // namespace slurm_train::cuda
