// The tokenizer's data model: everything a GGUF `tokenizer.ggml.*` block or a Hugging Face
// tokenizer.json folder says, normalised to one shape (llama.cpp's vocabulary model).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/result.h"

namespace tmill {
class GgufFile;
}

namespace tmill::tok {

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

// Per-token attribute bits (llama.cpp's llama_token_attr, same bit order).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrNormalized = 1u << 6,
  kAttrLstrip = 1u << 7,
  kAttrRstrip = 1u << 8,
  kAttrSingleWord = 1u << 9,
};
uint32_t attr_from_type(int32_t type);
TokenType type_from_attr(uint32_t attr);

enum class ModelKind { Spm, Bpe, Wpm };  // Wpm: WordPiece (BERT, tokenizer/wpm.h)

// When the SentencePiece space prefix ("▁" / " ") is put in front of a text fragment.
enum class SpacePrefix {
  None,
  AfterSpecial,  // llama.cpp SPM: the first fragment and every fragment right after a special token
  FirstOnly,     // HF Metaspace prepend_scheme "first": only a fragment at offset 0 of the input
  Always,        // HF Metaspace prepend_scheme "always"
};

struct TokenInfo {
  std::string text;  // vocabulary string (byte-level alphabet for GPT-2 style vocabularies)
  float score = 0.0f;
  uint32_t attr = kAttrNormal;
};

struct VocabData {
  std::string model;  // tokenizer.ggml.model: "llama" (SPM), "gpt2" (BPE) or "bert" (WordPiece)
  std::string pre;    // tokenizer.ggml.pre (BPE pre-tokenizer family)
  std::string name;   // general.name (llama.cpp derives Phi-3 token attributes from it)
  ModelKind kind = ModelKind::Spm;
  std::vector<TokenInfo> tokens;
  std::vector<std::pair<std::string, std::string>> merges;  // BPE, in rank order

  // Pipeline.
  std::vector<std::string> pre_regex;  // split regexes, applied one after another (BPE)
  bool byte_encode = false;            // GPT-2 byte-to-unicode alphabet (byte-level BPE)
  bool escape_whitespace = false;      // " " -> "▁" before the model
  SpacePrefix space_prefix = SpacePrefix::None;
  bool prefix_if_missing = false;      // HF Metaspace: no prefix when the text already starts with "▁"
  bool ignore_merges = false;          // BPE: a whole pre-token found in the vocabulary is one token
  bool byte_fallback = true;           // unknown bytes -> <0xNN> tokens when the vocabulary has them
  bool nfc = false;                    // NFC-normalise input (HF normalizer)

  // Special tokens (-1 = none).
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1, sep = -1;
  int32_t fim_pre = -1, fim_suf = -1, fim_mid = -1, fim_pad = -1, fim_rep = -1, fim_sep = -1;
  bool add_bos = false, add_eos = false;
  bool add_sep = false;  // WordPiece: [SEP] ends an encoded text with add_special (llama.cpp's add_sep)
  std::optional<std::string> chat_template;
  // tokenizer.chat_template.rerank: a reranker's pair prompt with {query} and {document} (llama.cpp
  // substitutes both, then tokenizes the text with special tokens and no BOS/EOS added).
  std::optional<std::string> rerank_template;
};

// The pair prompt llama.cpp's convert_hf_to_gguf.py writes into a Qwen3-Reranker GGUF
// (tokenizer.chat_template.rerank), the format the model was trained on.
inline constexpr const char* kQwen3RerankTemplate =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n"
    "<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n";

// Reads the tokenizer.ggml.* block (llama.cpp's rules and defaults).
Result<VocabData> vocab_from_gguf(const GgufFile& f);

struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StrHash, std::equal_to<>>;

// Derived lookups shared by the encoders. Built once by finalize_vocab().
struct VocabIndex {
  TokenMap token_to_id;
  int32_t find(std::string_view text) const {
    auto it = token_to_id.find(text);
    return it == token_to_id.end() ? -1 : it->second;
  }
  std::vector<int32_t> special_tokens;  // control/user-defined/unknown ids, longest text first
  std::vector<int32_t> eog;             // end-of-generation ids, sorted
  int32_t byte_tokens[256];             // <0xNN> ids (-1 if missing)
};

// Checks ids, fills token_to_id, detects EOT/EOM/FIM/EOG tokens by text (as llama.cpp does),
// applies per-model attribute fixes. Mutates `v` (attributes, special ids).
Result<VocabIndex> finalize_vocab(VocabData& v);

}  // namespace tmill::tok
