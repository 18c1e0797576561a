#include "model/shortconv.h"

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/log.h"
#include "core/thread_pool.h"

namespace tmill {

void shortconv_mix(const ModelConfig& c, const std::vector<float>& kernel, const ForwardBatch& batch,
                   const int32_t* pos, const int32_t* seq_of, const KvLayout& lay, float* state, float* bcx,
                   float* out, int64_t n, ThreadPool* pool) {
  const int64_t E = c.n_embd, L = c.shortconv_l, R = lay.conv_ring, bs = lay.block_size;
  const size_t per_block = lay.conv_floats_per_block();
  TM_ASSERT(R >= 1 && lay.conv_width == E, "no convolution state in the KV layout");
  auto parallel = [&](int64_t count, const std::function<void(int64_t, int64_t, int)>& fn) {
    if (pool && count > 1) pool->parallel_for(count, 1, fn);
    else fn(0, count, 0);
  };
  parallel(n, [&](int64_t t0, int64_t t1, int) {
    for (int64_t t = t0; t < t1; ++t) {  // b * x, in place of b
      float* b = bcx + t * 3 * E;
      const float* x = b + 2 * E;
      for (int64_t i = 0; i < E; ++i) b[i] *= x[i];
    }
  });
  // The input b * x of position q of the sequence of row t: a row of this step, the cached state, or
  // null before position 0.
  auto input_at = [&](int64_t t, int64_t q) -> const float* {
    if (q < 0) return nullptr;
    const SeqSlice& s = batch.seqs[static_cast<size_t>(seq_of[t])];
    if (q >= s.pos_begin) return bcx + (s.token_begin + (q - s.pos_begin)) * 3 * E;
    return state + static_cast<size_t>(s.block_table[static_cast<size_t>(q / bs)]) * per_block +
           static_cast<size_t>(q % R * E);
  };
  parallel(n, [&](int64_t t0, int64_t t1, int) {
    std::vector<const float*> in(static_cast<size_t>(L));
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t j = 0; j < L; ++j) in[static_cast<size_t>(j)] = input_at(t, pos[t] - (L - 1) + j);
      const float* gate = bcx + t * 3 * E + E;
      float* o = out + t * E;
      for (int64_t i = 0; i < E; ++i) {
        const float* k = kernel.data() + i * L;
        float acc = 0.0f;  // llama.cpp's order: the oldest input first
        for (int64_t j = 0; j < L; ++j)
          if (in[static_cast<size_t>(j)]) acc += in[static_cast<size_t>(j)][i] * k[j];
        o[i] = gate[i] * acc;
      }
    }
  });
  // The step's inputs into the state: each position whose slot no later row of its sequence, in its
  // block, takes (the rows of one block then write distinct slots, in any order).
  for (int64_t t = 0; t < n; ++t) {
    const SeqSlice& s = batch.seqs[static_cast<size_t>(seq_of[t])];
    const int64_t p = pos[t], last = s.pos_begin + s.n_tokens - 1, block_last = (p / bs + 1) * bs - 1;
    if (p + R <= std::min(last, block_last)) continue;
    float* dst = state + static_cast<size_t>(s.block_table[static_cast<size_t>(p / bs)]) * per_block +
                 static_cast<size_t>(p % R * E);
    std::memcpy(dst, bcx + t * 3 * E, static_cast<size_t>(E) * sizeof(float));
  }
}

}  // namespace tmill
