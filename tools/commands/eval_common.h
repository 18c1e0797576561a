// Pieces shared by the `eval perplexity|compare|imatrix` commands: loading a model with its
// LogitStream, the text's chunks, progress lines.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "eval/logit_stream.h"
#include "eval/perplexity.h"
#include "model/model.h"

namespace tmill::cli {

struct EvalStreamCli {
  int64_t ctx = 512;
  int64_t batch = 128;
  int64_t chunks = 0;
  int threads = 0;
  bool json = false;
};

inline void add_eval_stream_options(CLI::App& app, EvalStreamCli& o) {
  app.add_option("--ctx", o.ctx, "tokens per chunk (the second half of each chunk is scored)")->capture_default_str();
  app.add_option("--batch", o.batch, "tokens per forward call (logits memory: batch x vocabulary floats)")
      ->capture_default_str();
  app.add_option("--chunks", o.chunks, "evaluate at most this many chunks (0: all)")->capture_default_str();
  app.add_option("--threads", o.threads, "compute threads (default: all cores)");
}

inline Result<std::shared_ptr<Model>> load_eval_model(const std::string& path) {
  auto m = Model::load(path);
  if (!m.ok()) return Error{fmt::format("{}: {}", path, m.error())};
  const auto& c = (*m)->config();
  log_info("model {} ({}, {} layers, vocabulary {}, {}): loaded", path, c.arch.name, c.n_layer, c.n_vocab,
           dtype_name((*m)->main_weight_type()));
  return m;
}

inline Result<std::unique_ptr<eval::LogitStream>> make_stream(std::shared_ptr<const Model> m, const std::string& kv,
                                                              const EvalStreamCli& o, ThreadPool* pool) {
  TM_ASSIGN_OR_RETURN(DType dt, eval::parse_kv_dtype(kv, *m));
  eval::LogitStreamOptions so;
  so.max_ctx = o.ctx;
  so.batch = o.batch;
  so.kv_dtype = dt;
  return eval::LogitStream::create(std::move(m), so, pool);
}

// Tokenizes the text and cuts it into chunks; errors when no full chunk fits. original: the chunks'
// tokens before a chunk's first token is replaced by BOS (what a KL-divergence base file stores).
inline Result<std::vector<std::vector<int32_t>>> eval_chunks(const Model& m, const std::string& text_path,
                                                             const EvalStreamCli& o,
                                                             std::vector<int32_t>* original = nullptr) {
  if (o.ctx < 2) return Error{"--ctx must be at least 2"};
  if (o.batch < 1) return Error{"--batch must be at least 1"};
  if (o.ctx > m.config().n_ctx_train)
    log_warn("--ctx {} is beyond the model's trained context of {} tokens", o.ctx, m.config().n_ctx_train);
  TM_ASSIGN_OR_RETURN(eval::EvalText t, eval::tokenize_text_file(m, text_path));
  auto chunks = eval::make_chunks(t.tokens, o.ctx, t.bos, o.chunks);
  if (chunks.empty())
    return Error{fmt::format("{} has {} tokens, fewer than one chunk of --ctx {}: use a longer text or a smaller --ctx",
                             text_path, t.tokens.size(), o.ctx)};
  if (original) original->assign(t.tokens.begin(), t.tokens.begin() + static_cast<int64_t>(chunks.size()) * o.ctx);
  log_info("{}: {} tokens -> {} chunk(s) of {} ({} scored tokens each)", text_path, t.tokens.size(), chunks.size(), o.ctx,
           o.ctx - 1 - eval::first_scored(o.ctx));
  return chunks;
}

inline eval::ChunkProgress chunk_progress(const char* what) {
  return [what](int64_t done, int64_t total, double ppl) {
    std::fprintf(stderr, "%s: chunk %lld/%lld, running PPL %.4f\n", what, static_cast<long long>(done),
                 static_cast<long long>(total), ppl);
  };
}

inline int threads_or_default(int t) { return t > 0 ? t : default_thread_count(); }

}  // namespace tmill::cli
