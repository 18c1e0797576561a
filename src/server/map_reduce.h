// Long documents, hierarchically (POST /v1/map_reduce, `tokenmill summarize`; docs/server.md,
// "Map-reduce over long documents"): the document is cut at paragraph boundaries into chunks that fit
// the context with the map prompt and its answer, the map prompt runs on every chunk as one
// continuous batch, then the answers are grouped into inputs that fit and the reduce prompt runs on
// every group (one batch per level) until one answer is left.
//
// The planning and the levels are here, the generation is a callback (BatchRunner), so unit tests
// run it on a fake model, the server on its engine through Generation, the CLI on an Engine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "server/api_error.h"  // json

namespace tmill {
class Tokenizer;
}

namespace tmill::server {

struct ServerContext;

struct MapReduceOptions {
  // "{chunk}" is replaced by the chunk's text, "{summaries}" by the answers joined with blank lines.
  std::string map_prompt = "Summarize this part of a document in a few sentences:\n\n{chunk}";
  std::string reduce_prompt = "Combine these summaries of consecutive parts of a document into one summary:\n\n{summaries}";
  int32_t max_tokens = 256;   // each answer's limit (map and reduce)
  int32_t chunk_tokens = 0;   // > 0: most document tokens per chunk; 0: what the context allows
  float temperature = 0;
  uint64_t seed = 0;
};

// One generation of a stage: its answer and usage.
struct StageOutput {
  std::string text;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};

struct StageReport {
  std::string stage;  // "map" or "reduce"
  int32_t level = 0;  // 0: map; reduce levels count from 1
  int32_t inputs = 0;   // generations in this stage
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double seconds = 0;
};

struct MapReduceResult {
  std::string output;
  int32_t chunks = 0;
  int64_t document_tokens = 0;
  std::vector<StageReport> stages;
  int64_t prompt_tokens = 0;      // all stages
  int64_t completion_tokens = 0;
  double seconds = 0;
};

// Renders a prompt's user text (chat template or plain) to the token ids the model sees.
using PromptBuilder = std::function<std::vector<int32_t>(const std::string& text)>;
// Runs every prompt (token ids) to completion with max_tokens each, as one batch; answers in order.
// `done(n)` is called as generations finish (n so far), for progress.
using BatchRunner = std::function<Result<std::vector<StageOutput>>(const std::vector<std::vector<int32_t>>& prompts,
                                                                   const std::function<void(int32_t)>& done)>;
// Progress: a stage's generations done out of total (called from the runner's thread).
using MapReduceProgress = std::function<void(const StageReport& stage, int32_t done, int32_t total)>;

// The prompts of `ctx`'s model: its chat template around one user message (chat), or the text
// itself after the BOS (a base model). routes_map_reduce.cpp.
PromptBuilder map_reduce_prompt_builder(const ServerContext& ctx, bool chat);
// Whether map-reduce prompts use the chat template by default: when the model file has its own.
bool map_reduce_default_chat(const ServerContext& ctx);

// Cuts text into pieces of at most max_tokens tokens each: whole paragraphs (blank-line separated)
// packed greedily; a paragraph too long alone is cut at line ends, then sentence ends, then tokens.
// Pieces keep their text exactly (joined, they are the document with paragraph breaks normalized
// to one blank line).
std::vector<std::string> chunk_document(const std::string& text, const Tokenizer& tok, int32_t max_tokens);

// Errors: an empty document, a prompt without its placeholder, a context too small for a chunk and
// an answer (or for two answers in a reduce), a runner failure.
Result<MapReduceResult> run_map_reduce(const std::string& document, const Tokenizer& tok, int32_t max_model_len,
                                       const MapReduceOptions& opts, const PromptBuilder& build,
                                       const BatchRunner& run, const MapReduceProgress& progress = {});

// The result as POST /v1/map_reduce answers it (and `tokenmill summarize --json` prints it):
// {"id","object":"map_reduce","created","model","output","chunks","document_tokens",
//  "stages":[{"stage","level","inputs","prompt_tokens","completion_tokens","seconds"}],
//  "usage":{"prompt_tokens","completion_tokens","total_tokens"},"seconds"}
json map_reduce_json(const MapReduceResult& r, const std::string& model);

}  // namespace tmill::server
