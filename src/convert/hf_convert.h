// Complete Hugging Face folder -> GGUF conversion: hyper-parameters and weights (convert/hf_model.h)
// plus the tokenizer (convert/hf_tokenizer.h), in one file llama.cpp and tokenmill both load.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/result.h"
#include "formats/gguf.h"
#include "convert/hf_model.h"

namespace tmill {

// Like convert_hf_to_gguf(), with the tokenizer added (unless opts.add_tokenizer is already set).
Status convert_hf_model(const std::string& hf_dir, const std::string& out_path, HfConvertOptions opts);

// The same conversion, handed to `write` (which may set a progress callback and write the file to a
// path or an in-memory file) while the folder's weights are still mapped.
Status convert_hf_model_with(const std::string& hf_dir, HfConvertOptions opts,
                             const std::function<Status(GgufWriter&)>& write);

// hf_tokenizer_to_gguf(), then the vocabulary padded to the model's vocab_size the way llama.cpp's
// converter does (tokens "[PAD<id>]" of type UNUSED, score -10000), since llama.cpp sizes
// token_embd by the token count. A tokenizer with more tokens than vocab_size is an error.
Status add_hf_tokenizer_padded(const std::string& hf_dir, int64_t vocab_size, GgufWriter& w);

}  // namespace tmill
