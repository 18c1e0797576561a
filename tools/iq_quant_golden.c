/* Golden hashes for tests/unit/quant/iq_lattice_quant_test.cpp: llama.cpp's own quantizers
 * (ggml_quantize_chunk of libggml-base.so, i.e. quantize_iq2_xxs ... quantize_iq1_m, what
 * llama-quantize calls) on the test's 4 x 512 inputs, with its importance vector and, for the types
 * ggml quantizes without one, without; prints the FNV-1a 64 hash of the bytes per case.
 *
 *   cc -O1 -o /tmp/iq_quant_golden tools/iq_quant_golden.c -ldl -lm
 *   /tmp/iq_quant_golden tests/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so
 *
 * (node-llama-cpp's prebuilt llama.cpp, after `npm install` in tests/llamacpp; de3ff81 when written.)
 * IQ3_S: ggml advances its grid-index and sign write positions only past non-zero blocks, so after the
 * test's all-zero block it writes the later blocks' entries one block early (that super-block then
 * decodes to garbage). tokenmill writes them in place; the hash printed for IQ3_S is of llama.cpp's
 * bytes with the entries moved back to their blocks. */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { kRows = 4, kCols = 512 };

/* Same inputs as the test: LCG integers / 1024 times a per-block factor, then one all-zero block. */
static void inputs(float* x, float* w) {
  uint32_t s = 12345;
  for (int i = 0; i < kRows * kCols; ++i) {
    s = s * 1664525u + 1013904223u;
    const int v = (int)((s >> 8) % 2001) - 1000;
    x[i] = (float)v / 1024.0f * (float)(1 + (i / 32) % 5);
  }
  for (int c = 0; c < kCols; ++c) {
    s = s * 1664525u + 1013904223u;
    w[c] = (float)(1 + (s >> 8) % 64) / 16.0f;
  }
  for (int c = 64; c < 96; ++c) x[2 * kCols + c] = 0;
}

/* IQ3_S super-block: d (2), qs (64), qh (8), signs (32), scales (4). */
static void iq3s_undo_slip(const float* x, uint8_t* q) {
  for (int sb = 0; sb < kRows * kCols / 256; ++sb) {
    uint8_t* b = q + 110 * sb;
    uint8_t qs[64] = {0}, signs[32] = {0};
    int at = 0;
    for (int ib = 0; ib < 8; ++ib) {
      float max = 0;
      for (int i = 0; i < 32; ++i) max = fmaxf(max, fabsf(x[256 * sb + 32 * ib + i]));
      if (max == 0) continue;
      memcpy(qs + 8 * ib, b + 2 + 8 * at, 8);
      memcpy(signs + 4 * ib, b + 74 + 4 * at, 4);
      ++at;
    }
    memcpy(b + 2, qs, 64);
    memcpy(b + 74, signs, 32);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s libggml-base.so\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  typedef size_t (*quantize_chunk_fn)(int, const float*, void*, int64_t, int64_t, int64_t, const float*);
  quantize_chunk_fn quantize = (quantize_chunk_fn)dlsym(lib, "ggml_quantize_chunk");
  if (!quantize) {
    fprintf(stderr, "ggml_quantize_chunk not found\n");
    return 1;
  }
  static float x[kRows * kCols], w[kCols];
  static uint8_t q[kRows * kCols * 4];
  inputs(x, w);
  /* ggml type ids; `required`: ggml asserts without an importance vector. */
  static const struct {
    const char* name;
    int type, required;
  } types[] = {{"IQ2_XXS", 16, 1}, {"IQ2_XS", 17, 1}, {"IQ3_XXS", 18, 0}, {"IQ1_S", 19, 1},
               {"IQ3_S", 21, 0},   {"IQ2_S", 22, 0},  {"IQ1_M", 29, 0}};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t)
    for (int imp = 1; imp >= 0; --imp) {
      if (!imp && types[t].required) continue;
      memset(q, 0, sizeof q);
      const size_t n = quantize(types[t].type, x, q, 0, kRows, kCols, imp ? w : NULL);
      if (types[t].type == 21) iq3s_undo_slip(x, q);
      uint64_t h = 1469598103934665603ull;
      for (size_t i = 0; i < n; ++i) h = (h ^ q[i]) * 1099511628211ull;
      printf("{DType::%s, %s, 0x%016llxull},\n", types[t].name, imp ? "true" : "false", (unsigned long long)h);
    }
  return 0;
}
