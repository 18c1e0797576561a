#include "model/gpu_host_ops.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "kernels/attention.h"
#include "model/config.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/moe.h"
#include "quant/quant.h"

namespace tmill {
namespace {

// A graph of the host backend: the recorded calls, as closures over their arguments (by value, as a
// CUDA graph keeps its kernels' parameters).
using Recording = std::vector<std::function<void()>>;
// The recording of this thread's capture, if one is open (captures are per thread, as CUDA's
// thread-local capture mode; the backend object is shared).
thread_local Recording* recording = nullptr;

class HostOps final : public gpu::Ops {
 public:
  std::string name() const override { return "host"; }
  Status available() const override { return {}; }
  Result<std::vector<gpu::GpuInfo>> devices() const override {
    return Error{"the host oracle runs in host memory, on no device"};
  }
  Result<void*> alloc(size_t bytes) override {
    if (bytes == 0) return static_cast<void*>(nullptr);
    void* p = std::calloc(1, bytes);
    if (!p) return Error{"host backend: out of memory"};
    return p;
  }
  void release(void* p) override { std::free(p); }
  Status upload(void* dst, const void* src, size_t bytes) override { return host_copy("upload", dst, src, bytes); }
  Status download(void* dst, const void* src, size_t bytes) override { return host_copy("download", dst, src, bytes); }
  Status copy(void* dst, const void* src, size_t bytes) override {
    return run([=] {
      if (bytes) std::memmove(dst, src, bytes);
    });
  }
  bool supports(DType) const override { return true; }
  size_t matmul_workspace_bytes() const override { return 0; }
  Status matmul(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x,
                int64_t n_tokens, float* y, void*, size_t) override {
    return run([=] {
      const Matrix m{type, rows, cols, w, row_bytes, "w"};
      matmul_reference(m, x, cols, y, rows, n_tokens);
    });
  }
  Status matmul_id(DType type, const void* w, size_t expert_bytes, int64_t rows, int64_t cols, size_t row_bytes,
                   const float* x, int64_t x_div, const int32_t* ids, int64_t n_pairs, float* y,
                   const int32_t* order) override {
    return run([=] {
      for (int64_t i = 0; i < n_pairs; ++i) {
        const int64_t p = order ? order[i] : i;
        const Matrix m{type, rows, cols, static_cast<const uint8_t*>(w) + static_cast<size_t>(ids[p]) * expert_bytes,
                       row_bytes, "expert"};
        matmul_reference(m, x + (p / x_div) * cols, cols, y + p * rows, rows, 1);
      }
    });
  }
  bool supports_rows(DType) const override { return true; }
  Status get_rows(DType type, const void* w, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n, float* out,
                  float scale) override {
    return run([=] {  // the CPU's get_row, then the scale (as the CPU forward's embedding lookup)
      for (int64_t t = 0; t < n; ++t) {
        float* o = out + t * cols;
        dequantize_row(type, static_cast<const uint8_t*>(w) + static_cast<size_t>(ids[t]) * row_bytes, o, cols);
        if (scale != 1.0f)
          for (int64_t j = 0; j < cols; ++j) o[j] *= scale;
      }
    });
  }
  Status moe_sort(const int32_t* ids, int64_t n_pairs, int64_t n_expert, int32_t* order) override {
    return run([=] {  // a stable counting sort
      std::vector<int64_t> start(static_cast<size_t>(n_expert) + 1, 0);
      for (int64_t p = 0; p < n_pairs; ++p) ++start[static_cast<size_t>(ids[p]) + 1];
      for (int64_t e = 0; e < n_expert; ++e) start[static_cast<size_t>(e) + 1] += start[static_cast<size_t>(e)];
      for (int64_t p = 0; p < n_pairs; ++p) order[start[static_cast<size_t>(ids[p])]++] = static_cast<int32_t>(p);
    });
  }
  Status moe_route(const gpu::GpuMoeRouteArgs& a) override {
    return run([=] {
      std::vector<float> scratch(static_cast<size_t>(2 * a.n_expert));
      const ModelConfig::MoeGate gate{a.norm, a.softmax_topk, a.sigmoid, a.scale, a.groups, a.groups_used};
      for (int64_t t = 0; t < a.n_tokens; ++t)
        moe_route_token(a.logits + t * a.n_expert, a.n_expert, a.k, gate, a.bias, a.ids + t * a.k, a.weights + t * a.k,
                        scratch.data());
    });
  }
  Status moe_combine(float* y, const float* yp, const float* weights, int64_t n_tokens, int64_t k, int64_t n,
                     const float* shared, const float* shared_gate) override {
    return run([=] {
      for (int64_t t = 0; t < n_tokens; ++t) {  // the CPU MoE's order (model/moe.cpp)
        float* yt = y + t * n;
        std::fill(yt, yt + n, 0.0f);
        for (int64_t j = 0; j < k; ++j) {
          const float wj = weights[t * k + j];
          const float* src = yp + (t * k + j) * n;
          for (int64_t i = 0; i < n; ++i) yt[i] += wj * src[i];
        }
        if (shared) {  // (no gate: glm4moe's / deepseek's shared experts)
          const float g = shared_gate ? 1.0f / (1.0f + std::exp(-shared_gate[t])) : 1.0f;
          for (int64_t i = 0; i < n; ++i) yt[i] += g * shared[t * n + i];
        }
      }
    });
  }
  Status rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps) override {
    return run([=] {
      rmsnorm_rows(x, n, weight, y, n, n_rows, n, eps);
    });
  }
  Status add(float* y, const float* x, int64_t n, float scale) override {
    return run([=] {
      if (scale == 1.0f) add_inplace(y, x, n);
      else axpy(y, x, scale, n);
    });
  }
  Status scale(float* x, int64_t n, float s) override {
    return run([=] {
      for (int64_t i = 0; i < n; ++i) x[i] *= s;
    });
  }
  Status attn_temperature(float* q, const int32_t* pos, int64_t n_tokens, int64_t width, float scale,
                          int64_t floor_len) override {
    return run([=] {
      for (int64_t t = 0; t < n_tokens; ++t) {
        const float f = ModelConfig::attn_temperature_factor(pos[t], scale, floor_len);
        for (int64_t i = 0; i < width; ++i) q[t * width + i] *= f;
      }
    });
  }
  Status add_rows(float* y, const float* b, int64_t n_rows, int64_t n) override {
    return run([=] {
      for (int64_t r = 0; r < n_rows; ++r) add_inplace(y + r * n, b, n);
    });
  }
  Status add_rows_id(float* y, const float* b, const int32_t* ids, int64_t n_rows, int64_t n) override {
    return run([=] {
      for (int64_t r = 0; r < n_rows; ++r) add_inplace(y + r * n, b + static_cast<int64_t>(ids[r]) * n, n);
    });
  }
  Status scatter_add(float* y, const float* u, const int32_t* rows, int64_t n_rows, int64_t n, float scale) override {
    return run([=] {
      for (int64_t p = 0; p < n_rows; ++p) axpy(y + static_cast<int64_t>(rows[p]) * n, u + p * n, scale, n);
    });
  }
  Status swiglu_oai(float* g, const float* u, int64_t n) override {
    return run([=] {
      for (int64_t i = 0; i < n; ++i) {  // model/moe.cpp swiglu_oai_rows with the biases already added
        const float x = std::min(g[i], 7.0f);
        g[i] = x / (1.0f + std::exp(-1.702f * x)) * (std::clamp(u[i], -7.0f, 7.0f) + 1.0f);
      }
    });
  }
  Status rope(const gpu::GpuRopeArgs& a) override {
    return run([=] {
      const int64_t half = a.n_rot / 2;
      for (int64_t t = 0; t < a.n_tokens; ++t)
        rope_heads_cs(a.x + t * a.n_heads * a.head_dim, a.n_heads, a.head_dim, a.n_rot, a.cos + t * half, a.sin + t * half,
                      a.neox);
    });
  }
  Status kv_store(const gpu::GpuKvStoreArgs& a) override {
    return run([=] {
      const PagedKvView view{a.k_tiles, a.v_tiles, a.kv_dtype, a.n_head_kv, a.block_size, a.head_dim};
      const int64_t kd = a.n_head_kv * a.head_dim;
      for (int64_t t = 0; t < a.n_tokens; ++t)
        paged_kv_store(view, a.block_tables + t * a.max_blocks, a.pos[t], a.k + t * kd, a.v + t * kd);
    });
  }
  Status attention(const gpu::GpuAttnArgs& a) override {
    return run([=] {
      const PagedKvView view{const_cast<uint8_t*>(a.k_tiles), const_cast<uint8_t*>(a.v_tiles), a.kv_dtype, a.n_head_kv,
                             a.block_size, a.head_dim};
      const int64_t group = a.n_head / a.n_head_kv, hd = a.head_dim;
      for (int64_t t = 0; t < a.n_tokens; ++t)
        for (int64_t h = 0; h < a.n_head_kv; ++h) {
          const int64_t off = (t * a.n_head + h * group) * hd;
          const int64_t n_ctx = a.n_ctx[t];
          const AttnMask mask{a.window > 0 && n_ctx > a.window ? n_ctx - a.window : 0, a.softcap,
                              a.sinks ? a.sinks + h * group : nullptr};
          paged_attention_group_reference(a.q + off, group, h, view, a.block_tables + t * a.max_blocks, n_ctx, a.scale,
                                          a.out + off, mask);
        }
    });
  }
  Status silu_mul(float* g, const float* u, int64_t n) override {
    return run([=] {
      tmill::silu_mul(g, u, n);
    });
  }
  Status gelu_mul(float* g, const float* u, int64_t n) override {
    return run([=] {
      tmill::gelu_mul(g, u, n);
    });
  }
  Status softcap(float* x, int64_t n, float cap) override {
    return run([=] {
      softcap_inplace(x, n, cap);
    });
  }
  Status argmax_rows(const float* x, int64_t n_rows, int64_t n, int32_t* out) override {
    return run([=] {
      for (int64_t r = 0; r < n_rows; ++r) out[r] = static_cast<int32_t>(tmill::argmax(x + r * n, n));
    });
  }
  Status synchronize() override { return recording ? Error{"host backend: synchronize while capturing a graph"} : Status{}; }
  Status begin_capture() override {
    if (recording) return Error{"host backend: a graph capture is already open on this thread"};
    recording = new Recording;
    return {};
  }
  Result<void*> end_capture() override {
    if (!recording) return Error{"host backend: no graph capture is open on this thread"};
    void* g = recording;
    recording = nullptr;
    return g;
  }
  Status replay(void* graph) override {
    if (recording) return Error{"host backend: replaying a graph while capturing one"};
    for (const auto& call : *static_cast<Recording*>(graph)) call();
    return {};
  }
  void drop_graph(void* graph) override { delete static_cast<Recording*>(graph); }

 private:
  // Runs a call now, or records it while this thread captures a graph.
  template <class F>
  static Status run(F&& f) {
    if (recording) recording->emplace_back(std::forward<F>(f));
    else f();
    return {};
  }
  static Status host_copy(const char* what, void* dst, const void* src, size_t bytes) {
    if (recording) return Error{std::string("host backend: ") + what + " while capturing a graph"};
    if (bytes) std::memmove(dst, src, bytes);
    return {};
  }
};

}  // namespace

gpu::Ops& gpu_host_ops() {
  static HostOps ops;
  return ops;
}

}  // namespace tmill
