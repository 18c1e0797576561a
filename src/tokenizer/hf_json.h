// Hugging Face tokenizer folders: tokenizer.json (+ tokenizer_config.json) -> VocabData.
//
// Supported pipeline pieces (what Qwen2/3, Llama 3, GPT-2 and Mistral/Llama-2 style files use):
//   normalizer:    null, NFC, Replace(" " -> "▁"), Prepend("▁"), Sequence of these
//   pre_tokenizer: null, Split(Regex|String, Isolated), ByteLevel(add_prefix_space, use_regex),
//                  Digits, Metaspace(replacement "▁", prepend_scheme / add_prefix_space, split),
//                  Sequence of these
//   model:         BPE (vocab, merges as "a b" or ["a","b"], byte_fallback, ignore_merges, unk_token)
//   decoder:       ByteLevel, Metaspace, Sequence(Replace, ByteFallback, Fuse, Strip) — implied by
//                  the encoder settings
//   added_tokens:  special -> control, otherwise user-defined; lstrip/rstrip kept
// Anything else is rejected with an error naming the unsupported component.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "tokenizer/vocab.h"

namespace tmill::tok {

Result<VocabData> vocab_from_hf_dir(const std::string& dir);
// Same from in-memory JSON texts (config may be empty) — used by the fuzz target.
Result<VocabData> vocab_from_hf_json(const std::string& tokenizer_json, const std::string& config_json);

// The tokenizer.ggml.pre family whose pre-tokenizer splits text exactly like `regex` (probed on a
// varied sample text) and agrees on ignore_merges; "" if none does.
std::string detect_pre_family(const std::vector<std::string>& regex, bool ignore_merges);

}  // namespace tmill::tok
