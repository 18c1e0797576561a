// What the engine tells about itself: the loaded model (ModelInfo), where memory went (MemoryPlan),
// counters (EngineStats, a thread-safe snapshot) and per-step / per-request hooks for metrics
// (EngineObserver). Plain data, header-only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/request.h"

namespace tmill {

// Sampling defaults a model file recommends (llama.cpp's `general.sampling.*` GGUF keys, HF's
// generation_config.json): what a request that omits the field gets (vLLM's --generation-config auto).
struct GenerationDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  std::optional<int32_t> max_tokens;  // generation_config.json's max_new_tokens
  bool empty() const {
    return !temperature && !top_p && !min_p && !repetition_penalty && !top_k && !max_tokens;
  }
};

struct ModelInfo {
  std::string name;          // general.name, else the file name without ".gguf"
  std::string architecture;  // general.architecture ("llama", "qwen2", ...)
  std::string path;          // the model file
  int32_t n_vocab = 0;       // token ids valid for both the model and its tokenizer: [0, n_vocab)
  int32_t max_model_len = 0; // context length served (the memory plan's)
  int64_t n_ctx_train = 0;   // trained context length
  int64_t n_layer = 0;
  int64_t n_embd = 0;
  int64_t n_params = 0;
  std::string weight_type;   // the dtype most weights are stored in ("Q8_0", "F16", ...)
  GenerationDefaults generation_defaults;  // from the file's general.sampling.* keys
  // Embedding models (Engine::embed): the pooling the file declares ("mean", "cls", "last", "rank");
  // empty for a generation model. Such a model does not generate (submit refuses every request).
  std::string pooling;
  int64_t embedding_dim = 0;  // floats per embedding, or scores per input for "rank" (a reranker)
  // Rerankers: the outputs are already probabilities (softmax; Qwen3-Reranker), so the relevance
  // score is output[0] as is; else output[0] is a logit and the score its sigmoid.
  bool rank_softmax = false;
  // Rerankers: the pair prompt with {query} and {document} (tokenizer.chat_template.rerank, as
  // llama-server formats rerank inputs); empty: BOS query EOS SEP document EOS.
  std::string rerank_template;
  bool is_embedding() const { return !pooling.empty(); }
};

struct MemoryPlan {
  uint64_t weight_bytes = 0;
  uint64_t weight_mapped_bytes = 0;  // of weight_bytes: read in place from the file mapping (0: unknown)
  uint64_t kv_bytes = 0;
  int64_t num_blocks = 0;
  int64_t kv_tokens = 0;
  int32_t max_model_len = 0;
  int64_t max_full_sequences = 0;  // concurrent sequences of max_model_len that fit
  // Recurrent models (Mamba-2 mixers): sequence-state slots (of kv_bytes: state_bytes), the most
  // sequences that run at once; 0 for other models.
  int32_t num_state_slots = 0;
  uint64_t state_bytes = 0;
  std::string kv_dtype;
  std::string note;                // e.g. why max_model_len was lowered
  // Where the weights and the KV cache live: "cpu" (host memory), "cuda" (the GPU named device_name,
  // --gpu-memory-utilization's budget of its device_total_bytes), "cuda-emu" (the emulated device's
  // memory, in host memory, planned as on a GPU) or "gpu-oracle" (host memory).
  std::string device = "cpu";
  std::string device_name;
  uint64_t device_total_bytes = 0, device_budget_bytes = 0;
};

// The GPU's state now (--device cuda; NVML): busy share of the last sample period, memory in use.
struct DeviceUsage {
  std::string name;
  double utilization = 0.0;  // 0..1
  uint64_t memory_used_bytes = 0, memory_total_bytes = 0;
};

// The paged KV cache's figures.
struct KvCacheStats {
  int32_t num_blocks = 0;            // usable blocks (null block excluded)
  int32_t num_free_blocks = 0;       // free queue, including evictable cached blocks
  int32_t num_cached_blocks = 0;     // blocks holding a prefix-cache key (in use or evictable)
  double usage = 0.0;                // fraction of usable blocks held by live requests
  int64_t prefix_query_tokens = 0;   // tokens looked up (counted when the allocation succeeds)
  int64_t prefix_hit_tokens = 0;     // tokens served from the prefix cache
  int64_t allocated_slots = 0;       // in-use blocks * block_size
  int64_t used_slots = 0;            // of those, slots reserved for a token (waste = difference)
  uint64_t num_evictions = 0;        // cached blocks whose key was dropped to reuse the block
};

struct EngineStats {
  int32_t num_running = 0;           // sequences holding KV blocks
  int32_t num_waiting = 0;           // sequences queued (preempted ones included)
  uint64_t num_preemptions = 0;      // total
  uint64_t num_context_shifts = 0;   // total (EngineConfig::context_shift)
  KvCacheStats kv;
  uint64_t prompt_tokens_total = 0;  // prompt tokens computed (prefix-cache hits excluded)
  uint64_t generation_tokens_total = 0;
  uint64_t requests_finished = 0;
  uint64_t steps = 0;
  uint64_t async_scheduled_steps = 0;  // steps whose outputs were processed while the next step ran on the device
  uint64_t structured_requests_total = 0;       // submitted with an output constraint (JSON, regex, choice, grammar)
  uint64_t grammar_compile_failures_total = 0;  // constraints refused at the front door (Engine::check)
  double grammar_mask_seconds_total = 0;        // token masks computed and applied (summed over pool threads)
  // Speculative decoding, with vLLM's meanings: drafts = sequences verified with >= 1 draft token,
  // acceptance rate = accepted / draft tokens; per position: accepted drafts at index i of a draft.
  uint64_t spec_num_drafts = 0;
  uint64_t spec_num_draft_tokens = 0;
  uint64_t spec_num_accepted_tokens = 0;
  std::vector<uint64_t> spec_accepted_per_pos;  // num_speculative_tokens entries when speculation is on
};

struct StepStats {
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;
  int32_t num_prefill_tokens = 0;
  int32_t num_decode_tokens = 0;  // includes draft tokens scored for verification
  int32_t num_draft_tokens = 0;   // speculative drafts scored this step
  double seconds = 0;
};

// Per-request timings (engine clock), reported once when a request (all its choices) ends.
struct RequestTimings {
  uint64_t request_id = 0;
  Clock::time_point arrival, first_scheduled, first_token, last_token, finished;
  std::vector<double> itl_s;  // gaps between consecutive tokens of choice 0
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;  // all choices
  int32_t num_preemptions = 0;
  FinishReason finish_reason = FinishReason::None;
  bool scheduled = false;
  bool produced_token = false;
};

// Hooks for metrics (called on the engine thread; must be cheap).
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_step(const StepStats&) {}
  // Once per request, when it is first scheduled (it leaves the waiting queue); timings has
  // request_id, arrival, first_scheduled and prompt_tokens set.
  virtual void on_request_scheduled(const RequestTimings&) {}
  virtual void on_request_done(const RequestTimings&) {}
};

}  // namespace tmill
