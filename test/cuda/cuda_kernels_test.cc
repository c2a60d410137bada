// Every CUDA kernel against the CPU reference kernels, on fresh random inputs each run, within
// a bound stated for its precision. On a machine without a usable GPU every case is skipped and
// says why (main.cc); none of them can pass there.
#include <cuda_bf16.h>
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "kernels/cpu/reference_kernels.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_kernels.h"
#include "kernels/cuda/lt_matmul.h"
#include "test/cuda/cuda_test_support.h"

namespace {

using namespace slurm_train;
using namespace slurm_train::cuda_test;
using cuda::bf16;
using cuda::DataType;
using cuda::DeviceBuffer;
using cuda::Epilogue;
using cuda::MatmulArgs;
using kernels::Activation;
using kernels::DropoutParams;

constexpr Activation kActivations[] = {Activation::kIdentity, Activation::kRelu, Activation::kGelu};
const DropoutParams kDropouts[] = {{}, {0.3f, 0x5eed, 1000}};

std::vector<bf16> to_bf16(const std::vector<float>& x) {
  std::vector<bf16> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = __float2bfloat16_rn(x[i]);
  return out;
}
std::vector<double> to_double(const std::vector<bf16>& x) {
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = __bfloat162float(x[i]);
  return out;
}
template <typename T>
std::vector<double> to_double(const std::vector<T>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// Row-major operands of op(A)[m,k] op(B)[k,n] with the given transposes, and their lds.
struct Operands {
  int m, n, k, lda, ldb, ldc;
  bool ta, tb;
  std::vector<double> a, b;
};
Operands random_operands(int m, int n, int k, bool ta, bool tb, std::uint64_t seed) {
  Operands o{m, n, k, ta ? m : k, tb ? k : n, n, ta, tb, {}, {}};
  o.a = uniform<double>(std::size_t(m) * k, seed);
  o.b = uniform<double>(std::size_t(k) * n, seed + 1);
  return o;
}
std::vector<double> reference_product(const Operands& o) {
  std::vector<double> c(std::size_t(o.m) * o.n);
  kernels::make_reference_kernels<double>()->gemm(o.ta, o.tb, o.m, o.n, o.k, 1.0, o.a.data(), o.lda, o.b.data(), o.ldb,
                                                  0.0, c.data(), o.ldc);
  return c;
}
std::vector<float> as_float(const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); }

// ---- products ----------------------------------------------------------------------------------

TEST_CASE("cuda: gemm (fp32 and tf32) matches the reference, every transpose, alpha and beta" *
          doctest::skip(no_gpu())) {
  for (bool tf32 : {false, true}) {
    auto k = cuda::make_cuda_kernels({tf32, false, nullptr});
    for (int t = 0; t < 4; ++t) {
      const std::uint64_t seed = fresh_seed();
      CAPTURE(seed);
      CAPTURE(tf32);
      const bool ta = t & 1, tb = t & 2;
      // Odd sizes: no dimension a multiple of the tile sizes, offsets not 16-byte aligned.
      const Operands o = random_operands(37 + t, 53, 29 + 2 * t, ta, tb, seed);
      std::vector<double> want = reference_product(o);
      const auto c0 = uniform<float>(want.size(), seed + 2);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] = 0.5 * want[i] + 0.25 * c0[i];
      auto a = to_device(as_float(o.a)), b = to_device(as_float(o.b));
      auto c = to_device(c0);
      k->gemm(ta, tb, o.m, o.n, o.k, 0.5f, a.data(), o.lda, b.data(), o.ldb, 0.25f, c.data(), o.ldc);
      // fp32: a few ulps of the sum; tf32 rounds the inputs to 10-bit mantissas (2^-11 each).
      CHECK(scaled_error(to_host(c.data(), want.size()), want) < (tf32 ? 5e-3 : 2e-6));
    }
  }
}

TEST_CASE("cuda: bf16 products (fp32 accumulation) into bf16 and fp32 outputs" * doctest::skip(no_gpu())) {
  cuda::LtMatmul lt(false, false);
  for (int t = 0; t < 4; ++t) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    const bool ta = t & 1, tb = t & 2;
    Operands o = random_operands(64, 96, 128 + 8 * t, ta, tb, seed);
    // The reference multiplies the same bf16-rounded inputs: what remains is the accumulation
    // order and the output's rounding.
    const auto a16 = to_bf16(as_float(o.a)), b16 = to_bf16(as_float(o.b));
    o.a = to_double(a16), o.b = to_double(b16);
    const std::vector<double> want = reference_product(o);
    auto a = to_device(a16), b = to_device(b16);
    DeviceBuffer<float> c32(want.size());
    DeviceBuffer<bf16> c16(want.size());
    MatmulArgs args{ta, tb, o.m, o.n, o.k, a.data(), o.lda, b.data(), o.ldb, c32.data(), o.ldc};
    args.ab_type = DataType::kBF16;
    lt.run(args, nullptr);
    CHECK(scaled_error(to_host(c32.data(), want.size()), want) < 2e-5);
    args.c = c16.data(), args.c_type = DataType::kBF16;
    lt.run(args, nullptr);
    CHECK(scaled_error(to_double(to_host(c16.data(), want.size())), want) < 8e-3);  // 2^-8 + accumulation
  }
}

TEST_CASE("cuda: deterministic mode gives bit-identical products" * doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  auto k = cuda::make_cuda_kernels({false, true, nullptr});
  // A long k is where split-K reductions would be chosen.
  const Operands o = random_operands(64, 64, 16384, false, false, seed);
  auto a = to_device(as_float(o.a)), b = to_device(as_float(o.b));
  DeviceBuffer<float> c(64 * 64);
  k->gemm(false, false, 64, 64, o.k, 1.0f, a.data(), o.lda, b.data(), o.ldb, 0.0f, c.data(), 64);
  const auto first = to_host(c.data(), 64 * 64);
  k->gemm(false, false, 64, 64, o.k, 1.0f, a.data(), o.lda, b.data(), o.ldb, 0.0f, c.data(), 64);
  const auto second = to_host(c.data(), 64 * 64);
  CHECK(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) == 0);
}

// A Linear layer's forward as the MLP computes it: z = x W^T (+ bias), x [rows, in], W [out, in].
struct LinearCase {
  int rows, in, out;
  std::vector<double> x, w, bias;
};
LinearCase random_linear(int rows, int in, int out, std::uint64_t seed) {
  return {rows,
          in,
          out,
          uniform<double>(std::size_t(rows) * in, seed),
          uniform<double>(std::size_t(out) * in, seed + 1),
          uniform<double>(out, seed + 2)};
}

template <typename T>
void check_bias_epilogue(DataType type, double bound) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  LinearCase c = random_linear(96, 200, 136, seed);
  auto ref = kernels::make_reference_kernels<double>();
  std::vector<T> x, w, bias;
  if constexpr (std::is_same_v<T, bf16>) {
    x = to_bf16(as_float(c.x)), w = to_bf16(as_float(c.w)), bias = to_bf16(as_float(c.bias));
    c.x = to_double(x), c.w = to_double(w), c.bias = to_double(bias);
  } else {
    x = as_float(c.x), w = as_float(c.w), bias = as_float(c.bias);
  }
  std::vector<double> z(std::size_t(c.rows) * c.out), out(z.size());
  ref->gemm(false, true, c.rows, c.out, c.in, 1.0, c.x.data(), c.in, c.w.data(), c.in, 0.0, z.data(), c.out);
  ref->bias_activation_forward(Activation::kIdentity, c.rows, c.out, c.bias.data(), z.data(), out.data(), {});
  auto dx = to_device(x), dw = to_device(w), db = to_device(bias);
  DeviceBuffer<T> dz(z.size());
  cuda::LtMatmul lt(false, false);
  MatmulArgs args{false, true, c.rows, c.out, c.in, dx.data(), c.in, dw.data(), c.in, dz.data(), c.out};
  args.ab_type = args.c_type = type;
  args.epilogue = Epilogue::kBias;
  args.bias = db.data();
  lt.run(args, nullptr);
  CHECK(scaled_error(to_double(to_host(dz.data(), z.size())), out) < bound);
}

TEST_CASE("cuda: the BIAS epilogue adds one bias per column of ours (fp32, bf16)" * doctest::skip(no_gpu())) {
  check_bias_epilogue<float>(DataType::kF32, 2e-6);
  check_bias_epilogue<bf16>(DataType::kBF16, 8e-3);
}

// Forward with RELU_AUX_BIAS / GELU_AUX_BIAS, then backward of the next product with
// DRELU_BGRAD / DGELU_BGRAD, against the reference's separate steps in double, on the same
// (T-rounded) inputs. ReLU is exact up to the output's rounding; for GELU the bound also allows
// a hardware tanh (about 2^-11 relative), so this test cannot tell the tanh form from the exact
// one (they differ by at most ~5e-4): it checks the epilogues' plumbing and rough values.
template <typename T>
std::vector<T> rounded(std::vector<double>& x) {
  std::vector<T> out;
  if constexpr (std::is_same_v<T, bf16>) {
    out = to_bf16(as_float(x));
    x = to_double(out);
  } else {
    out = as_float(x);
  }
  return out;
}

template <typename T>
void check_activation_epilogues(bool relu) {
  constexpr bool half = std::is_same_v<T, bf16>;
  const DataType type = half ? DataType::kBF16 : DataType::kF32;
  const double out_bound = half ? 1e-2 : relu ? 2e-6 : 2e-3;  // bf16: the output's rounding, 2^-8
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  CAPTURE(relu);
  CAPTURE(half);
  LinearCase c = random_linear(72, 96, 160, seed);
  const auto x_t = rounded<T>(c.x), w_t = rounded<T>(c.w), bias_t = rounded<T>(c.bias);
  auto ref = kernels::make_reference_kernels<double>();
  std::vector<double> z(std::size_t(c.rows) * c.out), a(z.size());
  ref->gemm(false, true, c.rows, c.out, c.in, 1.0, c.x.data(), c.in, c.w.data(), c.in, 0.0, z.data(), c.out);
  ref->bias_activation_forward(Activation::kIdentity, c.rows, c.out, c.bias.data(), z.data(), a.data(), {});
  for (std::size_t i = 0; i < z.size(); ++i) a[i] = relu ? std::max(z[i], 0.0) : kernels::gelu_tanh(z[i]);

  auto dx = to_device(x_t), dw = to_device(w_t), db = to_device(bias_t);
  DeviceBuffer<T> da(z.size());
  const std::int64_t aux_ld = relu ? cuda::relu_mask_ld(c.out) : cuda::gelu_aux_ld(c.out);
  DeviceBuffer<std::uint8_t> aux(relu ? cuda::relu_mask_bytes(c.rows, c.out)
                                      : std::size_t(aux_ld) * c.rows * sizeof(T));
  cuda::LtMatmul lt(false, false);
  MatmulArgs fwd{false, true, c.rows, c.out, c.in, dx.data(), c.in, dw.data(), c.in, da.data(), c.out};
  fwd.ab_type = fwd.c_type = type;
  fwd.epilogue = relu ? Epilogue::kReluAuxBias : Epilogue::kGeluAuxBias;
  fwd.bias = db.data(), fwd.aux = aux.data(), fwd.aux_ld = aux_ld;
  REQUIRE_MESSAGE(lt.supports(fwd), "cuBLASLt has no kernel for this forward epilogue");
  lt.run(fwd, nullptr);
  const auto a_gpu = to_double(to_host(da.data(), a.size()));
  CHECK(scaled_error(a_gpu, a) < out_bound);
  if (!relu) {  // the aux holds the pre-activation (T), one row of ours per aux_ld elements
    const auto aux_host = to_double(to_host(reinterpret_cast<T*>(aux.data()), std::size_t(aux_ld) * c.rows));
    std::vector<double> z_gpu;
    for (int r = 0; r < c.rows; ++r)
      z_gpu.insert(z_gpu.end(), aux_host.begin() + r * aux_ld, aux_host.begin() + r * aux_ld + c.out);
    CHECK(scaled_error(z_gpu, z) < (half ? 8e-3 : 2e-6));
  }

  // Backward of a next layer W2 [next, out]: d(a) = dnext W2, then dz = d(a) * act'(z) and
  // dbias = column sums of dz (in the output's type), all in the one product's epilogue.
  const int next = 48;
  auto dnext = uniform<double>(std::size_t(c.rows) * next, seed + 3);
  auto w2 = uniform<double>(std::size_t(next) * c.out, seed + 4);
  const auto dnext_t = rounded<T>(dnext), w2_t = rounded<T>(w2);
  std::vector<double> dz(z.size()), dbias(c.out);
  ref->gemm(false, false, c.rows, c.out, next, 1.0, dnext.data(), next, w2.data(), c.out, 0.0, dz.data(), c.out);
  for (std::size_t i = 0; i < dz.size(); ++i) {
    // ReLU: the mask is the GPU forward's own (a > 0), so that a pre-activation rounding to the
    // other side of 0 on one device cannot fail the test.
    dz[i] *= relu ? (a_gpu[i] > 0.0 ? 1.0 : 0.0) : kernels::gelu_tanh_derivative(z[i]);
  }
  for (int r = 0; r < c.rows; ++r)
    for (int j = 0; j < c.out; ++j) dbias[j] += dz[std::size_t(r) * c.out + j];
  auto d_dnext = to_device(dnext_t), d_w2 = to_device(w2_t);
  DeviceBuffer<T> d_dz(dz.size()), d_dbias(c.out);
  MatmulArgs bwd{false, false, c.rows, c.out, next, d_dnext.data(), next, d_w2.data(), c.out, d_dz.data(), c.out};
  bwd.ab_type = bwd.c_type = type;
  bwd.epilogue = relu ? Epilogue::kDReluBgrad : Epilogue::kDGeluBgrad;
  bwd.bias = d_dbias.data(), bwd.aux = aux.data(), bwd.aux_ld = aux_ld;
  REQUIRE_MESSAGE(lt.supports(bwd), "cuBLASLt has no kernel for this backward epilogue");
  lt.run(bwd, nullptr);
  CHECK(scaled_error(to_double(to_host(d_dz.data(), dz.size())), dz) < out_bound);
  CHECK(scaled_error(to_double(to_host(d_dbias.data(), dbias.size())), dbias) < std::max(out_bound, 1e-5));
}

TEST_CASE("cuda: RELU_AUX_BIAS forward and DRELU_BGRAD backward epilogues (fp32, bf16)" * doctest::skip(no_gpu())) {
  check_activation_epilogues<float>(true);
  check_activation_epilogues<bf16>(true);
}

TEST_CASE("cuda: GELU_AUX_BIAS and DGELU_BGRAD epilogues compute the tanh form of GELU (fp32, bf16)" *
          doctest::skip(no_gpu())) {
  check_activation_epilogues<float>(false);
  check_activation_epilogues<bf16>(false);
}

// ---- element-wise ------------------------------------------------------------------------------

TEST_CASE("cuda: bias_activation_forward matches the reference, every activation, with and without dropout" *
          doctest::skip(no_gpu())) {
  auto k = cuda::make_cuda_kernels();
  auto ref = kernels::make_reference_kernels<float>();
  for (Activation act : kActivations) {
    for (const DropoutParams& d : kDropouts) {
      const std::uint64_t seed = fresh_seed();
      CAPTURE(seed);
      CAPTURE(static_cast<int>(act));
      CAPTURE(d.p);
      const int rows = 33, cols = 70;
      auto z = uniform<float>(std::size_t(rows) * cols, seed, -3, 3);
      const auto bias = uniform<float>(cols, seed + 1);
      auto dz = to_device(z), db = to_device(bias);
      DeviceBuffer<float> dout(z.size());
      k->bias_activation_forward(act, rows, cols, db.data(), dz.data(), dout.data(), d);
      std::vector<float> out(z.size());
      ref->bias_activation_forward(act, rows, cols, bias.data(), z.data(), out.data(), d);
      // The same formulas (elementwise.h); the GPU's erf/exp may differ by an ulp or two.
      CHECK(scaled_error(to_host(dz.data(), z.size()), z) < 1e-6);
      CHECK(scaled_error(to_host(dout.data(), out.size()), out) < 1e-6);
    }
  }
}

TEST_CASE("cuda: bf16 bias_activation_forward and activation_backward round as stated" * doctest::skip(no_gpu())) {
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const int rows = 40, cols = 130;
  auto ref = kernels::make_reference_kernels<double>();
  const auto z16 = to_bf16(uniform<float>(std::size_t(rows) * cols, seed, -3, 3));
  const auto bias16 = to_bf16(uniform<float>(cols, seed + 1));
  const auto dout16 = to_bf16(uniform<float>(z16.size(), seed + 2));
  std::vector<double> z = to_double(z16), bias = to_double(bias16), dout = to_double(dout16), a(z.size()), dz(z.size()),
                      dbias(cols);
  ref->bias_activation_forward(Activation::kGelu, rows, cols, bias.data(), z.data(), a.data(), kDropouts[1]);
  auto d_z = to_device(z16), d_bias = to_device(bias16), d_dout = to_device(dout16);
  DeviceBuffer<bf16> d_a(z.size()), d_dz(z.size());
  DeviceBuffer<float> d_dbias(cols);
  cuda::bias_activation_forward(Activation::kGelu, rows, cols, d_bias.data(), d_z.data(), d_a.data(), kDropouts[1],
                                nullptr);
  CHECK(scaled_error(to_double(to_host(d_z.data(), z.size())), z) < 4e-3);  // one bf16 rounding: 2^-9
  CHECK(scaled_error(to_double(to_host(d_a.data(), a.size())), a) < 1e-2);
  // Backward from the GPU's own stored z (what the step does).
  const std::vector<double> z_gpu = to_double(to_host(d_z.data(), z.size()));
  ref->activation_backward(Activation::kGelu, rows, cols, z_gpu.data(), dout.data(), dz.data(), dbias.data(),
                           kDropouts[1]);
  cuda::activation_backward(Activation::kGelu, rows, cols, d_z.data(), d_dout.data(), d_dz.data(), d_dbias.data(),
                            kDropouts[1], nullptr);
  CHECK(scaled_error(to_double(to_host(d_dz.data(), dz.size())), dz) < 4e-3);
  CHECK(scaled_error(to_host(d_dbias.data(), cols), dbias) < 1e-5);  // summed in fp32 before rounding
}

TEST_CASE("cuda: activation_backward matches the reference, every activation, with and without dropout" *
          doctest::skip(no_gpu())) {
  auto k = cuda::make_cuda_kernels();
  auto ref = kernels::make_reference_kernels<float>();
  for (Activation act : kActivations) {
    for (const DropoutParams& d : kDropouts) {
      for (bool in_place : {false, true}) {
        const std::uint64_t seed = fresh_seed();
        CAPTURE(seed);
        CAPTURE(static_cast<int>(act));
        CAPTURE(d.p);
        const int rows = 301, cols = 45;  // rows not a multiple of the kernel's 8 row groups
        const auto z = uniform<float>(std::size_t(rows) * cols, seed, -3, 3);
        const auto dout = uniform<float>(z.size(), seed + 1);
        std::vector<float> dz(z.size()), dbias(cols);
        ref->activation_backward(act, rows, cols, z.data(), dout.data(), dz.data(), dbias.data(), d);
        auto d_z = to_device(z), d_dout = to_device(dout);
        DeviceBuffer<float> d_dz(z.size()), d_dbias(cols);
        float* target = in_place ? d_dout.data() : d_dz.data();
        k->activation_backward(act, rows, cols, d_z.data(), d_dout.data(), target, d_dbias.data(), d);
        CHECK(scaled_error(to_host(target, dz.size()), dz) < 1e-6);
        CHECK(scaled_error(to_host(d_dbias.data(), cols), dbias) < 1e-5);  // another summation order
      }
    }
  }
}

TEST_CASE("cuda: bias_gelu_forward and gelu_backward (GELU keeping its derivative) match the reference" *
          doctest::skip(no_gpu())) {
  auto k = cuda::make_cuda_kernels();
  auto ref = kernels::make_reference_kernels<float>();
  for (bool in_place : {false, true}) {
    const std::uint64_t seed = fresh_seed();
    CAPTURE(seed);
    CAPTURE(in_place);
    const int rows = 301, cols = 45;  // rows not a multiple of the backward kernel's 8 row groups
    auto z = uniform<float>(std::size_t(rows) * cols, seed, -6, 6);
    const auto bias = uniform<float>(cols, seed + 1), dout = uniform<float>(z.size(), seed + 2);
    auto d_z = to_device(z), d_bias = to_device(bias), d_dout = to_device(dout);
    DeviceBuffer<float> d_out(z.size()), d_dz(z.size()), d_dbias(cols);
    k->bias_gelu_forward(rows, cols, d_bias.data(), d_z.data(), d_out.data());
    float* target = in_place ? d_dout.data() : d_dz.data();
    k->gelu_backward(rows, cols, d_z.data(), d_dout.data(), target, d_dbias.data());
    std::vector<float> out(z.size()), dz(z.size()), dbias(cols);
    ref->bias_gelu_forward(rows, cols, bias.data(), z.data(), out.data());
    ref->gelu_backward(rows, cols, z.data(), dout.data(), dz.data(), dbias.data());
    // The same formulas (elementwise.h); the GPU's arithmetic may differ by an ulp or two.
    CHECK(scaled_error(to_host(d_out.data(), out.size()), out) < 1e-6);
    CHECK(scaled_error(to_host(d_z.data(), z.size()), z) < 1e-6);  // the derivative
    CHECK(scaled_error(to_host(target, dz.size()), dz) < 1e-6);
    CHECK(scaled_error(to_host(d_dbias.data(), cols), dbias) < 1e-5);  // another summation order
  }
}

// ---- loss --------------------------------------------------------------------------------------

TEST_CASE("cuda: softmax_cross_entropy matches the reference (loss, correct, gradient)" * doctest::skip(no_gpu())) {
  auto k = cuda::make_cuda_kernels();
  auto ref = kernels::make_reference_kernels<float>();
  for (int classes : {10, 37, 1000}) {
    for (float smoothing : {0.0f, 0.1f}) {
      const std::uint64_t seed = fresh_seed();
      CAPTURE(seed);
      CAPTURE(classes);
      const int rows = 123;
      const auto logits = uniform<float>(std::size_t(rows) * classes, seed, -6, 6);
      std::vector<std::int32_t> labels(rows);
      std::mt19937 rng(static_cast<unsigned>(seed));
      for (auto& l : labels) l = static_cast<std::int32_t>(rng() % classes);
      std::vector<float> dlogits(logits.size());
      const auto want = ref->softmax_cross_entropy(rows, classes, logits.data(), labels.data(), smoothing, 1.0f / rows,
                                                   dlogits.data());
      auto d_logits = to_device(logits);
      auto d_labels = to_device(labels);
      DeviceBuffer<float> d_dlogits(logits.size());
      const auto got = k->softmax_cross_entropy(rows, classes, d_logits.data(), d_labels.data(), smoothing, 1.0f / rows,
                                                d_dlogits.data());
      CHECK(got.loss_sum == doctest::Approx(want.loss_sum).epsilon(1e-5));
      CHECK(got.correct == want.correct);
      CHECK(scaled_error(to_host(d_dlogits.data(), dlogits.size()), dlogits) < 1e-5);
      // Evaluation: no gradient, the same sums.
      const auto eval =
          k->softmax_cross_entropy(rows, classes, d_logits.data(), d_labels.data(), smoothing, 1.0f, nullptr);
      CHECK(eval.loss_sum == got.loss_sum);
    }
  }
}

TEST_CASE("cuda: softmax_cross_entropy refuses a label outside [0, classes)" * doctest::skip(no_gpu())) {
  auto k = cuda::make_cuda_kernels();
  const std::vector<float> logits(4 * 3, 0.5f);
  auto d_logits = to_device(logits);
  auto d_labels = to_device(std::vector<std::int32_t>{0, 2, 3, 1});
  CHECK_THROWS_AS(k->softmax_cross_entropy(4, 3, d_logits.data(), d_labels.data(), 0.0f, 1.0f, nullptr),
                  std::out_of_range);
}

// ---- optimizers and reductions ------------------------------------------------------------------

TEST_CASE("cuda: adamw_update and sgd_update match the reference over three steps" * doctest::skip(no_gpu())) {
  auto k = cuda::make_cuda_kernels();
  auto ref = kernels::make_reference_kernels<float>();
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  const std::size_t n = 10007;
  auto p = uniform<float>(n, seed), m = std::vector<float>(n, 0.0f), v = m, buf = m, p_sgd = p;
  auto d_p = to_device(p), d_m = to_device(m), d_v = to_device(v), d_p_sgd = to_device(p), d_buf = to_device(buf);
  for (long step = 1; step <= 3; ++step) {
    const auto g = uniform<float>(n, seed + 10 * step);
    auto d_g = to_device(g);
    const kernels::AdamWParams h{1e-2f, 0.9f, 0.999f, 1e-8f, 0.01f, step};
    ref->adamw_update(n, p.data(), g.data(), m.data(), v.data(), h);
    k->adamw_update(n, d_p.data(), d_g.data(), d_m.data(), d_v.data(), h);
    const kernels::SgdParams s{0.1f, 0.9f, 0.01f, step == 2};
    ref->sgd_update(n, p_sgd.data(), g.data(), buf.data(), s);
    k->sgd_update(n, d_p_sgd.data(), d_g.data(), d_buf.data(), s);
  }
  // The same formulas; the GPU may contract a * b + c into one fused multiply-add.
  CHECK(scaled_error(to_host(d_p.data(), n), p) < 1e-6);
  CHECK(scaled_error(to_host(d_m.data(), n), m) < 1e-6);
  CHECK(scaled_error(to_host(d_v.data(), n), v) < 1e-6);
  CHECK(scaled_error(to_host(d_p_sgd.data(), n), p_sgd) < 1e-6);
  CHECK(scaled_error(to_host(d_buf.data(), n), buf) < 1e-6);
}

TEST_CASE("cuda: the one-pass AdamW over all parameters: biases without decay, clip factor, bf16 copy" *
          doctest::skip(no_gpu())) {
  auto ref = kernels::make_reference_kernels<float>();
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  // Two layers: weights [0, 300) and [310, 1310), biases [300, 310) and [1310, 1330).
  const std::size_t n = 1330;
  cuda::DecayFreeRanges no_decay;
  no_decay.count = 2;
  no_decay.begin[0] = 300, no_decay.end[0] = 310, no_decay.begin[1] = 1310, no_decay.end[1] = 1330;
  auto p = uniform<float>(n, seed), g = uniform<float>(n, seed + 1, -5, 5);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  auto d_p = to_device(p), d_g = to_device(g), d_m = to_device(m), d_v = to_device(v);
  DeviceBuffer<bf16> copy(n);
  DeviceBuffer<double> partials(cuda::norm_blocks(n)), sum(1);
  DeviceBuffer<float> factor(1);
  const float max_norm = 1.0f;
  cuda::sum_of_squares(n, d_g.data(), partials.data(), sum.data(), nullptr);
  cuda::clip_factor(sum.data(), max_norm, factor.data(), nullptr);
  const kernels::AdamWParams h{1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, 1};
  cuda::adamw_update(n, d_p.data(), d_g.data(), d_m.data(), d_v.data(), h, no_decay, factor.data(), copy.data(),
                     nullptr);
  // The reference: clip on the host, then one update per segment, decay on weights only.
  const double norm = std::sqrt(ref->sum_of_squares(n, g.data()));
  ref->scale(n, static_cast<float>(max_norm / (norm + 1e-6)), g.data());
  const std::size_t segments[4][2] = {{0, 300}, {300, 310}, {310, 1310}, {1310, 1330}};
  for (int s = 0; s < 4; ++s) {
    kernels::AdamWParams hs = h;
    hs.weight_decay = s % 2 == 0 ? h.weight_decay : 0.0f;
    const std::size_t b = segments[s][0], len = segments[s][1] - b;
    ref->adamw_update(len, &p[b], &g[b], &m[b], &v[b], hs);
  }
  CHECK(to_host(factor.data(), 1)[0] == doctest::Approx(max_norm / (norm + 1e-6)).epsilon(1e-6));
  CHECK(scaled_error(to_host(d_p.data(), n), p) < 1e-6);
  CHECK(scaled_error(to_double(to_host(copy.data(), n)), to_double(p)) < 4e-3);
}

TEST_CASE("cuda: sum_of_squares in double, the same bits every run; scale; casts" * doctest::skip(no_gpu())) {
  auto k = cuda::make_cuda_kernels();
  auto ref = kernels::make_reference_kernels<float>();
  const std::uint64_t seed = fresh_seed();
  CAPTURE(seed);
  for (std::size_t n : {std::size_t(1), std::size_t(1000), std::size_t(3) << 20}) {
    const auto x = uniform<float>(n, seed + n);
    auto d_x = to_device(x);
    const double first = k->sum_of_squares(n, d_x.data()), second = k->sum_of_squares(n, d_x.data());
    CHECK(first == doctest::Approx(ref->sum_of_squares(n, x.data())).epsilon(1e-12));
    CHECK(std::memcmp(&first, &second, sizeof first) == 0);
    k->scale(n, -0.5f, d_x.data());
    std::vector<float> scaled = x;
    ref->scale(n, -0.5f, scaled.data());
    CHECK(to_host(d_x.data(), n) == scaled);  // exact: one rounding of the same product
  }
  const auto x = uniform<float>(4099, seed, -1e3, 1e3);
  auto d_x = to_device(x);
  DeviceBuffer<bf16> d16(x.size());
  DeviceBuffer<float> back(x.size());
  cuda::cast(x.size(), d_x.data(), d16.data(), nullptr);
  cuda::cast(x.size(), d16.data(), back.data(), nullptr);
  const auto want16 = to_bf16(x);  // the host's round-to-nearest-even
  const auto got16 = to_host(d16.data(), x.size());
  CHECK(std::memcmp(got16.data(), want16.data(), x.size() * sizeof(bf16)) == 0);
  const auto widened = to_host(back.data(), x.size());
  CHECK(to_double(widened) == to_double(want16));  // widening is exact
}

}  // namespace
