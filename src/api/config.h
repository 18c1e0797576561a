// The engine's configuration: what `tokenmill serve`, `generate`, `bench engine` and `eval` set from
// their flags. The defaults written here are the only ones: the CLI shows them, the scheduler's own
// config starts from them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/lora.h"

namespace tmill {

enum class SchedulingPolicy : uint8_t { Fcfs, Priority };

// Speculative decoding (vLLM's --speculative-config keys; docs/speculative.md). A proposer drafts up
// to num_speculative_tokens tokens per decoding sequence; the target model scores them in the same
// forward as the other sequences' work and keeps the longest prefix its own sampling agrees with
// (greedy: token-identical output; temperature > 0: rejection sampling, the same distribution).
struct SpeculativeConfig {
  // "" (off), "ngram" (prompt lookup), "draft_model" (a small GGUF with the same tokenizer), or the
  // test proposer "replay" (replays GenerateRequest::debug_replay_tokens, each draft token wrong with
  // probability replay_error_rate). "mtp" (and EAGLE heads) is not supported: Engine::create refuses it.
  std::string method;
  std::string model;                   // draft_model: the draft GGUF
  int32_t num_speculative_tokens = 0;  // k: most draft tokens per sequence and step (>= 1 when on)
  int32_t prompt_lookup_max = 0;       // ngram: longest suffix n-gram matched (0: 4, or min when larger)
  int32_t prompt_lookup_min = 0;       // ngram: shortest (0: 1)
  double replay_error_rate = 0;        // replay: probability that a draft token is wrong
  // Adaptive k: each sequence's k follows its recent acceptance; a sequence whose drafts do not pay
  // stops drafting for a while. Off: always num_speculative_tokens (when the proposer finds them).
  bool adaptive = true;
  // No drafts in a step where more than this many sequences decode (vLLM's disable_by_batch_size):
  // a batch that large already keeps the cores busy. 0: never.
  int32_t disable_by_batch_size = 8;
  bool enabled() const { return !method.empty(); }
};

namespace defaults {
inline constexpr int32_t kBlockSize = 16;               // tokens per KV block
inline constexpr int32_t kMaxNumSeqs = 64;              // sequences per step
inline constexpr int32_t kMaxNumBatchedTokens = 1024;   // token budget per step
inline constexpr int32_t kMaxLoras = 8;                 // LoRA adapters loaded at once
}  // namespace defaults

struct EngineConfig {
  std::string model_path;               // GGUF model file
  int threads = 0;                      // 0: all cores this process may use
  // cpu or auto (the CPU); cuda: the GPU forward (model/gpu_forward.h) on the first CUDA device, for the
  // families it runs (others are refused at create, saying what they lack); cuda-emu: the same with the
  // CUDA kernels run by the CPU's emulator of CUDA; gpu-oracle: that same GPU engine path on the host
  // oracle backend (both for tests and debugging; slow, no GPU needed).
  std::string device = "cpu";
  // --device cuda: vLLM's --gpu-memory-utilization, the share of the GPU's memory for weights,
  // activations and KV cache (the KV cache gets what is left, kv_cache_bytes then ignored).
  double gpu_memory_utilization = 0.9;
  // GPU devices: vLLM's --enforce-eager, decode steps without CUDA graphs (by default a step of up to
  // max_num_seqs single-token sequences replays the graph of its batch bucket: one launch per step).
  bool enforce_eager = false;
  // GPU devices: vLLM's --async-scheduling, on by default here: a step's outputs (text, stop strings,
  // callbacks, statistics) are processed while the next step runs on the device, so the device does
  // not wait for the host's share of each step. A choice ended by a stop string, a grammar or an
  // abort then has one more token computed and discarded; outputs are unchanged. No effect on the CPU.
  bool async_scheduling = true;
  uint64_t kv_cache_bytes = 0;          // 0: automatic (see the memory plan)
  // > 0: weights (as prepared) + KV cache may take at most this: the automatic KV cache is capped at
  // it minus the weights; weights, or weights plus an explicit KV size, above it are a load error.
  uint64_t memory_limit_bytes = 0;
  int64_t kv_cache_tokens = 0;          // > 0: a cache of this many tokens (whole blocks), not bytes
  std::string kv_cache_dtype = "auto";  // auto (f32 for f32 models, else f16), f32, f16, bf16, int8, q4_0, fp8 (= fp8_e4m3), fp8_e5m2
  int32_t block_size = defaults::kBlockSize;
  int32_t max_num_seqs = defaults::kMaxNumSeqs;
  int32_t max_num_batched_tokens = defaults::kMaxNumBatchedTokens;
  int32_t max_model_len = 0;            // 0: trained context, shrunk to what the KV cache holds
  bool enable_prefix_caching = true;
  SchedulingPolicy policy = SchedulingPolicy::Fcfs;
  int32_t long_prefill_token_threshold = 0;  // > 0: most prompt tokens one request computes per step
  // Context shift (llama-server's --context-shift): a sequence that reaches max_model_len before
  // max_tokens keeps its first context_shift_keep tokens (-1: its prompt; at most half the context),
  // drops the oldest half of the rest and goes on (its KV recomputed by prefill). With it,
  // prompt + max_tokens may exceed the context. Off: such requests are refused / end with "length".
  bool context_shift = false;
  int32_t context_shift_keep = 1;
  // Models whose every layer has a sliding window (Mistral 7B v0.1's llama.attention.sliding_window):
  // a sequence's KV blocks older than the window of its next token go back to the pool while it goes
  // on, so its KV stays bounded by the window (vLLM's hybrid KV cache manager does the same). false:
  // every block is kept until the sequence ends. No effect on other models.
  bool free_out_of_window_kv = true;
  // LoRA adapters: loaded at create (more at run time with Engine::load_lora), at most max_loras at
  // once; every loaded adapter can be used by any request of any batch.
  std::vector<LoraSpec> loras;
  int32_t max_loras = defaults::kMaxLoras;
  // vLLM's --max-lora-rank: adapters of a larger rank are refused at load; 0: any rank.
  int32_t max_lora_rank = 0;
  // vLLM's --seed: requests without a "seed" draw theirs from one generator seeded with it, so the same
  // requests in the same order sample the same text on every run; unset: each from the OS.
  std::optional<uint64_t> seed;
  SpeculativeConfig speculative;        // speculative decoding; method "" = off
  // Embedding models (llama.cpp's --pooling): "" keeps the file's <arch>.pooling_type; mean, cls, last
  // or rank replace it and make any model an embedding model (it then does not generate). rank on a
  // qwen3 generation model scores with the "yes"/"no" rows of its output matrix (Qwen3-Reranker style)
  // and the Qwen3-Reranker prompt unless the file has tokenizer.chat_template.rerank.
  std::string pooling;
  // Testing aid: the engine thread (start()) sleeps this long after every step, so tests can hold a
  // request in flight for a known time on any machine. 0 in production.
  double debug_step_delay_s = 0;
};

}  // namespace tmill
