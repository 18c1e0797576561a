// tokenmill summarize FILE: a document longer than the context, summarized hierarchically on the
// engine (server/map_reduce.h, the same code as POST /v1/map_reduce): chunks at paragraph
// boundaries, the map prompt on every chunk as one continuous batch, reduce levels until one answer.
// The answer goes to stdout (or the result JSON with --json); progress and the per-stage breakdown
// go to stderr.
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "cli_common.h"
#include "core/log.h"
#include "engine_options.h"
#include "server/map_reduce.h"
#include "server/openai_request.h"
#include "tokenizer/tokenizer.h"

namespace {

struct SummarizeCli {
  tmill::cli::EngineCli engine;
  std::string file;
  tmill::server::MapReduceOptions mr;
  std::string chat = "auto";  // auto (the model file's template if it has one), on, off
  bool json_out = false, quiet = false, max_tokens_given = false;
  int64_t seed = -1;
};

int run(SummarizeCli& o) {
  using namespace tmill;
  std::ifstream in(o.file, std::ios::binary);
  if (!in) {
    log_error("cannot open {}", o.file);
    return 1;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string document = ss.str();
  if (o.chat != "auto" && o.chat != "on" && o.chat != "off") {
    log_error("--chat must be auto, on or off");
    return 2;
  }
  auto eng = cli::create_engine(o.engine);
  if (!eng.ok()) {
    log_error("{}", eng.error());
    return 1;
  }
  Engine& e = **eng;
  server::ServerContext ctx;
  ctx.tokenizer = e.tokenizer();
  ctx.max_model_len = e.max_model_len();
  ctx.n_vocab = e.model_info().n_vocab;
  auto tmpl = chat_template_for_model(ctx.tokenizer->chat_template().value_or(""), "model");
  if (tmpl.ok()) ctx.chat_template = std::make_shared<const ChatTemplate>(std::move(tmpl).value());
  const bool chat = o.chat == "on" || (o.chat == "auto" && server::map_reduce_default_chat(ctx));
  // Unless given: answers of an eighth of the context (at most 256), so two fit in a reduce.
  if (!o.max_tokens_given) o.mr.max_tokens = std::min(256, std::max(1, ctx.max_model_len / 8));
  if (o.seed >= 0) o.mr.seed = static_cast<uint64_t>(o.seed);

  server::BatchRunner run = [&](const std::vector<std::vector<int32_t>>& prompts,
                                const std::function<void(int32_t)>& done) -> Result<std::vector<server::StageOutput>> {
    std::vector<server::StageOutput> outs(prompts.size());
    std::vector<std::string> errors(prompts.size());
    int32_t finished = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      GenerateRequest r;
      r.prompt = prompts[i];
      r.max_tokens = o.mr.max_tokens;
      r.sampling.temperature = o.mr.temperature;
      if (o.mr.seed) r.sampling.seed = o.mr.seed + i;
      server::StageOutput* out = &outs[i];
      out->prompt_tokens = static_cast<int32_t>(r.prompt.size());
      std::string* err = &errors[i];
      auto id = e.submit(r, [out, err, &finished, &done](const RequestOutput& x) {
        out->text += x.text;
        out->completion_tokens = x.completion_tokens;
        if (x.finished) {
          if (x.finish_reason == FinishReason::Error) *err = x.stop_reason;
          done(++finished);
        }
      });
      if (!id.ok()) return Error{id.error()};
    }
    e.run_until_idle();  // foreground: the callbacks run on this thread
    for (const std::string& err : errors)
      if (!err.empty()) return Error{err};
    return outs;
  };
  server::MapReduceProgress progress = [&](const server::StageReport& s, int32_t done, int32_t total) {
    if (!o.quiet) std::fprintf(stderr, "\r%s level %d: %d/%d%s", s.stage.c_str(), s.level, done, total, done == total ? "\n" : "");
  };
  auto res = server::run_map_reduce(document, *ctx.tokenizer, ctx.max_model_len, o.mr,
                                    server::map_reduce_prompt_builder(ctx, chat), run, progress);
  if (!res.ok()) {
    log_error("{}", res.error());
    return 1;
  }
  if (o.json_out) {
    std::printf("%s\n", server::map_reduce_json(*res, e.model_info().name)
                            .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else {
    std::printf("%s\n", res->output.c_str());
  }
  if (!o.quiet) {
    std::fprintf(stderr, "document: %lld tokens in %d chunks\n", static_cast<long long>(res->document_tokens), res->chunks);
    for (const server::StageReport& s : res->stages)
      std::fprintf(stderr, "  %-6s level %d: %4d generations, %8lld prompt + %7lld completion tokens, %8.2f s\n",
                   s.stage.c_str(), s.level, s.inputs, static_cast<long long>(s.prompt_tokens),
                   static_cast<long long>(s.completion_tokens), s.seconds);
    std::fprintf(stderr, "total: %lld prompt + %lld completion tokens, %.2f s\n", static_cast<long long>(res->prompt_tokens),
                 static_cast<long long>(res->completion_tokens), res->seconds);
  }
  return 0;
}

TM_COMMAND("summarize", "summarize a document longer than the context (map-reduce over paragraph chunks)",
           [](CLI::App& app) -> tmill::cli::CommandRun {
             auto o = std::make_shared<SummarizeCli>();
             tmill::cli::add_engine_options(app, o->engine);
             app.add_option("file", o->file, "the document (text)")->required();
             app.add_option("-n,--max-tokens", o->mr.max_tokens,
                            "each answer's limit, map and reduce (default: an eighth of the context, at most 256)");
             app.add_option("--chunk-tokens", o->mr.chunk_tokens, "most document tokens per chunk (0: what the context allows)")
                 ->capture_default_str();
             app.add_option("--map-prompt", o->mr.map_prompt, "the map prompt; {chunk} is the chunk's text");
             app.add_option("--reduce-prompt", o->mr.reduce_prompt, "the reduce prompt; {summaries} is the answers joined");
             app.add_option("--chat", o->chat, "use the chat template: auto (when the model file has one), on, off")
                 ->capture_default_str();
             app.add_option("--temperature", o->mr.temperature, "0 = greedy")->capture_default_str();
             app.add_option("--seed", o->seed, "random seed (default: random)");
             app.add_flag("--json", o->json_out, "print the result JSON (as POST /v1/map_reduce answers)");
             app.add_flag("-q,--quiet", o->quiet, "no progress or breakdown on stderr");
             return [o, &app] {
               o->max_tokens_given = app.count("--max-tokens") > 0;
               return run(*o);
             };
           });

}  // namespace
