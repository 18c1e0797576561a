// The engine's public API: load a model, submit requests, receive their outputs, abort them, read
// counters. Everything a front end (the HTTP server, `tokenmill generate`, `bench engine`, `eval
// tasks`) needs comes through here and the plain types of src/api/, which this header re-exports;
// nothing below the engine (scheduler, sampler, KV cache, model, kernels) is visible.
//
//   auto engine = Engine::create(config);          // loads the model, plans memory
//   engine->start();                               // a thread runs steps while there is work
//   auto id = engine->submit(request, callback);   // callback gets RequestOutput on the engine thread
//   engine->abort(*id);
//
// Inside, one step is: drain the inbox -> schedule -> build the batch -> forward -> sample ->
// update -> emit outputs (src/engine/step.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/config.h"
#include "api/lora.h"
#include "api/request.h"
#include "api/sampling.h"
#include "api/stats.h"
#include "core/result.h"

namespace tmill {

class Tokenizer;

// The limits every request is checked against: once, here, for every front end.
struct RequestLimits {
  int32_t n_vocab = 0;        // token ids (prompt, stop_token_ids, logit_bias) must be below this
  int32_t max_model_len = 0;  // prompt + max_tokens must fit
  bool priority_scheduling = false;  // a non-zero priority needs SchedulingPolicy::Priority
  bool context_shift = false;  // EngineConfig::context_shift: max_tokens may run past the context
};
// Null when the request is acceptable; otherwise what is wrong, naming the field.
std::optional<RequestProblem> check_request(const GenerateRequest& request, const RequestLimits& limits);

// "2GiB", "512MiB", "1000000" (bytes) or "30%" (of available memory, /proc/meminfo MemAvailable).
Result<uint64_t> parse_kv_cache_memory(std::string_view s);

// --speculative-config's JSON (vLLM's keys: method, model, num_speculative_tokens,
// prompt_lookup_max, prompt_lookup_min, disable_by_batch_size; tokenmill's: adaptive,
// replay_error_rate) with vLLM's defaults filled in; errors name the key. Engine::create checks the
// rest (method "mtp" unsupported, a draft model's tokenizer).
Result<SpeculativeConfig> parse_speculative_config(std::string_view json);

class Engine {
 public:
  // Loads the model and tokenizer, prepares the weights and plans the KV cache. Errors: an
  // unreadable or unsupported model, a configuration that cannot work (e.g. max_model_len larger
  // than the KV cache holds).
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  // EngineConfig::device alone, as create checks it first: OK for cpu and auto; cuda and anything
  // else an error that says why (so a server can refuse it before it listens).
  static Status check_device(const std::string& device);
  // True for the devices that run the GPU forward: cuda, cuda-emu, gpu-oracle (their memory plan is
  // vLLM's --gpu-memory-utilization of the device's memory).
  static bool is_gpu_device(const std::string& device);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelInfo& model_info() const;
  std::shared_ptr<const Tokenizer> tokenizer() const;
  const MemoryPlan& memory_plan() const;
  // --device cuda: the GPU's utilization and memory in use now (NVML, loaded from the driver at run
  // time); an error on the CPU or where NVML is missing. A few microseconds: for metrics scrapes.
  Result<DeviceUsage> device_usage() const;
  const EngineConfig& config() const;
  int32_t max_model_len() const;
  RequestLimits limits() const;

  // check_request() against this engine's limits; a request naming an adapter that is not loaded
  // gets Kind::NotFound with field "model" (the OpenAI API addresses adapters as models).
  std::optional<RequestProblem> check(const GenerateRequest& request) const;
  // Checks and queues a request (thread-safe); the error is check()'s message.
  Result<uint64_t> submit(GenerateRequest request, OutputCallback callback);
  // Aborts a request and frees its KV blocks at the next step boundary (thread-safe, idempotent).
  void abort(uint64_t request_id);

  // LoRA adapters (llama.cpp's LoRA GGUF), thread-safe at any time, also while the engine thread
  // runs. A request names one in GenerateRequest::lora; a batch mixes requests of different
  // adapters and none; prefix-cache entries are keyed by adapter and scale. A request already
  // submitted keeps its adapter until it finishes, even if the adapter is unloaded meanwhile.
  // load_lora errors: an empty or taken name, max_loras adapters loaded, an unreadable file, an
  // adapter that does not fit this model (architecture, tensor names or shapes; the message names them).
  Result<LoraInfo> load_lora(const std::string& name, const std::string& path);
  // Error: no adapter of that name is loaded.
  Status unload_lora(const std::string& name);
  std::vector<LoraInfo> loras() const;  // in load order

  // Embedding models (model_info().is_embedding(): an encoder such as bert / nomic-bert, or a decoder
  // GGUF declaring <arch>.pooling_type): one pooled output per input, raw (not normalized): the
  // embedding, or a reranker's scores (pooling "rank", model_info().embedding_dim each). Inputs of
  // all callers are batched together on the engine's embedding thread (up to max_num_batched_tokens
  // tokens per forward). Thread-safe; blocks until done. Errors (the caller's, naming the input's
  // index): not an embedding model, an empty input, one longer than max_model_len, a token id out of
  // the vocabulary.
  Result<std::vector<std::vector<float>>> embed(const std::vector<std::vector<int32_t>>& inputs);

  // Background mode: a thread runs steps while there is work.
  void start();
  void stop();  // finishes the current step, aborts nothing, joins the thread
  // Foreground mode (when not started): one step; false when there was nothing to do.
  bool step();
  void run_until_idle();

  void set_observer(EngineObserver* observer);  // before start()
  EngineStats stats() const;                    // thread-safe snapshot
  bool idle() const;

  struct Impl;

 private:
  Engine();
  std::unique_ptr<Impl> impl_;
};

}  // namespace tmill
