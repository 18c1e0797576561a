// The engine of an embedding model (model/embedder.h): no scheduler, KV cache or sampler. Callers of
// Engine::embed queue their inputs; one thread takes every queued input it can, packs whole
// sequences into forwards of at most max_num_batched_tokens tokens (a sequence longer than that
// runs alone), and hands each caller its pooled outputs. Batching callers together is what makes
// many small requests fast, as continuous batching does for generation.
#include <algorithm>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "core/log.h"
#include "engine/embed_worker.h"
#include "engine/engine_impl.h"
#include "model/embedder.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace tmill {

Status create_embedding_engine(Engine::Impl& im, std::shared_ptr<const GgufFile> file) {
  const EngineConfig& config = im.config;
  if (!config.loras.empty()) return Error{"LoRA adapters need a generation model (this is an embedding model)"};
  auto tok = Tokenizer::from_gguf(*file);
  if (!tok.ok()) return Error{fmt::format("tokenizer: {}", tok.error())};
  im.tokenizer = *tok;
  const int threads = config.threads > 0 ? config.threads : default_thread_count();
  im.pool = std::make_unique<ThreadPool>(threads);
  auto w = std::make_unique<EmbedWorker>();
  w->batch_tokens = std::max<int64_t>(1, config.max_num_batched_tokens);
  std::optional<Pooling> pooling;
  if (!config.pooling.empty()) {
    pooling = pooling_from_name(config.pooling);
    if (!pooling || *pooling == Pooling::None)
      return Error{fmt::format("pooling '{}': one of mean, cls, last, rank", config.pooling)};
  }
  EmbedderDevice device;  // a decoder embedder's forward on the GPU backend of --device
  if (Engine::is_gpu_device(config.device)) {
    device.ops = &gpu_ops_for(config.device);
    device.memory_utilization = config.gpu_memory_utilization;
    device.max_seq_tokens = config.max_model_len;
  }
  auto created = Embedder::create(file, im.pool.get(), w->batch_tokens, pooling, device);
  if (!created.ok()) {
    if (device.ops) return Error{fmt::format("--device {}: {}", config.device, created.error())};
    return created.error_value();
  }
  w->embedder = std::move(created).value();
  const EmbedderInfo& ei = w->embedder->info();
  ModelInfo& info = im.info;
  std::string stem = std::filesystem::path(config.model_path).filename().string();
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
  info.name = file->get_string("general.name").value_or(stem);
  info.architecture = ei.arch;
  info.path = config.model_path;
  info.n_vocab = static_cast<int32_t>(std::min<int64_t>(ei.n_vocab, im.tokenizer->n_vocab()));
  info.n_ctx_train = ei.n_ctx_train;
  info.max_model_len = static_cast<int32_t>(
      config.max_model_len > 0 ? std::min<int64_t>(config.max_model_len, ei.n_ctx_train) : ei.n_ctx_train);
  info.n_layer = file->get_int(ei.arch + ".block_count").value_or(0);
  {  // parameters and the type holding most bytes, over the file's tensors (the heads included)
    std::map<DType, uint64_t> bytes;
    for (const GgufTensorInfo& t : file->tensors()) {
      info.n_params += t.n_elements;
      bytes[t.type] += t.nbytes;
    }
    info.weight_type = std::string(dtype_name(type_with_most_bytes(bytes)));
  }
  info.n_embd = ei.n_embd;
  info.pooling = pooling_name(ei.pooling);
  info.embedding_dim = ei.out_dim;
  info.rank_softmax = ei.rank_softmax;
  if (ei.pooling == Pooling::Rank) {
    // the file's pair prompt; a qwen3 generation model made a reranker gets Qwen3-Reranker's
    if (const auto& t = im.tokenizer->data().rerank_template) info.rerank_template = *t;
    else if (ei.causal) info.rerank_template = tok::kQwen3RerankTemplate;
  }
  im.plan.weight_bytes = w->embedder->weight_bytes();
  im.plan.max_model_len = info.max_model_len;
  im.plan.note = "embedding model: no KV cache";
  if (device.ops) {
    im.plan.device = config.device;
    if (auto gpus = device.ops->devices(); gpus.ok() && !gpus->empty()) {  // (/metrics' GPU gauges)
      im.plan.device_name = gpus->front().name;
      im.plan.device_total_bytes = gpus->front().total_bytes;
      im.plan.device_budget_bytes =
          static_cast<uint64_t>(static_cast<double>(gpus->front().total_bytes) * config.gpu_memory_utilization);
    }
    im.plan.note = "embedding model on " + w->embedder->placement();
    log_info("{}", im.plan.note);
  }
  EmbedWorker* raw = w.get();
  w->thread = std::thread([raw] { raw->loop(); });
  im.embed = std::move(w);
  return ok_status();
}

void stop_embedding(Engine::Impl& im) {
  if (!im.embed) return;
  {
    std::lock_guard<std::mutex> lock(im.embed->mu);
    im.embed->stopping = true;
  }
  im.embed->cv.notify_all();
  if (im.embed->thread.joinable()) im.embed->thread.join();
  std::lock_guard<std::mutex> lock(im.embed->mu);
  for (EmbedWorker::Job* j : im.embed->queue) {
    j->failed = true;
    j->finished.set_value();
  }
  im.embed->queue.clear();
}

Result<std::vector<std::vector<float>>> Engine::embed(const std::vector<std::vector<int32_t>>& inputs) {
  Impl& im = *impl_;
  if (!im.embed)
    return Error{fmt::format("The model '{}' is not an embedding model (it declares no pooling type)", im.info.name)};
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& in = inputs[i];
    if (in.empty()) return Error{fmt::format("input[{}] is empty", i)};
    if (static_cast<int64_t>(in.size()) > im.info.max_model_len)
      return Error{fmt::format("input[{}] has {} tokens, more than this model's maximum context length of {} tokens", i,
                               in.size(), im.info.max_model_len)};
    for (int32_t t : in)
      if (t < 0 || t >= im.info.n_vocab)
        return Error{fmt::format("input[{}] has token id {} outside the vocabulary [0, {})", i, t, im.info.n_vocab)};
  }
  if (inputs.empty()) return std::vector<std::vector<float>>{};
  EmbedWorker::Job job;
  job.inputs = &inputs;
  job.out.resize(inputs.size());
  auto done = job.finished.get_future();
  {
    std::lock_guard<std::mutex> lock(im.embed->mu);
    if (im.embed->stopping) return Error{"the engine is stopping"};
    im.embed->queue.push_back(&job);
  }
  im.embed->cv.notify_one();
  done.wait();
  if (job.failed) return Error{"the engine stopped, or its forward failed (see the log)"};
  return std::move(job.out);
}

}  // namespace tmill
