/* Golden values for tests/unit/quant/iq_lattice_test.cpp: llama.cpp's own dequantizers
 * (dequantize_row_iq2_xxs ... exported by libggml-base.so) on the same pseudo-random blocks the test
 * builds; prints, per type, the FNV-1a hash of the output floats' bit patterns and the first values.
 *
 *   cc -O1 -o /tmp/iq_golden tools/iq_golden.c -ldl
 *   /tmp/iq_golden tests/llamacpp/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so
 *
 * (node-llama-cpp's prebuilt llama.cpp, after `npm install` in tests/llamacpp; de3ff81 when written.) */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kBlocks = 256 };

/* Same generator as the test: every byte random, then the fp16 scale set to 0x3000 + 10 random bits. */
static void make_blocks(int block_bytes, int iq1m, uint8_t* out) {
  uint32_t s = 2024;
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* p = out + (size_t)b * block_bytes;
    for (int i = 0; i < block_bytes; ++i) {
      s = s * 1664525u + 1013904223u;
      p[i] = (uint8_t)(s >> 24);
    }
    s = s * 1664525u + 1013904223u;
    const uint16_t d = (uint16_t)(0x3000 + ((s >> 16) & 0x3ff));
    if (!iq1m) {
      p[0] = (uint8_t)(d & 0xff);
      p[1] = (uint8_t)(d >> 8);
    } else { /* scales (4 x u16 at byte 48): top nibble of word k = nibble k of d */
      for (int k = 0; k < 4; ++k) p[48 + 2 * k + 1] = (uint8_t)((p[48 + 2 * k + 1] & 0x0f) | (((d >> (4 * k)) & 0xf) << 4));
    }
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
  static const struct {
    const char* name;
    const char* fn;
    int bytes;
  } types[] = {{"IQ2_XXS", "dequantize_row_iq2_xxs", 66}, {"IQ2_XS", "dequantize_row_iq2_xs", 74},
               {"IQ2_S", "dequantize_row_iq2_s", 82},     {"IQ3_XXS", "dequantize_row_iq3_xxs", 98},
               {"IQ3_S", "dequantize_row_iq3_s", 110},    {"IQ1_S", "dequantize_row_iq1_s", 50},
               {"IQ1_M", "dequantize_row_iq1_m", 56}};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
    void (*deq)(const void*, float*, int64_t) = (void (*)(const void*, float*, int64_t))dlsym(lib, types[t].fn);
    if (!deq) {
      fprintf(stderr, "%s not found\n", types[t].fn);
      return 1;
    }
    uint8_t* blocks = malloc((size_t)kBlocks * types[t].bytes);
    float* y = malloc(sizeof(float) * kBlocks * 256);
    make_blocks(types[t].bytes, strcmp(types[t].name, "IQ1_M") == 0, blocks);
    deq(blocks, y, (int64_t)kBlocks * 256);
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < kBlocks * 256; ++i) {
      uint32_t u;
      memcpy(&u, &y[i], 4);
      for (int k = 0; k < 4; ++k) {
        h ^= (u >> (8 * k)) & 0xff;
        h *= 1099511628211ull;
      }
    }
    printf("{\"%s\", 0x%016llxull, {%.9g, %.9g, %.9g, %.9g}},\n", types[t].name, (unsigned long long)h, y[0], y[1],
           y[2], y[3]);
    free(blocks);
    free(y);
  }
  return 0;
}
