// tokenmill embed --model FILE (--text T ... | --tokens 1,2,3 ...) [--normalize]
//   an embedding model's pooled output per input (Engine::embed, batched), one JSON line each:
//   {"index": i, "tokens": N, "embedding": [...]}; a reranker (pooling rank) prints its raw scores.
//   --text is tokenized with the vocabulary's special tokens ([CLS] ... [SEP] for BERT).
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_common.h"
#include "core/log.h"
#include "engine_options.h"
#include "tokenizer/tokenizer.h"

namespace {

struct EmbedCli {
  tmill::cli::EngineCli engine;
  std::vector<std::string> texts, tokens;
  bool normalize = false;
};

TM_COMMAND("embed", "print an embedding model's embeddings (or a reranker's scores) as JSON lines",
           [](CLI::App& app) -> tmill::cli::CommandRun {
  auto o = std::make_shared<EmbedCli>();
  tmill::cli::add_engine_options(app, o->engine);
  app.add_option("--text,-t", o->texts, "a text to embed (repeatable)");
  app.add_option("--tokens", o->tokens, "token ids to embed, comma-separated (repeatable)");
  app.add_flag("--normalize", o->normalize, "L2-normalize each embedding (as /v1/embeddings returns them)");
  return [o] {
    using namespace tmill;
    if (o->texts.empty() && o->tokens.empty()) {
      log_error("embed needs --text or --tokens");
      return 2;
    }
    auto engine = cli::create_engine(o->engine);
    if (!engine.ok()) {
      log_error("{}", engine.error());
      return 1;
    }
    std::vector<std::vector<int32_t>> inputs;
    for (const std::string& t : o->texts) inputs.push_back((*engine)->tokenizer()->encode(t, true, true));
    for (const std::string& list : o->tokens) {
      std::vector<int32_t> ids;
      size_t pos = 0;
      while (pos < list.size()) {
        size_t end = list.find(',', pos);
        if (end == std::string::npos) end = list.size();
        try {
          ids.push_back(static_cast<int32_t>(std::stol(list.substr(pos, end - pos))));
        } catch (...) {
          log_error("--tokens '{}': not a comma-separated list of integers", list);
          return 2;
        }
        pos = end + 1;
      }
      inputs.push_back(std::move(ids));
    }
    auto out = (*engine)->embed(inputs);
    if (!out.ok()) {
      log_error("{}", out.error());
      return 1;
    }
    for (size_t i = 0; i < out->size(); ++i) {
      std::vector<float>& v = (*out)[i];
      if (o->normalize) {
        double n = 0;
        for (float x : v) n += double(x) * x;
        n = std::sqrt(n);
        if (n > 0)
          for (float& x : v) x = static_cast<float>(x / n);
      }
      std::string line = fmt::format("{{\"index\": {}, \"tokens\": {}, \"embedding\": [", i, inputs[i].size());
      for (size_t k = 0; k < v.size(); ++k) line += fmt::format("{}{:.9g}", k ? ", " : "", v[k]);
      line += "]}\n";
      std::fputs(line.c_str(), stdout);
    }
    return 0;
  };
});

}  // namespace
