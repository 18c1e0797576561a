// Grammar compile time (GBNF text to Program, no vocabulary): the part of MaskBench's ttfm that does
// not depend on the tokenizer. Grammars: TM_BENCH_GBNF (a file, several separated by commas) or the
// built-in JSON Schemas below, translated first (translation is timed separately).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace {

// An object with one required and six optional properties, extra properties allowed (MaskBench
// Glaiveai2K---calculate_area): the common shape of function-call schemas.
const char* kToolSchema = R"({"properties": {"base": {"type": "number"}, "height": {"type": "number"},
 "length": {"type": "number"}, "radius": {"type": "number"}, "shape": {"enum": ["square", "rectangle",
 "circle", "triangle"], "type": "string"}, "side": {"type": "number"}, "width": {"type": "number"}},
 "required": ["shape"], "type": "object"})";
const char* kStrictSchema = R"({"type": "object", "additionalProperties": false, "required": ["name", "age", "tags"],
 "properties": {"name": {"type": "string", "maxLength": 40}, "age": {"type": "integer", "minimum": 0},
 "tags": {"type": "array", "items": {"type": "string"}}}})";

std::vector<std::string> grammars() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("TM_BENCH_GBNF")) {
    std::stringstream list(env);
    std::string path;
    while (std::getline(list, path, ',')) {
      std::ifstream f(path);
      std::stringstream ss;
      ss << f.rdbuf();
      out.push_back(ss.str());
    }
    return out;
  }
  for (const char* s : {kToolSchema, kStrictSchema}) out.push_back(*tmill::grammar::json_schema_text_to_gbnf(s));
  out.push_back(tmill::grammar::json_object_gbnf());
  return out;
}

void BM_Translate(benchmark::State& st) {
  const char* s = st.range(0) == 0 ? kToolSchema : kStrictSchema;
  for (auto _ : st) benchmark::DoNotOptimize(tmill::grammar::json_schema_text_to_gbnf(s));
}
BENCHMARK(BM_Translate)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_Compile(benchmark::State& st) {
  static const auto gs = grammars();
  static const auto vocab = tmill::grammar::Vocabulary::create({});
  const auto idx = static_cast<size_t>(st.range(0));
  if (idx >= gs.size()) {
    st.SkipWithError("no such grammar");
    return;
  }
  for (auto _ : st) {
    auto g = tmill::grammar::compile_gbnf(gs[idx], vocab);
    if (!g.ok()) st.SkipWithError(g.error().c_str());
    benchmark::DoNotOptimize(g);
  }
}
BENCHMARK(BM_Compile)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

// The phases of BM_Compile: GBNF text to syntax tree, syntax tree to automata.
void BM_Parse(benchmark::State& st) {
  static const auto gs = grammars();
  const auto idx = static_cast<size_t>(st.range(0));
  if (idx >= gs.size()) {
    st.SkipWithError("no such grammar");
    return;
  }
  for (auto _ : st) benchmark::DoNotOptimize(tmill::grammar::gbnf::parse(gs[idx]));
}
BENCHMARK(BM_Parse)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

void BM_Program(benchmark::State& st) {
  static const auto gs = grammars();
  const auto idx = static_cast<size_t>(st.range(0));
  if (idx >= gs.size()) {
    st.SkipWithError("no such grammar");
    return;
  }
  auto syn = tmill::grammar::gbnf::parse(gs[idx]);
  for (auto _ : st) benchmark::DoNotOptimize(tmill::grammar::compile_program(*syn, "root"));
}
BENCHMARK(BM_Program)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
