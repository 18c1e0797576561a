#include "convert/hf_convert.h"

#include <cstring>

#include <fmt/format.h>

#include "convert/hf_tokenizer.h"

namespace tmill {
namespace {

constexpr int32_t kTokenTypeUnused = 5;  // llama.cpp's LLAMA_TOKEN_TYPE_UNUSED
constexpr float kPadScore = -10000.0f;

template <class T>
Status pad_numeric(GgufValue& v, GgufType want, uint64_t n, T fill, const char* key) {
  if (v.type != GgufType::ARRAY || v.elem_type != want) return Error{fmt::format("{} has an unexpected type", key)};
  const size_t old = v.raw.size();
  v.raw.resize(n * sizeof(T));
  for (size_t off = old; off < v.raw.size(); off += sizeof(T)) std::memcpy(v.raw.data() + off, &fill, sizeof(T));
  v.count = n;
  return {};
}

}  // namespace

Status add_hf_tokenizer_padded(const std::string& hf_dir, int64_t vocab_size, GgufWriter& w) {
  // The tokenizer writes into a scratch writer whose values are read back, padded and copied.
  GgufWriter scratch;
  TM_TRY(hf_tokenizer_to_gguf(hf_dir, scratch));
  TM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, scratch.to_bytes());
  TM_ASSIGN_OR_RETURN(GgufFile f, GgufFile::parse(bytes.data(), bytes.size()));
  const auto* tokens = f.find("tokenizer.ggml.tokens") ? f.find("tokenizer.ggml.tokens")->as_string_array() : nullptr;
  if (!tokens) return Error{fmt::format("{}: the tokenizer wrote no tokenizer.ggml.tokens", hf_dir)};
  const uint64_t n_tok = tokens->size();
  const uint64_t n = static_cast<uint64_t>(vocab_size);
  if (n_tok > n)
    return Error{fmt::format("{}: the tokenizer has {} tokens but config.json's vocab_size is {}", hf_dir, n_tok, n)};
  for (auto [key, v] : f.metadata()) {
    if (n_tok < n) {
      if (key == "tokenizer.ggml.tokens") {
        for (uint64_t i = n_tok; i < n; ++i) v.strings.push_back(fmt::format("[PAD{}]", i));
        v.count = n;
      } else if (key == "tokenizer.ggml.token_type") {
        TM_TRY(pad_numeric<int32_t>(v, GgufType::I32, n, kTokenTypeUnused, "tokenizer.ggml.token_type"));
      } else if (key == "tokenizer.ggml.scores") {
        TM_TRY(pad_numeric<float>(v, GgufType::F32, n, kPadScore, "tokenizer.ggml.scores"));
      }
    }
    w.set(key, std::move(v));
  }
  return {};
}

Status convert_hf_model_with(const std::string& hf_dir, HfConvertOptions opts,
                             const std::function<Status(GgufWriter&)>& write) {
  TM_ASSIGN_OR_RETURN(HfModel m, HfModel::open(hf_dir));
  if (!opts.add_tokenizer) {
    const int64_t vocab = m.config.vocab_size;
    opts.add_tokenizer = [vocab](const std::string& dir, GgufWriter& w) {
      return add_hf_tokenizer_padded(dir, vocab, w);
    };
  }
  GgufWriter w;
  TM_TRY(add_hf_model_to_gguf(m, opts, w));
  return write(w);
}

Status convert_hf_model(const std::string& hf_dir, const std::string& out_path, HfConvertOptions opts) {
  return convert_hf_model_with(hf_dir, std::move(opts), [&](GgufWriter& w) { return w.write(out_path); });
}

}  // namespace tmill
