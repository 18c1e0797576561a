// Tokenizer encode/decode throughput on mixed English / Chinese / code text (Google Benchmark).
//
//   build/bench/bench_tokenizer_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
//   (optional: TM_TOKENIZER=<gguf or HF folder> to measure another vocabulary; default Qwen2)
//
// Throughput is computed from CPU time (Google Benchmark's default for one thread), i.e. time on
// one core, which stays meaningful when the machine is shared.
//
// The corpus (~4 MB) is generated deterministically: English sentences from a word list with
// Zipf-like frequencies, Chinese sentences from common characters, and code snippets with random
// identifiers and numbers, interleaved paragraph by paragraph.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using tmill::Tokenizer;

std::string repo_root() {
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
}

std::shared_ptr<const Tokenizer> tokenizer() {
  static std::shared_ptr<const Tokenizer> tok = [] {
    const char* env = std::getenv("TM_TOKENIZER");
    std::string path = env && *env ? env : repo_root() + "/tests/data/tokenizers/ggml-vocab-qwen2.gguf";
    auto t = Tokenizer::load(path);
    if (!t.ok()) {
      std::fprintf(stderr, "cannot load %s: %s\n", path.c_str(), t.error().c_str());
      std::abort();
    }
    return std::shared_ptr<const Tokenizer>(*t);
  }();
  return tok;
}

const std::string& corpus() {
  static const std::string text = [] {
    static const char* words[] = {
        "the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on",
        "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they",
        "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when",
        "will", "would", "who", "so", "no", "model", "inference", "server", "token", "memory", "request",
        "latency", "throughput", "scheduler", "attention", "kernel", "quantization", "benchmark", "people",
        "language", "government", "university", "information", "development", "international", "different",
        "important", "Tokyo", "London", "Einstein", "however", "therefore", "approximately", "don't", "it's"};
    static const char* hanzi =
        "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多定"
        "行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因由其些"
        "然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解问意建月公"
        "无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少图山统接知较将"
        "组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七海口东导器压志世金"
        "增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目至达走积示议声报斗完类"
        "八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算低持音众书布复容儿须际商非"
        "验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精值号率族维划选标写存候毛亲快效"
        "斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该铁价严龙飞";
    static const char* code_kw[] = {"int", "return", "for", "if", "else", "while", "const", "auto", "std::vector",
                                    "def", "self", "import", "from", "class", "struct", "nullptr", "None", "True"};
    std::mt19937 rng(7);
    std::vector<uint32_t> han;
    for (size_t i = 0; hanzi[i];) {
      size_t len = tmill::tok::utf8_len(static_cast<unsigned char>(hanzi[i]));
      han.push_back(tmill::tok::decode_utf8(hanzi, i, len));
      i += len;
    }
    const size_t n_words = sizeof(words) / sizeof(words[0]);
    auto zipf = [&] {  // index ~ 1/(rank+1)
      double u = std::uniform_real_distribution<double>(0, 1)(rng);
      return size_t(std::pow(double(n_words), u)) - 1;
    };
    std::string out;
    out.reserve(4 << 20);
    while (out.size() < (4u << 20)) {
      int kind = int(rng() % 3);
      if (kind == 0) {  // English paragraph
        for (int s = 0; s < 5; ++s) {
          int len = 6 + int(rng() % 14);
          for (int w = 0; w < len; ++w) {
            std::string word = words[std::min(zipf(), n_words - 1)];
            if (w == 0) word[0] = char(std::toupper(static_cast<unsigned char>(word[0])));
            out += word;
            out += (w + 1 == len) ? ". " : (rng() % 10 == 0 ? ", " : " ");
          }
        }
        out += "\n\n";
      } else if (kind == 1) {  // Chinese paragraph
        for (int s = 0; s < 4; ++s) {
          int len = 8 + int(rng() % 24);
          for (int c = 0; c < len; ++c) tmill::tok::append_utf8(out, han[rng() % han.size()]);
          out += (rng() % 3 == 0) ? "，" : "。";
        }
        out += "\n\n";
      } else {  // code
        for (int l = 0; l < 6; ++l) {
          out += std::string(size_t(2 * (rng() % 4)), ' ');
          out += code_kw[rng() % (sizeof(code_kw) / sizeof(code_kw[0]))];
          out += " var_" + std::to_string(rng() % 1000) + " = fn" + std::to_string(rng() % 50) + "(x[" +
                 std::to_string(rng() % 64) + "], " + std::to_string(rng() % 100000) + ");\n";
        }
        out += "\n";
      }
    }
    return out;
  }();
  return text;
}

void BM_Encode(benchmark::State& state) {
  auto tok = tokenizer();
  const std::string& text = corpus();
  size_t n_tokens = 0;
  for (auto _ : state) {
    auto ids = tok->encode(text, false, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
  state.counters["tokens"] = double(n_tokens);
  state.counters["bytes/token"] = double(text.size()) / double(n_tokens);
}
BENCHMARK(BM_Encode)->Unit(benchmark::kMillisecond);

// Chunks of ~2 KB: a prompt-sized workload (per-call overhead included).
void BM_EncodeChunks(benchmark::State& state) {
  auto tok = tokenizer();
  const std::string& text = corpus();
  for (auto _ : state) {
    for (size_t off = 0; off < text.size(); off += 2048) {
      size_t end = std::min(text.size(), off + 2048);
      while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
      auto ids = tok->encode(std::string_view(text).substr(off, end - off), true, true);
      benchmark::DoNotOptimize(ids.data());
      off = end - 2048;
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(text.size()));
}
BENCHMARK(BM_EncodeChunks)->Unit(benchmark::kMillisecond);

void BM_StreamDecode(benchmark::State& state) {
  auto tok = tokenizer();
  const auto ids = tok->encode(corpus(), false, false);
  for (auto _ : state) {
    tmill::StreamingDetokenizer d(tok, {.stop = {"</answer>", "\nUser:"}});
    size_t n = 0;
    for (int32_t id : ids) n += d.push(id).size();
    n += d.finish().size();
    benchmark::DoNotOptimize(n);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(ids.size()));
}
BENCHMARK(BM_StreamDecode)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
