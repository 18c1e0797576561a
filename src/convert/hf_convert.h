// Complete Hugging Face folder -> GGUF conversion: hyper-parameters and weights (formats/hf_model.h)
// plus the tokenizer (tokenizer/tokenizer.h: hf_tokenizer_to_gguf), in one file llama.cpp and
// tokenmill both load. This small module exists because formats/ must not depend on tokenizer/.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "formats/gguf.h"
#include "formats/hf_model.h"

namespace tmill {

// Like convert_hf_to_gguf(), with the tokenizer added (unless opts.add_tokenizer is already set).
Status convert_hf_model(const std::string& hf_dir, const std::string& out_path, HfConvertOptions opts);

// hf_tokenizer_to_gguf(), then the vocabulary padded to the model's vocab_size the way llama.cpp's
// converter does (tokens "[PAD<id>]" of type UNUSED, score -10000), since llama.cpp sizes
// token_embd by the token count. A tokenizer with more tokens than vocab_size is an error.
Status add_hf_tokenizer_padded(const std::string& hf_dir, int64_t vocab_size, GgufWriter& w);

}  // namespace tmill
