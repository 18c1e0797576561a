#include "convert/lora.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "convert/dummy.h"
#include "formats/gguf.h"
#include "formats/lora_gguf.h"
#include "quant/quant.h"

namespace tmill {
namespace {

// "blk.3.attn_q.weight" -> "attn_q"; "" for tensors outside the layers.
std::string layer_part(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return "";
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0) return "";
  return name.substr(dot + 1, name.size() - 7 - dot - 1);
}

bool wanted(const GgufTensorInfo& t, const std::vector<std::string>& targets, std::set<std::string>& matched) {
  if (t.ne.size() != 2) return false;
  const std::string part = layer_part(t.name);
  for (const std::string& want : targets) {
    const bool hit = (want == "all" || want == "layers") ? !part.empty() || (want == "all" && (t.name == "output.weight" || t.name == "token_embd.weight"))
                                                        : want == part || want == t.name;
    if (hit) {
      matched.insert(want);
      return true;
    }
  }
  return false;
}

// Stores n floats as `type` (rows of `cols`).
Status store_rows(DType type, const float* src, int64_t rows, int64_t cols, uint8_t* dst, size_t nbytes) {
  const size_t rb = nbytes / static_cast<size_t>(rows);
  for (int64_t r = 0; r < rows; ++r) quantize_row(type, src + r * cols, dst + r * rb, cols);
  return ok_status();
}

}  // namespace

Status write_dummy_lora(const DummyLoraOptions& o, const std::string& out_path) {
  if (o.dtype != DType::F32 && o.dtype != DType::F16 && o.dtype != DType::BF16 && o.dtype != DType::Q8_0)
    return Error{fmt::format("--dtype {}: a LoRA adapter is written as F32, F16, BF16 or Q8_0", dtype_name(o.dtype))};
  if (o.rank <= 0) return Error{"--rank must be at least 1"};
  auto base = GgufFile::open(o.base_path);
  if (!base.ok()) return base.error_value();
  const std::string arch = base->get_string("general.architecture").value_or("");
  if (arch.empty()) return Error{fmt::format("{}: general.architecture is missing", o.base_path)};
  const std::vector<std::string> targets = o.targets.empty() ? std::vector<std::string>{"layers"} : o.targets;

  GgufWriter w;
  w.set_string("general.architecture", arch);
  w.set_string("general.type", "adapter");
  w.set_string("general.name", fmt::format("dummy LoRA r{} for {}", o.rank,
                                           base->get_string("general.name").value_or(std::filesystem::path(o.base_path).stem().string())));
  w.set_string("adapter.type", "lora");
  if (o.alpha != 0.0f) w.set_f32("adapter.lora.alpha", o.alpha);
  std::set<std::string> matched;
  int pairs = 0;
  for (const GgufTensorInfo& t : base->tensors()) {
    if (!wanted(t, targets, matched)) continue;
    const int64_t n_in = t.ne[0], n_out = t.ne[1];
    const bool embd = t.name == "token_embd.weight";
    // Plain: lora_a ne = [n_in, rank], lora_b ne = [rank, n_out]. token_embd: lora_a ne = [rank, n_vocab],
    // lora_b ne = [rank, n_embd] (llama.cpp's flipped layout for the lookup).
    const std::vector<int64_t> a_ne = embd ? std::vector<int64_t>{o.rank, n_out} : std::vector<int64_t>{n_in, o.rank};
    const std::vector<int64_t> b_ne = embd ? std::vector<int64_t>{o.rank, n_in} : std::vector<int64_t>{o.rank, n_out};
    for (int half = 0; half < 2; ++half) {
      const auto& ne = half == 0 ? a_ne : b_ne;
      const std::string name = t.name + (half == 0 ? ".lora_a" : ".lora_b");
      const DType type = ne[0] % dtype_info(o.dtype).block_size == 0 ? o.dtype : DType::F16;
      const float spread = o.spread;
      const uint64_t seed = o.seed;
      TM_TRY(w.add_tensor(name, type, ne, [=](uint8_t* dst, size_t nbytes) -> Status {
        std::vector<float> v(static_cast<size_t>(ne[0] * ne[1]));
        for (int64_t r = 0; r < ne[1]; ++r) fill_row(v.data() + r * ne[0], ne[0], seed, name, r, 0.0f, spread);
        return store_rows(type, v.data(), ne[1], ne[0], dst, nbytes);
      }));
    }
    ++pairs;
  }
  for (const std::string& want : targets)
    if (!matched.count(want))
      return Error{fmt::format("target '{}' matches no matrix of {} (e.g. attn_q, attn_qkv, ffn_down, output.weight, all)",
                               want, o.base_path)};
  if (pairs == 0) return Error{"no tensor to adapt"};
  return w.write(out_path);
}

Status merge_lora(const std::string& base_path, const std::vector<LoraMergeInput>& adapters,
                  const std::string& out_path) {
  auto base_r = GgufFile::open(base_path);
  if (!base_r.ok()) return base_r.error_value();
  auto base = std::make_shared<const GgufFile>(std::move(base_r).value());
  if (adapters.empty()) return Error{"no adapter to merge (--lora FILE)"};
  // One update per adapted base tensor: (pair, scale) of every adapter touching it.
  struct Update {
    std::shared_ptr<const GgufFile> file;
    LoraTensorPair pair;
    float scale;
  };
  std::map<std::string, std::vector<Update>> updates;
  for (const LoraMergeInput& in : adapters) {
    auto f = GgufFile::open(in.path);
    if (!f.ok()) return f.error_value();
    auto file = std::make_shared<const GgufFile>(std::move(f).value());
    auto info = read_lora_gguf(*file);
    if (!info.ok()) return Error{fmt::format("{}: {}", in.path, info.error())};
    if (auto st = check_lora_against_base(*info, *base); !st.ok()) return Error{fmt::format("{}: {}", in.path, st.error())};
    for (const LoraTensorPair& p : info->pairs) updates[p.base_name].push_back({file, p, in.scale * info->factor(p)});
  }

  GgufWriter w(static_cast<uint32_t>(base->alignment()));
  for (const auto& [k, v] : base->metadata()) w.set(k, v);
  // A tied output reads token_embd.weight; an adapter of the lookup (PEFT's embed_tokens) leaves the
  // output as it was, so the merged file gets the base embedding as its own output.weight.
  const GgufTensorInfo* embd = base->find_tensor("token_embd.weight");
  if (embd && !base->find_tensor("output.weight") && updates.count(embd->name)) {
    const uint8_t* data = embd->data;
    TM_TRY(w.add_tensor("output.weight", embd->type, embd->ne, [base, data](uint8_t* dst, size_t n) -> Status {
      std::memcpy(dst, data, n);
      return ok_status();
    }));
  }
  for (const GgufTensorInfo& t : base->tensors()) {
    auto it = updates.find(t.name);
    if (it == updates.end()) {
      const uint8_t* data = t.data;
      TM_TRY(w.add_tensor(t.name, t.type, t.ne, [base, data](uint8_t* dst, size_t n) -> Status {
        std::memcpy(dst, data, n);
        return ok_status();
      }));
      continue;
    }
    if (!can_dequantize(t.type))
      return Error{fmt::format("base tensor '{}' has type {}, which tokenmill cannot read", t.name, dtype_name(t.type))};
    const std::vector<Update> ups = it->second;
    const GgufTensorInfo* tp = &t;
    TM_TRY(w.add_tensor(t.name, DType::F32, t.ne, [base, ups, tp](uint8_t* dst, size_t) -> Status {
      const int64_t cols = tp->ne[0], rows = tp->ne[1];
      auto* out = reinterpret_cast<float*>(dst);
      const size_t rb = static_cast<size_t>(tp->nbytes / static_cast<uint64_t>(rows));
      for (int64_t r = 0; r < rows; ++r) dequantize_row(tp->type, tp->data + r * rb, out + r * cols, cols);
      for (const Update& u : ups) {
        const LoraTensorPair& p = u.pair;
        const int64_t rank = p.rank;
        auto a = std::vector<float>(static_cast<size_t>(p.a->n_elements));
        auto b = std::vector<float>(static_cast<size_t>(p.b->n_elements));
        const size_t arb = static_cast<size_t>(p.a->nbytes / static_cast<uint64_t>(p.a->ne[1]));
        const size_t brb = static_cast<size_t>(p.b->nbytes / static_cast<uint64_t>(p.b->ne[1]));
        for (int64_t r = 0; r < p.a->ne[1]; ++r) dequantize_row(p.a->type, p.a->data + r * arb, a.data() + r * p.a->ne[0], p.a->ne[0]);
        for (int64_t r = 0; r < p.b->ne[1]; ++r) dequantize_row(p.b->type, p.b->data + r * brb, b.data() + r * rank, rank);
        // W[r][c] += s * sum_k B[r][k] A[k][c]; the embedding: W[t][e] += s * sum_k B[e][k] a[t][k].
        const bool embd = p.is_embedding();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) {
            float v = 0.0f;
            for (int64_t k = 0; k < rank; ++k)
              v += embd ? b[static_cast<size_t>(c * rank + k)] * a[static_cast<size_t>(r * rank + k)]
                        : b[static_cast<size_t>(r * rank + k)] * a[static_cast<size_t>(k * cols + c)];
            out[r * cols + c] += u.scale * v;
          }
      }
      return ok_status();
    }));
  }
  return w.write(out_path);
}

}  // namespace tmill
