// The GPU training step (see cuda_mlp_step.h).
#if defined(SLURM_TRAIN_WITH_CUDA)
#include "train/steps/cuda_mlp_step.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "train/steps/device_batches.h"
#include "train/steps/device_optimizer.h"

namespace slurm_train {

namespace {

using cuda::bf16;
using cuda::DataType;
using cuda::DeviceBuffer;
using cuda::Epilogue;
using cuda::MatmulArgs;
using kernels::Activation;

template <typename T>
constexpr DataType data_type() {
  return std::is_same_v<T, bf16> ? DataType::kBF16 : DataType::kF32;
}

}  // namespace

struct CudaMlpStep::State {
  MlpShape shape;
  CudaMlpStepOptions o;
  std::vector<LayerLayout> packed, layers;  // host (checkpoint) layout, device layout
  ModelLayout model;                        // the packed layout's tensors
  bool half = false;                        // bf16 precision (activations and the weights' working copy in bf16)
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::LtMatmul> lt;
  std::unique_ptr<DeviceBatchUploader> uploader;
  std::unique_ptr<DeviceOptimizer> optimizer;  // the parameters, their gradients and the update
  DeviceBuffer<bf16> x16, dbias16;
  // Per layer: output a, pre-activation z (layers not fused), ReLU bit-mask (fused layers); in
  // the activation type (float or bf16), hence bytes.
  std::vector<DeviceBuffer<std::uint8_t>> act, pre, mask;
  DeviceBuffer<float> logits;
  DeviceBuffer<std::uint8_t> dlogits, gz[2], ga;
  DeviceBuffer<float> row_loss;
  DeviceBuffer<int> row_flag;
  DeviceBuffer<cuda::LossSums> sums;
  cuda::PinnedBuffer<cuda::LossSums> host_sums;
  cudaEvent_t loss_ready = nullptr;
  std::vector<bool> fused;
  bool dropout_active = false;
  std::uint64_t first_row = 0;
  DeviceBatch batch;  // the rows of the step in flight

  std::size_t last() const { return layers.size() - 1; }
  template <typename T>
  T* as(DeviceBuffer<std::uint8_t>& b) {
    return reinterpret_cast<T*>(b.data());
  }
  // The weights and biases the products read: the bf16 copy, or the fp32 master.
  template <typename T>
  T* weights() {
    if constexpr (std::is_same_v<T, bf16>)
      return optimizer->working();
    else
      return optimizer->params();
  }

  // As Mlp::dropout_of: the same masks as the CPU path.
  kernels::DropoutParams dropout_of(std::size_t layer) const {
    if (layer == last() || !dropout_active) return {};
    return {shape.dropout, kernels::mix64(o.dropout_seed + 0x9e37 * (layer + 1)), first_row};
  }

  // Hidden layer l's forward product, and the next layer's input-gradient product that would
  // apply its ReLU gradient.
  template <typename T>
  MatmulArgs forward_args(std::size_t l, const T* input, int rows) {
    const LayerLayout& L = layers[l];
    MatmulArgs a{false, true, rows, L.out, L.in, input, L.in, weights<T>() + L.weight, L.in, as<T>(act[l]), L.out};
    a.ab_type = a.c_type = data_type<T>();
    a.epilogue = Epilogue::kReluAuxBias;
    a.bias = weights<T>() + L.bias;
    a.aux = mask[l].data();
    a.aux_ld = cuda::relu_mask_ld(L.out);
    return a;
  }
  template <typename T>
  MatmulArgs input_gradient_args(std::size_t l, const T* dz, T* out, int rows) {
    const LayerLayout& L = layers[l];  // layer l's dz -> the gradient of layer l-1's output
    const LayerLayout& B = layers[l - 1];
    MatmulArgs a{false, false, rows, L.in, L.out, dz, L.out, weights<T>() + L.weight, L.in, out, L.in};
    a.ab_type = a.c_type = data_type<T>();
    if (!fused[l - 1]) return a;
    a.epilogue = Epilogue::kDReluBgrad;
    a.bias = half ? static_cast<void*>(dbias16.data()) : static_cast<void*>(optimizer->grads() + B.bias);
    a.aux = mask[l - 1].data();
    a.aux_ld = cuda::relu_mask_ld(B.out);
    return a;
  }

  template <typename T>
  void forward(const float* x, int rows, bool training) {
    const T* input = nullptr;
    if constexpr (std::is_same_v<T, bf16>) {
      cuda::cast(static_cast<std::size_t>(rows) * shape.inputs, x, x16.data(), stream);
      input = x16.data();
    } else {
      input = x;
    }
    for (std::size_t l = 0; l < last(); ++l) {
      const LayerLayout& L = layers[l];
      MatmulArgs a = forward_args<T>(l, input, rows);
      const kernels::DropoutParams d = dropout_of(l);
      bool fuse = o.fuse_epilogues && shape.activation == Activation::kRelu && d.p == 0.0f && lt->supports(a);
      if (training) {
        // Fused forward needs the fused backward (DRELU_BGRAD reads the bit-mask) in the input-
        // gradient product of layer l+1; input_gradient_args reads fused[l] to build it.
        fused[l] = fuse;
        if (fuse) fused[l] = fuse = lt->supports(input_gradient_args<T>(l + 1, as<T>(gz[0]), as<T>(gz[1]), rows));
      }
      if (fuse) {
        lt->run(a, stream);
      } else {
        a.epilogue = Epilogue::kNone, a.bias = nullptr, a.aux = nullptr, a.aux_ld = 0;
        a.c = pre[l].data();
        lt->run(a, stream);
        cuda::bias_activation_forward<T>(shape.activation, rows, L.out, weights<T>() + L.bias, as<T>(pre[l]),
                                         as<T>(act[l]), d, stream);
      }
      input = as<T>(act[l]);
    }
    // The logits, in fp32 whatever the precision, their bias (fp32, the output's type) fused.
    const LayerLayout& L = layers[last()];
    MatmulArgs a{false, true, rows, L.out, L.in, input, L.in, weights<T>() + L.weight, L.in, logits.data(), L.out};
    a.ab_type = data_type<T>();
    a.c_type = DataType::kF32;
    a.epilogue = Epilogue::kBias;
    a.bias = optimizer->params() + L.bias;
    if (o.fuse_epilogues && lt->supports(a)) {
      lt->run(a, stream);
      return;
    }
    a.epilogue = Epilogue::kNone, a.bias = nullptr;
    lt->run(a, stream);
    cuda::bias_activation_forward<float>(Activation::kIdentity, rows, L.out, optimizer->params() + L.bias,
                                         logits.data(), logits.data(), {}, stream);
  }

  template <typename T>
  void backward(const float* x, int rows) {
    // The logits layer's dz is dlogits itself (identity); its bias gradient is their column sums.
    const std::size_t top = last();
    T* dz = as<T>(dlogits);
    float* grads = optimizer->grads();
    cuda::activation_backward<T>(Activation::kIdentity, rows, layers[top].out, dz, dz, dz, grads + layers[top].bias, {},
                                 stream);
    int spare = 0;
    for (std::size_t l = top + 1; l-- > 0;) {
      const LayerLayout& L = layers[l];
      const T* input = l > 0 ? as<T>(act[l - 1]) : nullptr;
      if (l == 0) {
        if constexpr (std::is_same_v<T, bf16>)
          input = x16.data();
        else
          input = x;
      }
      // dW = dz^T input, into the fp32 gradients in every precision.
      MatmulArgs w{true, false, L.out, L.in, rows, dz, L.out, input, L.in, grads + L.weight, L.in};
      w.ab_type = data_type<T>();
      w.c_type = DataType::kF32;
      lt->run(w, stream);
      if (l > 0) {
        const LayerLayout& B = layers[l - 1];
        T* next = as<T>(gz[spare]);
        spare = 1 - spare;
        if (fused[l - 1]) {
          lt->run(input_gradient_args<T>(l, dz, next, rows), stream);
          if (half) cuda::cast(static_cast<std::size_t>(B.out), dbias16.data(), grads + B.bias, stream);
        } else {
          lt->run(input_gradient_args<T>(l, dz, as<T>(ga), rows), stream);
          cuda::activation_backward<T>(shape.activation, rows, B.out, as<T>(pre[l - 1]), as<T>(ga), next,
                                       grads + B.bias, dropout_of(l - 1), stream);
        }
        dz = next;
      }
      optimizer->unit_done(l);
    }
  }

  // Training: the configured label smoothing, with the gradient; evaluation: plain
  // cross-entropy without it (as the CPU trainer evaluates).
  void loss(const std::int32_t* y, int rows, float grad_scale, bool training) {
    const cuda::LossScratch scratch{row_loss.data(), row_flag.data()};
    const float smoothing = training ? o.label_smoothing : 0.0f;
    if (half)
      cuda::softmax_cross_entropy<bf16>(rows, shape.classes, logits.data(), y, smoothing, grad_scale,
                                        training ? as<bf16>(dlogits) : nullptr, scratch, sums.data(), stream);
    else
      cuda::softmax_cross_entropy<float>(rows, shape.classes, logits.data(), y, smoothing, grad_scale,
                                         training ? as<float>(dlogits) : nullptr, scratch, sums.data(), stream);
    CUDA_CHECK(cudaMemcpyAsync(host_sums.data(), sums.data(), sizeof(cuda::LossSums), cudaMemcpyDeviceToHost, stream));
    CUDA_CHECK(cudaEventRecord(loss_ready, stream));
  }

  StepLoss wait_loss() {
    CUDA_CHECK(cudaEventSynchronize(loss_ready));
    const cuda::LossSums s = host_sums.data()[0];
    if (s.first_bad_row >= 0)
      throw std::out_of_range("CUDA step: row " + std::to_string(s.first_bad_row) + " has a label outside [0, " +
                              std::to_string(shape.classes) + ")");
    return {s.loss_sum, s.correct};
  }
};

CudaMlpStep::CudaMlpStep(const MlpShape& shape, const OptimizerConfig& optimizer, const CudaMlpStepOptions& options,
                         std::span<const float> initial_parameters)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  s.shape = shape, s.o = options;
  s.packed = mlp_layout(shape);
  s.model = mlp_model_layout(s.packed);
  // Every tensor at a multiple of 128 elements (512 bytes in fp32, 256 in bf16) on the device.
  DeviceParameters device = aligned_device_parameters(s.packed, 128);
  s.layers = device.units;
  if (initial_parameters.size() != s.packed.back().end())
    throw std::invalid_argument("CUDA step: " + std::to_string(initial_parameters.size()) +
                                " initial parameters for a model of " + std::to_string(s.packed.back().end()));
  s.half = options.precision == cuda::Precision::kBf16;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreateWithFlags(&s.loss_ready, cudaEventDisableTiming));
  s.lt = std::make_unique<cuda::LtMatmul>(options.precision == cuda::Precision::kTf32, options.deterministic);
  const std::size_t rows = static_cast<std::size_t>(options.max_rows);
  s.uploader = std::make_unique<DeviceBatchUploader>(rows, static_cast<std::size_t>(shape.inputs), s.stream);
  s.optimizer = std::make_unique<DeviceOptimizer>(optimizer, std::move(device), s.half, s.stream, initial_parameters);

  const std::size_t elem = s.half ? sizeof(bf16) : sizeof(float);
  std::size_t widest = static_cast<std::size_t>(shape.inputs);
  for (const LayerLayout& L : s.layers) widest = std::max<std::size_t>(widest, static_cast<std::size_t>(L.out));
  if (s.half) {
    s.x16.resize(rows * shape.inputs);
    s.dbias16.resize(widest);
  }
  s.act.resize(s.layers.size()), s.pre.resize(s.layers.size()), s.mask.resize(s.layers.size());
  for (std::size_t l = 0; l + 1 < s.layers.size(); ++l) {
    const int out = s.layers[l].out;
    s.act[l].resize(rows * out * elem);
    s.pre[l].resize(rows * out * elem);
    s.mask[l].resize(cuda::relu_mask_bytes(static_cast<int>(rows), out));
  }
  s.logits.resize(rows * shape.classes);
  s.dlogits.resize(rows * shape.classes * elem);
  for (auto& b : s.gz) b.resize(rows * widest * elem);
  s.ga.resize(rows * widest * elem);
  s.row_loss.resize(rows), s.row_flag.resize(rows), s.sums.resize(1), s.host_sums.resize(1);
  s.fused.assign(s.layers.size(), false);
}

CudaMlpStep::~CudaMlpStep() {
  if (!s_) return;
  cudaStreamSynchronize(s_->stream);
  cudaEventDestroy(s_->loss_ready);
  cudaStream_t stream = s_->stream;
  s_.reset();  // buffers and handles before their stream
  cudaStreamDestroy(stream);
}

cudaStream_t CudaMlpStep::stream() const { return s_->stream; }

void CudaMlpStep::reduce_gradients_with(Comm& comm) { s_->optimizer->reduce_with(comm, s_->o.bucket_mb, false); }

std::vector<bool> CudaMlpStep::fused_layers() const {
  return std::vector<bool>(s_->fused.begin(), s_->fused.end() - 1);
}

void CudaMlpStep::forward(const StepBatch& batch) {
  forward(s_->uploader->upload(batch.x, batch.y, batch.rows), batch.first_row);
}

void CudaMlpStep::forward(const DeviceBatch& batch, std::uint64_t first_row) {
  State& s = *s_;
  if (batch.rows > s.o.max_rows)
    throw std::invalid_argument("CUDA step: a batch of " + std::to_string(batch.rows) + " rows exceeds max_rows " +
                                std::to_string(s.o.max_rows));
  s.batch = batch;
  s.dropout_active = s.shape.dropout > 0.0f;
  s.first_row = first_row;
  if (s.half)
    s.forward<bf16>(batch.x, batch.rows, true);
  else
    s.forward<float>(batch.x, batch.rows, true);
  s.loss(batch.y, batch.rows, s.o.loss_scale, true);
}

void CudaMlpStep::backward() {
  State& s = *s_;
  if (s.half)
    s.backward<bf16>(s.batch.x, s.batch.rows);
  else
    s.backward<float>(s.batch.x, s.batch.rows);
}

StepLoss CudaMlpStep::local_loss() { return s_->wait_loss(); }

void CudaMlpStep::finish_gradients() { s_->optimizer->finish_gradients(); }

double CudaMlpStep::clip_gradients() { return s_->optimizer->clip(); }

void CudaMlpStep::update(float lr, std::uint64_t step) { s_->optimizer->update(lr, step); }

void CudaMlpStep::train_step(const float* x, const std::int32_t* y, int rows, std::uint64_t first_row, float lr,
                             std::uint64_t step) {
  train_step(s_->uploader->upload(x, y, rows), first_row, lr, step);
}

void CudaMlpStep::train_step(const DeviceBatch& batch, std::uint64_t first_row, float lr, std::uint64_t step) {
  forward(batch, first_row);
  backward();
  finish_gradients();
  s_->optimizer->queue_clip(false);
  update(lr, step);
}

StepLoss CudaMlpStep::evaluate(const StepBatch& rows_in) {
  State& s = *s_;
  const int rows = rows_in.rows;
  const DeviceBatch batch = s.uploader->upload(rows_in.x, rows_in.y, rows);
  s.dropout_active = false;
  if (s.half)
    s.forward<bf16>(batch.x, rows, false);
  else
    s.forward<float>(batch.x, rows, false);
  s.loss(batch.y, rows, 1.0f, false);
  return s.wait_loss();
}

const ModelLayout& CudaMlpStep::model_layout() const { return s_->model; }

HostState CudaMlpStep::host_state() { return s_->optimizer->host_state(); }

void CudaMlpStep::state_to_host() { s_->optimizer->state_to_host(); }

void CudaMlpStep::state_from_host() { s_->optimizer->state_from_host(); }

HostVector<float> CudaMlpStep::parameters() { return s_->optimizer->parameters(); }

std::optional<std::vector<float>> CudaMlpStep::global_gradients() { return s_->optimizer->gradients(); }

}  // namespace slurm_train
#endif  // SLURM_TRAIN_WITH_CUDA
