#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenizer.h"

#include <pcre2.h>

#include <algorithm>

#include "tokenizer/unicode.h"

namespace tmill::tok {

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer families, by tokenizer.ggml.pre name. The patterns are those of the upstream
// tokenizer.json files (as listed in llama.cpp's llama-vocab.cpp); where llama.cpp rewrote
// `(?i:'s|...)` into explicit case classes we use the same rewrite so that GGUF files tokenize
// exactly as llama.cpp does. PCRE2 supports \p{Lu}, possessive quantifiers and look-around, so no
// other rewrite is needed.
// ---------------------------------------------------------------------------------------------
namespace {

#define TM_CONTRACTIONS R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))"

const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char* const kLlama3 = TM_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2 = TM_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen35 = TM_CONTRACTIONS
    R"(|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kPoro = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";
const char* const kDeepseekLatin =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";
const char* const kCjkKorean = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
const char* const kDeepseek3Main =
    R"re([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)" TM_CONTRACTIONS
    R"(?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)" TM_CONTRACTIONS
    R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Kimi-K2 (tiktoken): letters exclude Han, written with look-ahead instead of class intersection.
const char* const kKimiK2 =
    R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])*(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])+)" TM_CONTRACTIONS
    R"(?|[^\r\n\p{L}\p{N}]?(?:(?!\p{Han})[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}])+(?:(?!\p{Han})[\p{Ll}\p{Lm}\p{Lo}\p{M}])*)" TM_CONTRACTIONS
    R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct FamilyDef {
  std::vector<std::string> names;
  PreFamily family;
};

const std::vector<FamilyDef>& families() {
  static const std::vector<FamilyDef> defs = [] {
    std::vector<FamilyDef> d;
    auto add = [&](std::vector<std::string> names, std::vector<std::string> regex) -> PreFamily& {
      d.push_back({std::move(names), PreFamily{}});
      d.back().family.regex = std::move(regex);
      return d.back().family;
    };
    add({"default", ""}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"});
    {
      auto& f = add({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
                     "lfm2"}, {kLlama3});
      f.ignore_merges = true;
      f.add_bos = true;
    }
    add({"dbrx", "smaug-bpe"}, {kLlama3});
    add({"chatglm-bpe", "glm4"}, {kLlama3}).no_bos = true;
    add({"deepseek-llm"}, {"[\r\n]", kDeepseekLatin,
                           R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)", R"(\s+$)",
                           kCjkKorean, R"(\p{N}+)"});
    add({"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkKorean, R"(\p{N})"});
    add({"deepseek-v3", "hunyuan-dense", "joyai-llm"},
        {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)", kDeepseek3Main});
    add({"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"});
    add({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "minerva",
         "mellum2"}, {R"(\p{N})", kGpt2});
    add({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
         "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "mpt", "olmo", "jais",
         "trillion", "granite-docling", "exaone4"}, {kGpt2});
    add({"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan",
         "solar-open", "grok-2"}, {kQwen2});
    add({"qwen35"}, {kQwen35});
    add({"poro-chat", "bloom", "gpt3-finnish"}, {kPoro});
    add({"viking"}, {kPoro, R"(\p{N})"});
    {
      auto& f = add({"tekken"}, {kTekken});
      f.ignore_merges = true;
      f.add_bos = true;
    }
    add({"chameleon"}, {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\t\n]|    |  )",
                        R"(\p{N})", R"([\p{P}!-/:-@\[-`{-~])", kGpt2}).add_bos = true;
    add({"gpt-4o", "llama4", "kanana2", "minimax-m2"}, {kGpt4o});
    add({"superbpe"}, {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"});
    add({"bailingmoe", "bailingmoe2", "llada-moe"},
        {R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"});
    add({"seed-coder"}, {TM_CONTRACTIONS
        R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"});
    add({"kimi-k2"}, {kKimiK2});
    add({"ufakzeka"}, {R"([^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"});
    add({"laguna"}, {R"([^\n]+|[\n]+)", kQwen2});
    add({"minicpm5"}, {R"(\p{N}{1,3})", TM_CONTRACTIONS
        R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"})
        .ignore_merges = true;
    {
      auto& f = add({"gemma4"}, {R"([^\n]+|[\n]+)"});
      f.byte_encode = false;
      f.escape_whitespace = true;
    }
    return d;
  }();
  return defs;
}

}  // namespace

std::optional<PreFamily> pre_family(std::string_view pre) {
  for (const auto& def : families()) {
    if (std::find(def.names.begin(), def.names.end(), pre) != def.names.end()) return def.family;
  }
  return std::nullopt;
}

const std::vector<std::string>& known_pre_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& def : families())
      for (const auto& name : def.names)
        if (!name.empty()) n.push_back(name);
    return n;
  }();
  return names;
}

// ---------------------------------------------------------------------------------------------

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Compiled() { pcre2_code_free(code); }
};

Result<PreTokenizer> PreTokenizer::create(const std::vector<std::string>& regexes) {
  PreTokenizer p;
  for (const auto& re : regexes) {
    int err = 0;
    PCRE2_SIZE erroff = 0;
    auto c = std::make_shared<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re.data()), re.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &erroff, nullptr);
    if (!c->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      return Error{"pre-tokenizer regex '" + re + "' does not compile at offset " +
                   std::to_string(erroff) + ": " + reinterpret_cast<const char*>(msg)};
    }
    c->jit = pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE) == 0;
    p.regs_.push_back(std::move(c));
  }
  return p;
}

namespace {
// Per-thread scratch: match data with one ovector pair and a JIT stack large enough for long
// whitespace runs.
struct MatchScratch {
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
  MatchScratch() {
    if (stack && ctx) pcre2_jit_stack_assign(ctx, nullptr, stack);
    // Bound the work of one match so a pathological pattern from an untrusted tokenizer.json
    // cannot hang the process (real pre-tokenizer patterns stay far below these limits).
    if (ctx) {
      pcre2_set_match_limit(ctx, 10'000'000);
      pcre2_set_depth_limit(ctx, 100'000);
      pcre2_set_heap_limit(ctx, 64 * 1024);  // KiB
    }
  }
  ~MatchScratch() {
    pcre2_match_context_free(ctx);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(md);
  }
};
MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

// Runs one regex over text[off, off+len) and appends matches and the gaps between them.
template <class Emit>
void split_one(const pcre2_code* code, bool jit, std::string_view text, uint32_t off, uint32_t len,
               Emit&& emit) {
  auto& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + off);
  size_t pos = 0, last = 0;
  while (pos <= len) {
    int rc = jit ? pcre2_jit_match(code, subject, len, pos, PCRE2_NO_UTF_CHECK, s.md, s.ctx)
                 : pcre2_match(code, subject, len, pos, PCRE2_NO_UTF_CHECK, s.md, s.ctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // retry with the interpreter
      rc = pcre2_match(code, subject, len, pos, PCRE2_NO_UTF_CHECK, s.md, s.ctx);
    }
    if (rc < 0) break;  // no match (or a resource error: the rest stays one piece)
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.md);
    size_t ms = ov[0], me = ov[1];
    if (ms > last) emit(off + uint32_t(last), uint32_t(ms - last));
    if (me > ms) emit(off + uint32_t(ms), uint32_t(me - ms));
    last = std::max(last, me);
    if (me > ms) {
      pos = me;
    } else {  // empty match: a split point; step over one character
      if (ms >= len) break;
      pos = ms + utf8_len(static_cast<unsigned char>(text[off + ms]));
    }
  }
  if (last < len) emit(off + uint32_t(last), uint32_t(len - last));
}
}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<Piece>& out) const {
  if (text.empty()) return;
  const size_t base = out.size();
  out.push_back({0, uint32_t(text.size())});
  std::vector<Piece> next;
  for (size_t r = 0; r < regs_.size(); ++r) {
    const auto& c = *regs_[r];
    next.clear();
    for (size_t i = base; i < out.size(); ++i) {
      split_one(c.code, c.jit, text, out[i].offset, out[i].length,
                [&](uint32_t o, uint32_t l) { next.push_back({o, l}); });
    }
    out.resize(base);
    out.insert(out.end(), next.begin(), next.end());
  }
}

}  // namespace tmill::tok
