// The engine on a GPU backend (--device cuda; cuda-emu: the CUDA kernels on the CPU's emulator of
// them; gpu-oracle: the same path on the host oracle's reference math): the
// model checked against what the GPU forward runs, the memory plan (on a device vLLM's
// --gpu-memory-utilization: weights, the largest step's activations, and the KV cache in what is
// left; on the oracle the CPU's plan), then the weights uploaded and the paged KV cache allocated on
// the device. The scheduler, sampling and outputs are the CPU engine's, unchanged.
#include <fmt/format.h>

#include <algorithm>

#include "core/log.h"
#include "core/mmap.h"
#include "engine/engine_impl.h"
#include "engine/memory_plan.h"
#include "gpu/device.h"
#include "gpu/memory_plan.h"
#include "model/gpu_host_ops.h"

namespace tmill {

gpu::Ops& gpu_ops_for(const std::string& device) {
  return device == "cuda" ? gpu::cuda_ops() : device == "cuda-emu" ? gpu::cuda_emu_ops() : gpu_host_ops();
}

Status Engine::Impl::setup_gpu(KvLayout* layout) {
  const ModelConfig& c = model->config();
  const bool device = config.device == "cuda" || config.device == "cuda-emu";  // (else the host oracle)
  gpu::Ops& ops = gpu_ops_for(config.device);
  auto refuse = [&](const std::string& why) {
    return Error{fmt::format("--device {}: {}; use --device cpu", config.device, why)};
  };
  if (auto st = ops.available(); !st.ok()) return refuse(st.error());
  // the cache's type: auto is F16 on a GPU (an F32 model's too); INT8 and FP8 hold ~2x the tokens, Q4 ~3.6x
  const std::string kv_name = config.kv_cache_dtype == "auto" ? "f16" : config.kv_cache_dtype;
  const std::optional<DType> named = kv_cache_dtype_named(kv_name);
  if (!named || !gpu::kv_cache_supports(*named))  // (f32 and bf16: no gain on a GPU)
    return refuse(fmt::format("--kv-cache-dtype {} is not supported on a GPU (auto, f16, int8, q4_0, fp8, fp8_e4m3, "
                              "fp8_e5m2)", config.kv_cache_dtype));
  if (config.block_size < 1 || config.block_size > 1024) return Error{"block size must be in [1, 1024]"};
  const DType kv_dtype = *named;
  TM_TRY(check_kv_cache_shape(kv_dtype, config.block_size, c.head_dim));
  if (auto st = gpu_forward_supports(*model, ops, kv_dtype); !st.ok()) return refuse(st.error());
  const uint64_t weights = GpuForward::weight_bytes_of(*model);
  KvLayout lay = KvLayout::for_model(c, config.block_size, 0, kv_dtype);
  if (device) {
    auto gpus = ops.devices();
    if (!gpus.ok()) return refuse(gpus.error());
    const gpu::GpuInfo& g = gpus->front();
    gpu::GpuMemoryInputs in;
    in.total_bytes = g.total_bytes;
    in.free_bytes = g.free_bytes;
    in.utilization = config.gpu_memory_utilization;
    in.weight_bytes = weights;
    const int64_t max_len = config.max_model_len > 0 ? config.max_model_len : c.n_ctx_train;
    in.activation_bytes = GpuForward::scratch_bytes_of(c, config.max_num_batched_tokens,
                                                       max_len / config.block_size + 1, config.max_num_batched_tokens);
    in.kv_block_bytes = lay.bytes_per_block();
    in.block_size = config.block_size;
    in.trained_ctx = c.n_ctx_train;
    in.max_model_len = config.max_model_len;
    // --kv-cache-memory (or a cache sized in tokens) wins over the utilization, as in vLLM
    in.kv_bytes = config.kv_cache_tokens > 0
                      ? static_cast<uint64_t>(config.kv_cache_tokens / config.block_size + 1) * lay.bytes_per_block()
                      : config.kv_cache_bytes;
    auto p = gpu::plan_gpu_memory(in);
    if (!p.ok()) return Error{fmt::format("--device {} ({}): {}", config.device, g.name, p.error())};
    // block 0 is the KV manager's null block; with CUDA graphs one more is the padding tokens' spare
    // (GpuForward allocates it beyond num_blocks)
    const int64_t spare = config.enforce_eager ? 0 : 1;
    if (p->kv_blocks < 2 + spare)
      return Error{fmt::format("--device {}: the KV cache holds less than one usable block; raise --gpu-memory-utilization",
                               config.device)};
    lay.num_blocks = p->kv_blocks - spare;
    plan.weight_bytes = weights;
    plan.kv_bytes = p->kv_bytes;
    plan.num_blocks = lay.num_blocks - 1;
    plan.kv_tokens = plan.num_blocks * config.block_size;
    plan.max_model_len = static_cast<int32_t>(std::min<int64_t>(p->max_model_len, plan.kv_tokens));
    plan.max_full_sequences = plan.kv_tokens / std::max<int32_t>(1, plan.max_model_len);
    plan.kv_dtype = kv_name;
    plan.note = fmt::format("{} {}", g.name, p->summary);
    plan.device_name = g.name;
    plan.device_total_bytes = g.total_bytes;
    plan.device_budget_bytes = p->budget_bytes;
    log_info("{}", plan.note);
  } else {
    EngineConfig host = config;
    host.kv_cache_dtype = kv_name;
    TM_ASSIGN_OR_RETURN(plan, plan_memory(*model, host, weights, &lay));
  }
  plan.device = config.device;
  GpuForwardOptions fo;  // graphs for decode steps of up to max_num_seqs sequences (vLLM caps them at 512)
  const int64_t ctx = plan.max_model_len > 0 ? plan.max_model_len : c.n_ctx_train;
  fo.max_loras = std::max(config.max_loras, 1) + 1;  // (and one unloaded while its requests finish)
  fo.scratch_tokens = config.max_num_batched_tokens;  // the largest step's activations, allocated up front
  fo.scratch_blocks = (ctx + config.block_size - 1) / config.block_size + 1;  // a whole sequence's table
  if (!config.enforce_eager) {
    fo.graph_max_batch = std::min<int64_t>(std::max(config.max_num_seqs, 1), 512);
    fo.graph_max_blocks = fo.scratch_blocks;
  }
  auto f = GpuForward::create(model, ops, lay, fo);
  if (!f.ok()) return refuse(f.error());
  gpu_forward = std::move(f).value();
  // The weights live on the device now (embeddings too, where the device reads their type; else the
  // file's pages are read for the step's embedding rows).
  if (const auto mapping = model->file().mapping()) mapping->drop_resident_pages();
  *layout = lay;
  return {};
}

}  // namespace tmill
