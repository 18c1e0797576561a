// tokenmill eval logits --model M (--tokens 1,2,3 | --text T): the raw next-token logits at every
// position of one token sequence, one JSON line per position. For comparing tokenmill's forward pass
// with another implementation on the same GGUF file (tests/e2e/llamacpp_interop.test.mjs does this
// against llama.cpp), or for debugging a model.
//   {"pos":0,"token":1,"logits":[...n_vocab floats...]}     (--top K: "top":[[id,logit],...] instead)
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "engine_options.h"
#include "eval_common.h"
#include "model/lora.h"
#include "tokenizer/tokenizer.h"

namespace {
using namespace tmill;

struct LogitsCli {
  std::string model, tokens, text, kv = "auto", lora;
  bool add_special = false;
  int top = 0;
  int threads = 0;
};

Result<std::vector<int32_t>> input_tokens(const LogitsCli& o, const Model& m) {
  if (o.tokens.empty() == o.text.empty()) return Error{"give exactly one of --tokens and --text"};
  std::vector<int32_t> ids;
  if (!o.tokens.empty()) {
    TM_ASSIGN_OR_RETURN(ids, cli::parse_token_ids(o.tokens, m.config().n_vocab));
  } else {
    TM_ASSIGN_OR_RETURN(auto tok, Tokenizer::load(m.path()));
    ids = tok->encode(o.text, o.add_special, /*parse_special=*/false);
  }
  if (ids.empty()) return Error{"no tokens to evaluate"};
  return ids;
}

int run_logits(const LogitsCli& o) {
  auto model = cli::load_eval_model(o.model.empty() ? cli::default_model_path() : o.model);
  if (!model.ok()) return log_error("{}", model.error()), 1;
  auto ids = input_tokens(o, **model);
  if (!ids.ok()) return log_error("{}", ids.error()), 1;
  ThreadPool pool(cli::threads_or_default(o.threads));
  cli::EvalStreamCli s;
  s.ctx = static_cast<int64_t>(ids->size());
  s.batch = std::min<int64_t>(s.ctx, 64);
  auto stream = cli::make_stream(*model, o.kv, s, &pool);
  if (!stream.ok()) return log_error("{}", stream.error()), 1;
  if (!o.lora.empty()) {  // FILE[:SCALE]
    cli::EngineCli flags;
    flags.lora = {o.lora};
    auto l = cli::lora_flags(flags);
    if (!l.ok()) return log_error("{}", l.error()), 2;
    auto ad = LoraAdapter::load((*l)[0].path, **model);
    if (!ad.ok()) return log_error("{}", ad.error()), 1;
    (*stream)->set_lora(*ad, (*l)[0].scale);
  }
  const int64_t n_vocab = (*stream)->n_vocab();
  std::vector<int32_t> order(static_cast<size_t>(n_vocab));
  Status st = (*stream)->feed(*ids, 0, [&](int64_t pos, const float* row) {
    nlohmann::ordered_json j{{"pos", pos}, {"token", (*ids)[static_cast<size_t>(pos)]}};
    if (o.top > 0) {
      const int64_t k = std::min<int64_t>(o.top, n_vocab);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      auto top = nlohmann::json::array();
      for (int64_t i = 0; i < k; ++i) top.push_back({order[static_cast<size_t>(i)], row[order[static_cast<size_t>(i)]]});
      j["top"] = std::move(top);
    } else {
      j["logits"] = std::vector<float>(row, row + n_vocab);
    }
    std::printf("%s\n", j.dump().c_str());
  });
  if (!st.ok()) return log_error("{}", st.error()), 1;
  return 0;
}

TM_COMMAND("eval logits", "raw next-token logits at every position of a token sequence (JSON lines)",
           [](CLI::App& app) -> cli::CommandRun {
             auto o = std::make_shared<LogitsCli>();
             app.add_option("--model", o->model, "GGUF model (default: the bundled stories260K)");
             app.add_option("--tokens", o->tokens, "comma-separated token ids, e.g. 1,403,407");
             app.add_option("--text", o->text, "text to tokenize instead (no BOS unless --add-special)");
             app.add_flag("--add-special", o->add_special, "--text: add BOS/EOS as the model's metadata says");
             app.add_option("--kv-cache-dtype", o->kv, std::string(kKvCacheDtypeNames))->capture_default_str();
             app.add_option("--top", o->top, "print only the K largest logits per position as [id, logit] pairs");
             app.add_option("--threads", o->threads, "compute threads (default: all cores)");
             app.add_option("--lora", o->lora, "LoRA adapter FILE[:SCALE] (llama.cpp's LoRA GGUF) applied to the sequence");
             return [o] { return run_logits(*o); };
           });

}  // namespace
