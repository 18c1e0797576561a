// llama2.c checkpoints (run.c's legacy format) and tokenizer.bin, converted to GGUF.
//   model.bin: 7 x int32 header {dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len}
//              (vocab_size < 0 means an untied classifier follows), then float32 weights in order:
//              token_embedding (vocab, dim), rms_att (layer, dim), wq (layer, dim, dim),
//              wk (layer, kv_dim, dim), wv (layer, kv_dim, dim), wo (layer, dim, dim), rms_ffn (layer, dim),
//              w1 (layer, hidden, dim), w2 (layer, dim, hidden), w3 (layer, hidden, dim), rms_final (dim),
//              freq_cis_real (seq_len, head_size/2), freq_cis_imag (same), [wcls (vocab, dim)].
//   tokenizer.bin: int32 max_token_length, then vocab_size x {float32 score, int32 len, len bytes}.
#pragma once

#include <string>

#include "core/result.h"

namespace tmill {

struct Llama2cConvertOptions {
  std::string name = "llama2.c model";
};

Status convert_llama2c_to_gguf(const std::string& model_bin, const std::string& tokenizer_bin,
                               const std::string& out_gguf, const Llama2cConvertOptions& opts = {});

}  // namespace tmill
