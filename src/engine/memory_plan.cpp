#include "engine/memory_plan.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/memory.h"
#include "core/strings.h"

namespace tmill {

uint64_t available_memory_bytes() { return meminfo_bytes("MemAvailable"); }

Result<uint64_t> parse_kv_cache_memory(std::string_view s) {
  if (!s.empty() && s.back() == '%') {
    const std::string num(s.substr(0, s.size() - 1));
    char* end = nullptr;
    const double pct = std::strtod(num.c_str(), &end);
    if (num.empty() || end != num.c_str() + num.size() || !(pct > 0 && pct <= 100))
      return Error{fmt::format("invalid KV cache share '{}' (use e.g. 30%)", s)};
    const uint64_t avail = available_memory_bytes();
    if (avail == 0) return Error{"cannot read available memory (/proc/meminfo) for a percentage KV cache size"};
    return static_cast<uint64_t>(static_cast<double>(avail) * pct / 100.0);
  }
  return parse_size(s);
}

Result<MemoryPlan> plan_memory(const Model& model, const EngineConfig& cfg, uint64_t weight_bytes, KvLayout* layout) {
  const ModelConfig& c = model.config();
  if (cfg.block_size < 1 || cfg.block_size > 1024) return Error{"block size must be in [1, 1024]"};
  // (speculative tokens are written past the accepted ones: lfm2's convolution state keeps as many more)
  const int64_t lookahead = cfg.speculative.method.empty() ? 0 : cfg.speculative.num_speculative_tokens;
  KvLayout lay = KvLayout::for_model(c, cfg.block_size, 0, DType::F16, lookahead);
  std::string dt = cfg.kv_cache_dtype;
  if (dt == "auto") dt = model.main_weight_type() == DType::F32 ? "f32" : "f16";
  const std::optional<DType> named = kv_cache_dtype_named(dt);
  if (!named)
    return Error{fmt::format("unsupported --kv-cache-dtype '{}' ({})", cfg.kv_cache_dtype, kKvCacheDtypeNames)};
  lay.dtype = *named;
  TM_TRY(check_kv_cache_shape(lay.dtype, lay.block_size, lay.head_dim));

  const uint64_t per_block = lay.bytes_per_block();
  const uint64_t per_token = per_block / static_cast<uint64_t>(lay.block_size);
  // Attention-free models (mamba, mamba2) have no K/V: a block costs nothing and only counts positions,
  // the budget goes to the state slots, and the context (their files' 2^20 "trained" one aside) is capped
  // at kNoKvContext unless --max-model-len says otherwise.
  const bool no_kv = per_block == 0;
  constexpr int64_t kNoKvContext = 65536;
  int64_t trained = no_kv && cfg.max_model_len <= 0 ? std::min<int64_t>(c.n_ctx_train, kNoKvContext) : c.n_ctx_train;
  // Learned positions (gpt2, starcoder, mpt): no position past position_embd's rows, speculative
  // tokens (written past the accepted ones) included.
  if (c.n_pos_embd > 0) {
    const int64_t reach = c.n_pos_embd - lookahead;
    if (cfg.max_model_len > reach || reach < 1)
      return Error{fmt::format("--max-model-len {} is past the {} positions the model has learned embeddings for{}",
                               cfg.max_model_len, c.n_pos_embd,
                               lookahead > 0 ? fmt::format(" ({} with {} speculative tokens)", reach, lookahead) : "")};
    trained = std::min(trained, reach);
  }
  uint64_t bytes = cfg.kv_cache_bytes;
  if (cfg.kv_cache_tokens > 0)
    bytes = static_cast<uint64_t>(cfg.kv_cache_tokens / lay.block_size) * per_block;
  MemoryPlan plan;
  if (bytes == 0) {
    const int64_t want_len = cfg.max_model_len > 0 ? cfg.max_model_len : trained;
    const uint64_t want = static_cast<uint64_t>(std::max(1, cfg.max_num_seqs)) *
                          (static_cast<uint64_t>(want_len) * per_token +
                           static_cast<uint64_t>(lay.n_state_layers * lay.state_floats) * sizeof(float) * 2);
    const uint64_t avail = available_memory_bytes();
    const uint64_t cap = avail ? avail / 4 : (4ull << 30);
    bytes = std::min(want, cap);
    plan.note = fmt::format("KV cache sized automatically: {} (min of {} for {} sequences of {} tokens, 25% of {} available",
                            format_bytes(bytes), format_bytes(want), cfg.max_num_seqs, want_len, format_bytes(avail));
    if (cfg.memory_limit_bytes > 0) {
      if (weight_bytes >= cfg.memory_limit_bytes)
        return Error{fmt::format("memory limit {} for the weights and KV cache (--memory-limit less --buffer-memory): "
                                 "the weights alone take {}",
                                 format_bytes(cfg.memory_limit_bytes), format_bytes(weight_bytes))};
      bytes = std::min(bytes, cfg.memory_limit_bytes - weight_bytes);
      plan.note += fmt::format(", --memory-limit {} minus {} of weights", format_bytes(cfg.memory_limit_bytes),
                               format_bytes(weight_bytes));
    }
    plan.note += ")";
  } else if (cfg.memory_limit_bytes > 0 && weight_bytes + bytes > cfg.memory_limit_bytes) {
    return Error{fmt::format("memory limit {} for the weights and KV cache (--memory-limit less --buffer-memory): "
                             "weights {} plus the KV cache {} do not fit; lower --kv-cache-memory "
                             "(or --gpu-memory-utilization) or raise --memory-limit",
                             format_bytes(cfg.memory_limit_bytes), format_bytes(weight_bytes), format_bytes(bytes))};
  }
  // Recurrent models: a state slot per sequence that runs at once (max_num_seqs of them), from the same
  // budget, at most half of it (the rest holds the attention layers' blocks).
  if (lay.n_state_layers > 0) {
    const uint64_t per_slot = static_cast<uint64_t>(lay.n_state_layers * lay.state_floats) * sizeof(float);
    const auto want_slots = static_cast<uint64_t>(std::max(1, cfg.max_num_seqs));
    // (a size in tokens is the blocks': the states come on top)
    const uint64_t slots = cfg.kv_cache_tokens > 0 ? want_slots
                           : std::clamp<uint64_t>(bytes / (no_kv ? 1 : 2) / per_slot, 1, want_slots);
    if (cfg.kv_cache_tokens > 0) bytes += slots * per_slot;
    if (no_kv ? slots * per_slot > bytes : slots * per_slot >= bytes)
      return Error{fmt::format("the KV cache budget {} does not hold one sequence's recurrent state ({}) and a block "
                               "({}); raise --kv-cache-memory",
                               format_bytes(bytes), format_bytes(per_slot), format_bytes(per_block))};
    lay.num_state_slots = static_cast<int64_t>(slots);
    bytes -= slots * per_slot;
    std::string n = fmt::format("recurrent state: {} sequence slots of {} (at most {} sequences run at once; prefix "
                                "caching off)",
                                slots, format_bytes(per_slot), slots);
    plan.note = plan.note.empty() ? n : plan.note + "; " + n;
    plan.num_state_slots = static_cast<int32_t>(slots);
    plan.state_bytes = slots * per_slot;
  }
  const int64_t len_for_blocks = cfg.max_model_len > 0 ? cfg.max_model_len : trained;
  const int64_t blocks = no_kv ? (cfg.kv_cache_tokens > 0 ? cfg.kv_cache_tokens / lay.block_size
                                                          : lay.num_state_slots * ((len_for_blocks + lay.block_size - 1) / lay.block_size))
                               : static_cast<int64_t>(bytes / per_block);
  if (no_kv && trained < c.n_ctx_train) {
    std::string n = fmt::format("no K/V (attention-free): the context is {} tokens (the file says {}; "
                                "--max-model-len sets another)",
                                trained, c.n_ctx_train);
    plan.note = plan.note.empty() ? n : plan.note + "; " + n;
  }
  if (blocks < 1)
    return Error{fmt::format("--kv-cache-memory {} is smaller than one KV block ({})", format_bytes(bytes),
                             format_bytes(per_block))};
  lay.num_blocks = blocks + 1;  // + the null block 0 the KV manager reserves
  const int64_t tokens = blocks * lay.block_size;
  int64_t max_len;
  if (cfg.max_model_len > 0) {
    if (cfg.max_model_len > tokens)
      return Error{fmt::format("--max-model-len {} does not fit the KV cache: {} holds {} tokens ({} per token); "
                               "raise --kv-cache-memory to at least {} or lower --max-model-len",
                               cfg.max_model_len, format_bytes(bytes), tokens, format_bytes(per_token),
                               format_bytes((static_cast<uint64_t>(cfg.max_model_len) + lay.block_size) * per_token))};
    max_len = cfg.max_model_len;
  } else {
    max_len = std::min<int64_t>(trained, tokens);
    if (max_len < trained) {
      std::string n = fmt::format("max_model_len lowered from the trained context {} to {} tokens: that is what the "
                                  "KV cache ({}) holds",
                                  trained, max_len, format_bytes(bytes));
      plan.note = plan.note.empty() ? n : plan.note + "; " + n;
    }
  }
  plan.weight_bytes = weight_bytes;
  plan.kv_bytes = per_block * static_cast<uint64_t>(blocks) + plan.state_bytes;
  plan.num_blocks = blocks;
  plan.kv_tokens = tokens;
  plan.max_model_len = static_cast<int32_t>(std::min<int64_t>(max_len, INT32_MAX));
  plan.max_full_sequences = tokens / std::max<int64_t>(1, max_len);
  plan.kv_dtype = dt;
  *layout = lay;
  return plan;
}

}  // namespace tmill
