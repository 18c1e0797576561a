// The CUDA kernels (gpu/kernels.h) against the CPU oracle (kernels/matmul.h matmul_reference) on a
// real device. Without one -- tokenmill built without CUDA, or no GPU visible -- the device tests
// skip and say why; the API still answers with a clear error (checked here too).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "gpu/device.h"
#include "gpu/kernels.h"
#include "kernels/matmul.h"
#include "quant/quant.h"

namespace tmill::gpu {
namespace {

bool have_device(std::string* why) {
  auto d = gpu_devices();
  if (!d.ok()) *why = d.error();
  return d.ok();
}

TEST(GpuKernels, WithoutCudaEveryCallSaysHowToBuildIt) {
  if (built_with_cuda()) GTEST_SKIP() << "built with CUDA";
  const auto d = gpu_devices();
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().find("-DTM_CUDA=ON"), std::string::npos) << d.error();
  EXPECT_FALSE(DeviceBuffer::allocate(64).ok());
  EXPECT_FALSE(gemv(DType::Q8_0, nullptr, 1, 32, 34, nullptr, nullptr).ok());
  EXPECT_FALSE(gemv_supports(DType::Q8_0));
}

TEST(GpuKernels, GemvMatchesTheCpuOracleForEveryType) {
  std::string why;
  if (!have_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t rows = 67, cols = 512;  // 67: the last block of 4 warps is partial
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> wf(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(cols));
  for (auto& v : wf) v = nd(rng);
  for (auto& v : x) v = nd(rng);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    ASSERT_TRUE(gemv_supports(t));
    const size_t rb = *dtype_row_bytes(t, static_cast<uint64_t>(cols));
    std::vector<uint8_t> w(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, wf.data() + r * cols, w.data() + r * rb, cols);
    const Matrix m{t, rows, cols, w.data(), rb, "w"};
    std::vector<float> want(static_cast<size_t>(rows));
    matmul_reference(m, x.data(), cols, want.data(), rows, 1);
    auto dw = DeviceBuffer::allocate(w.size());
    auto dx = DeviceBuffer::allocate(x.size() * 4);
    auto dy = DeviceBuffer::allocate(static_cast<size_t>(rows) * 4);
    ASSERT_TRUE(dw.ok() && dx.ok() && dy.ok());
    ASSERT_TRUE(dw->upload(w.data(), w.size()).ok());
    ASSERT_TRUE(dx->upload(x.data(), x.size() * 4).ok());
    ASSERT_TRUE(gemv(t, dw->get(), rows, cols, rb, static_cast<const float*>(dx->get()), static_cast<float*>(dy->get())).ok());
    const auto st = synchronize();
    ASSERT_TRUE(st.ok()) << st.error();
    std::vector<float> got(static_cast<size_t>(rows));
    ASSERT_TRUE(dy->download(got.data(), got.size() * 4).ok());
    for (int64_t r = 0; r < rows; ++r) {
      double mag = 0;
      std::vector<float> row(static_cast<size_t>(cols));
      dequantize_row(t, w.data() + r * rb, row.data(), cols);
      for (int64_t c = 0; c < cols; ++c) mag += std::fabs(static_cast<double>(row[c]) * x[c]);
      EXPECT_NEAR(got[r], want[r], 1e-5 * mag + 1e-6) << dtype_name(t) << " row " << r;
    }
  }
}

TEST(GpuKernels, RmsnormMatchesTheFormula) {
  std::string why;
  if (!have_device(&why)) GTEST_SKIP() << "no CUDA device: " << why;
  const int64_t rows = 3, n = 1000;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(rows * n)), wt(static_cast<size_t>(n)), got(x.size());
  for (auto& v : x) v = nd(rng);
  for (auto& v : wt) v = nd(rng);
  auto dx = DeviceBuffer::allocate(x.size() * 4), dw = DeviceBuffer::allocate(wt.size() * 4),
       dy = DeviceBuffer::allocate(x.size() * 4);
  ASSERT_TRUE(dx.ok() && dw.ok() && dy.ok());
  ASSERT_TRUE(dx->upload(x.data(), x.size() * 4).ok());
  ASSERT_TRUE(dw->upload(wt.data(), wt.size() * 4).ok());
  ASSERT_TRUE(rmsnorm(static_cast<const float*>(dx->get()), static_cast<const float*>(dw->get()),
                      static_cast<float*>(dy->get()), rows, n, 1e-5f)
                  .ok());
  ASSERT_TRUE(synchronize().ok());
  ASSERT_TRUE(dy->download(got.data(), got.size() * 4).ok());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[r * n + i]) * x[r * n + i];
    const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[r * n + i], x[r * n + i] * scale * wt[i], 1e-5 * std::fabs(x[r * n + i] * scale * wt[i]) + 1e-6);
  }
}

}  // namespace
}  // namespace tmill::gpu
