// How much memory goes where: weights (as prepared for the kernels), KV cache blocks, and the context
// length they allow.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "engine/engine.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace tmill {

// MemAvailable from /proc/meminfo (0 if unknown).
uint64_t available_memory_bytes();

// parse_kv_cache_memory (engine.h) is defined in memory_plan.cpp.

// Picks the KV dtype, the number of blocks and max_model_len:
//  - kv_cache_bytes given: that many bytes of blocks; else min(25% of available memory, what
//    max_num_seqs sequences of the trained context need), at least one full sequence if it fits.
//  - max_model_len given: it must fit the cache (error otherwise); else the trained context,
//    lowered (with a note) to what the cache holds.
// weight_bytes: what the prepared weights occupy (Forward::weight_bytes), reported in the plan. Call
// it after preparing them, so that "available memory" no longer includes what they took.
Result<MemoryPlan> plan_memory(const Model& model, const EngineConfig& config, uint64_t weight_bytes,
                               KvLayout* layout);

}  // namespace tmill
