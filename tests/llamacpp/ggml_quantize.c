/* Quantizes the 2-D and 3-D (experts) F32 weights of a GGUF file's layers (blk.*; rows a multiple of
 * 256 wide) to one ggml type with
 * llama.cpp's own quantizer (ggml_quantize_chunk of node-llama-cpp's libggml-base.so), with a uniform
 * importance matrix, which the 1-2 bit i-quants require; everything else is copied. For iquants.mjs:
 * files that llama.cpp wrote in the lattice i-quants (llama-quantize is not in the package).
 *
 *   cc -O1 -o ggml_quantize ggml_quantize.c DIR/libggml-base.so -Wl,-rpath,DIR
 *   ggml_quantize IN.gguf OUT.gguf TYPE_ID
 *
 * The few declarations below are ggml.h's and gguf.h's (llama.cpp de3ff81), written out so the
 * helper builds without llama.cpp's headers. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ggml_context;
struct ggml_tensor;
struct gguf_context;
struct gguf_init_params {
  bool no_alloc;
  struct ggml_context** ctx;
};
struct gguf_context* gguf_init_from_file(const char* fname, struct gguf_init_params params);
void gguf_free(struct gguf_context* ctx);
struct gguf_context* gguf_init_empty(void);
void gguf_set_kv(struct gguf_context* ctx, const struct gguf_context* src);
void gguf_add_tensor(struct gguf_context* ctx, const struct ggml_tensor* tensor);
int64_t gguf_get_n_tensors(const struct gguf_context* ctx);
const char* gguf_get_tensor_name(const struct gguf_context* ctx, int64_t tensor_id);
void gguf_set_tensor_type(struct gguf_context* ctx, const char* name, int type);
void gguf_set_tensor_data(struct gguf_context* ctx, const char* name, const void* data);
bool gguf_write_to_file(const struct gguf_context* ctx, const char* fname, bool only_meta);
struct ggml_tensor* ggml_get_tensor(struct ggml_context* ctx, const char* name);
int64_t ggml_nelements(const struct ggml_tensor* tensor);
int64_t ggml_nrows(const struct ggml_tensor* tensor);
int ggml_n_dims(const struct ggml_tensor* tensor);
void* ggml_get_data(const struct ggml_tensor* tensor);
size_t ggml_quantize_chunk(int type, const float* src, void* dst, int64_t start, int64_t nrows, int64_t n_per_row,
                           const float* imatrix);
void ggml_free(struct ggml_context* ctx);

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s IN.gguf OUT.gguf TYPE_ID\n", argv[0]);
    return 2;
  }
  const int type = atoi(argv[3]);
  struct ggml_context* data = NULL;
  struct gguf_init_params params = {false, &data};
  struct gguf_context* ctx = gguf_init_from_file(argv[1], params);
  if (!ctx) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  /* A new context with the same metadata and tensors (added from the loaded ggml tensors, which
   * carry their data), then the quantized ones retyped: gguf.h's way of rewriting a file. */
  struct gguf_context* out = gguf_init_empty();
  gguf_set_kv(out, ctx);
  const int64_t n = gguf_get_n_tensors(ctx);
  for (int64_t i = 0; i < n; ++i) gguf_add_tensor(out, ggml_get_tensor(data, gguf_get_tensor_name(ctx, i)));
  void** bufs = calloc(n > 0 ? (size_t)n : 1, sizeof(void*));
  int quantized = 0;
  for (int64_t i = 0; i < n; ++i) {
    const char* name = gguf_get_tensor_name(ctx, i);
    struct ggml_tensor* t = ggml_get_tensor(data, name);
    const int64_t rows = ggml_nrows(t), cols = ggml_nelements(t) / rows;
    const size_t len = strlen(name);
    if (strncmp(name, "blk.", 4) != 0 || ggml_n_dims(t) < 2 || ggml_n_dims(t) > 3 || cols % 256 != 0 || len < 7 ||
        strcmp(name + len - 7, ".weight") != 0)
      continue;
    float* imatrix = malloc(sizeof(float) * (size_t)cols);
    for (int64_t c = 0; c < cols; ++c) imatrix[c] = 1.0f;
    bufs[i] = malloc((size_t)(rows * cols) * 4);  /* more than any quantized size */
    ggml_quantize_chunk(type, (const float*)ggml_get_data(t), bufs[i], 0, rows, cols, imatrix);
    free(imatrix);
    gguf_set_tensor_type(out, name, type);
    gguf_set_tensor_data(out, name, bufs[i]);
    ++quantized;
  }
  if (!gguf_write_to_file(out, argv[2], false)) {
    fprintf(stderr, "cannot write %s\n", argv[2]);
    return 1;
  }
  printf("%d tensors quantized\n", quantized);
  for (int64_t i = 0; i < n; ++i) free(bufs[i]);
  free(bufs);
  gguf_free(out);
  gguf_free(ctx);
  ggml_free(data);
  return 0;
}
