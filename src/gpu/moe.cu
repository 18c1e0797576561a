// Mixture-of-experts kernels of the CUDA backend (gpu/kernels.h) besides the experts' products
// (gemv.cu's gemm_id): the routing of each token to its k experts and the weighted sum of their
// outputs. Routing stays on the device so a step never waits for the host between layers.
#include <cuda_runtime.h>

#include <cmath>

#include <string>

#include "gpu/kernels.h"
#include "gpu/stream.cuh"

namespace tmill::gpu::inline TM_GPU_ABI {
namespace {

constexpr int kMaxExperts = 256, kMaxUsed = 32, kMaxGroups = 64, kThreads = 128;

// ref::softmax's order: the max, exp of the differences summed left to right, each divided by the sum.
__device__ __forceinline__ void softmax(float* v, int n) {
  float mx = v[0];
  for (int i = 1; i < n; ++i) mx = fmaxf(mx, v[i]);
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) {
    v[i] = expf(v[i] - mx);
    sum += v[i];
  }
  for (int i = 0; i < n; ++i) v[i] /= sum;
}

// One thread per token, in model/moe.cpp moe_route_token's order of operations: softmax (max, exp of
// the differences, divide by the sum) or sigmoid, the choice by score + selection bias within the best
// groups, top-k by repeated selection (first index wins a tie), the optional softmax over the chosen
// logits or renormalization (the sum clamped as the CPU's), the scale, then the k pairs sorted by expert.
__global__ void route_kernel(GpuMoeRouteArgs a) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.n_tokens) return;
  const float* lg = a.logits + t * a.n_expert;
  const int ne = static_cast<int>(a.n_expert), k = static_cast<int>(a.k);
  float p[kMaxExperts], choice[kMaxExperts];
  for (int e = 0; e < ne; ++e) p[e] = lg[e];
  if (a.sigmoid) {
    for (int e = 0; e < ne; ++e) p[e] = 1.0f / (1.0f + expf(-p[e]));
  } else if (!a.softmax_topk) {
    softmax(p, ne);
  }
  for (int e = 0; e < ne; ++e) choice[e] = a.bias ? __fadd_rn(p[e], a.bias[e]) : p[e];
  bool taken[kMaxExperts] = {};
  if (a.groups > 1) {  // the experts outside the best groups (by their two best choices) are taken
    const int G = static_cast<int>(a.groups), per = ne / G;
    float score[kMaxGroups];
    bool kept[kMaxGroups] = {};
    for (int g = 0; g < G; ++g) {
      float x = -INFINITY, y = -INFINITY;
      for (int e = g * per; e < (g + 1) * per; ++e) {
        if (choice[e] > x) y = x, x = choice[e];
        else if (choice[e] > y) y = choice[e];
      }
      score[g] = __fadd_rn(x, y);
    }
    for (int i = 0; i < a.groups_used; ++i) {
      int best = -1;
      for (int g = 0; g < G; ++g)
        if (!kept[g] && (best < 0 || score[g] > score[best])) best = g;
      kept[best] = true;
    }
    for (int g = 0; g < G; ++g)
      if (!kept[g])
        for (int e = g * per; e < (g + 1) * per; ++e) taken[e] = true;
  }
  int ids[kMaxUsed];
  float w[kMaxUsed];
  float wsum = 0.0f;
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < ne; ++e)
      if (!taken[e] && (best < 0 || choice[e] > choice[best])) best = e;
    ids[j] = best;
    w[j] = p[best];
    wsum += p[best];
    taken[best] = true;
  }
  if (a.softmax_topk) softmax(w, k);
  if (a.norm)
    for (int j = 0; j < k; ++j) w[j] /= fmaxf(wsum, 6.103515625e-5f);
  if (a.scale != 1.0f)
    for (int j = 0; j < k; ++j) w[j] *= a.scale;
  for (int i = 1; i < k; ++i)
    for (int j = i; j > 0 && ids[j - 1] > ids[j]; --j) {
      const int ti = ids[j - 1];
      ids[j - 1] = ids[j];
      ids[j] = ti;
      const float tw = w[j - 1];
      w[j - 1] = w[j];
      w[j] = tw;
    }
  for (int j = 0; j < k; ++j) {
    a.ids[t * k + j] = ids[j];
    a.weights[t * k + j] = w[j];
  }
}

// One CTA: a count per expert, their prefix sums, then each pair to its expert's next slot.
__global__ void sort_kernel(const int32_t* ids, int64_t n, int ne, int32_t* order) {
  __shared__ int next[kMaxExperts];
  for (int e = threadIdx.x; e < ne; e += blockDim.x) next[e] = 0;
  __syncthreads();
  for (int64_t p = threadIdx.x; p < n; p += blockDim.x) atomicAdd(&next[ids[p]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int s = 0;
    for (int e = 0; e < ne; ++e) {
      const int c = next[e];
      next[e] = s;
      s += c;
    }
  }
  __syncthreads();
  for (int64_t p = threadIdx.x; p < n; p += blockDim.x) order[atomicAdd(&next[ids[p]], 1)] = static_cast<int32_t>(p);
}

// One thread per output element: the k weighted rows summed in order, then the gated shared expert.
__global__ void combine_kernel(float* y, const float* yp, const float* weights, int64_t n_tokens, int64_t k, int64_t n,
                               const float* shared, const float* shared_gate) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n_tokens * n) return;
  const int64_t t = i / n, c = i % n;
  float s = 0.0f;
  for (int64_t j = 0; j < k; ++j) s = __fadd_rn(s, __fmul_rn(weights[t * k + j], yp[(t * k + j) * n + c]));
  if (shared) {  // qwen2moe's gated by sigmoid(gate); glm4moe's / deepseek's (no gate) not
    const float g = shared_gate ? 1.0f / (1.0f + expf(-shared_gate[t])) : 1.0f;
    s = __fadd_rn(s, __fmul_rn(g, shared[i]));
  }
  y[i] = s;
}


}  // namespace

Status moe_route(const GpuMoeRouteArgs& a) {
  if (a.n_expert <= 0 || a.n_expert > kMaxExperts || a.k <= 0 || a.k > kMaxUsed || a.k > a.n_expert)
    return Error{"CUDA moe_route: at most 256 experts and 32 of them per token"};
  if (a.groups > 1 && (a.groups > kMaxGroups || a.n_expert % a.groups != 0 || a.n_expert / a.groups < 2 ||
                       a.groups_used < 1 || a.groups_used >= a.groups))
    return Error{"CUDA moe_route: at most 64 groups of two or more experts, fewer used than there are"};
  if (a.n_tokens <= 0) return {};
  TM_LAUNCH(route_kernel, static_cast<unsigned>((a.n_tokens + kThreads - 1) / kThreads), kThreads, 0, stream())(a);
  return launched("moe_route");
}

Status moe_sort(const int32_t* ids, int64_t n_pairs, int64_t n_expert, int32_t* order) {
  if (n_expert <= 0 || n_expert > kMaxExperts) return Error{"CUDA moe_sort: at most 256 experts"};
  if (n_pairs <= 0) return {};
  TM_LAUNCH(sort_kernel, 1, 1024, 0, stream())(ids, n_pairs, static_cast<int>(n_expert), order);
  return launched("moe_sort");
}

Status moe_combine(float* y, const float* yp, const float* weights, int64_t n_tokens, int64_t k, int64_t n,
                   const float* shared, const float* shared_gate) {
  const int64_t total = n_tokens * n;
  if (total <= 0) return {};
  TM_LAUNCH(combine_kernel, static_cast<unsigned>((total + 255) / 256), 256, 0, stream())(y, yp, weights, n_tokens, k, n, shared,
                                                                      shared_gate);
  return launched("moe_combine");
}

}  // namespace tmill::gpu::inline TM_GPU_ABI
