// Hugging Face tokenizer folder (tokenizer.json + tokenizer_config.json) -> GGUF tokenizer metadata.
// Reading the folder is the tokenizer module's (tok::vocab_from_hf_dir); this writes what it read.
#pragma once

#include <string>

#include "core/result.h"
#include "formats/gguf.h"

namespace tmill {

// Writes the tokenizer.ggml.* keys (model, pre, tokens, token_type, merges, special ids,
// add_bos/add_eos, chat_template) equivalent to a Hugging Face tokenizer folder, so that the GGUF
// tokenizes exactly like the folder.
Status hf_tokenizer_to_gguf(const std::string& hf_dir, GgufWriter& w);

}  // namespace tmill
