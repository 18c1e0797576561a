#include "model/lora.h"

#include <atomic>
#include <map>
#include <set>

#include <fmt/format.h>

#include "formats/lora_gguf.h"
#include "quant/quant.h"

namespace tmill {
namespace {

// A 2-D GGUF tensor (ne = [cols, rows]) as float32, row by row.
Result<std::vector<float>> to_f32(const GgufTensorInfo& t) {
  if (!can_dequantize(t.type))
    return Error{fmt::format("tensor '{}' has type {}, which tokenmill cannot read", t.name, dtype_name(t.type))};
  const int64_t cols = t.ne[0], rows = t.ne[1];
  std::vector<float> out(static_cast<size_t>(cols * rows));
  const size_t row_bytes = static_cast<size_t>(t.nbytes / static_cast<uint64_t>(rows));
  for (int64_t r = 0; r < rows; ++r) dequantize_row(t.type, t.data + r * row_bytes, out.data() + r * cols, cols);
  return out;
}

Matrix f32_matrix(const float* data, int64_t rows, int64_t cols, std::string name) {
  Matrix m;
  m.type = DType::F32;
  m.rows = rows;
  m.cols = cols;
  m.data = data;
  m.row_bytes = static_cast<size_t>(cols) * sizeof(float);
  m.name = std::move(name);
  return m;
}

}  // namespace

Result<std::shared_ptr<const LoraAdapter>> LoraAdapter::load(const std::string& path, const Model& base) {
  auto opened = GgufFile::open(path);
  if (!opened.ok()) return opened.error_value();
  const GgufFile& f = *opened;
  auto info = read_lora_gguf(f);
  if (!info.ok()) return Error{fmt::format("{}: {}", path, info.error())};
  if (auto st = check_lora_against_base(*info, base.file()); !st.ok())
    return Error{fmt::format("{}: {}", path, st.error())};

  auto ad = std::shared_ptr<LoraAdapter>(new LoraAdapter());
  static std::atomic<uint64_t> serials{0};
  ad->serial_ = ++serials;
  ad->path_ = path;
  ad->name_ = info->name;
  ad->alpha_ = info->alpha;
  ad->n_tensors_ = static_cast<int64_t>(info->pairs.size());
  // Every pair as float32: A then B (moving a vector keeps its buffer, so views stay valid).
  struct Pair {
    const LoraTensorPair* p;
    const float* a;
    const float* b;
  };
  std::map<std::string, Pair> by_name;
  ad->storage_.reserve(info->pairs.size() * 2);
  for (const LoraTensorPair& p : info->pairs) {
    TM_ASSIGN_OR_RETURN(auto a, to_f32(*p.a));
    TM_ASSIGN_OR_RETURN(auto b, to_f32(*p.b));
    ad->bytes_ += (a.size() + 2 * b.size()) * sizeof(float);  // B twice: as is and transposed
    ad->storage_.push_back(std::move(a));
    ad->storage_.push_back(std::move(b));
    by_name[p.base_name] = {&p, ad->storage_[ad->storage_.size() - 2].data(), ad->storage_.back().data()};
    ad->max_rank_ = std::max(ad->max_rank_, p.rank);
  }

  std::set<std::string> used;
  // The update of a view of base tensor m.name: A whole, B's rows of the view.
  auto bind = [&](const Matrix& m) -> std::unique_ptr<LoraWeight> {
    auto it = by_name.find(m.name);
    if (it == by_name.end()) return nullptr;
    const LoraTensorPair& p = *it->second.p;
    const GgufTensorInfo* t = base.file().find_tensor(m.name);
    const int64_t r0 = (static_cast<const uint8_t*>(m.data) - t->data) / static_cast<int64_t>(m.row_bytes);
    auto w = std::make_unique<LoraWeight>();
    w->a = f32_matrix(it->second.a, p.rank, m.cols, p.a->name);
    w->b = f32_matrix(it->second.b + r0 * p.rank, m.rows, p.rank, p.b->name);
    w->pa = PreparedMatrix(w->a);
    w->bt.resize(static_cast<size_t>(p.rank * m.rows));
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t k = 0; k < p.rank; ++k)
        w->bt[static_cast<size_t>(k * m.rows + r)] = reinterpret_cast<const float*>(w->b.row(r))[k];
    w->factor = info->factor(p);
    used.insert(m.name);
    return w;
  };
  const ModelWeights& mw = base.weights();
  ad->layers_.resize(mw.layers.size());
  for (size_t l = 0; l < mw.layers.size(); ++l) {
    const LayerWeights& L = mw.layers[l];
    // (deepseek2's latent attention computes q inside its own helper: its q projection is not adapted)
    static const Matrix kNone;
    const Matrix* q = base.config().is_mla() ? &kNone : &L.wq;
    const Matrix* slots[kLoraSlots] = {q, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down};
    for (int s = 0; s < kLoraSlots; ++s) ad->layers_[l][static_cast<size_t>(s)] = bind(*slots[s]);
  }
  // A tied output reads token_embd.weight, whose pair has the embedding layout: it adapts the lookup only.
  if (mw.output.name != mw.token_embd.name) ad->output_ = bind(mw.output);
  if (auto it = by_name.find(mw.token_embd.name); it != by_name.end()) {
    const LoraTensorPair& p = *it->second.p;
    auto w = std::make_unique<LoraWeight>();
    w->a = f32_matrix(it->second.a, p.a->ne[1], p.rank, p.a->name);  // (n_vocab, rank)
    w->b = f32_matrix(it->second.b, p.b->ne[1], p.rank, p.b->name);  // (n_embd, rank)
    w->factor = info->factor(p);
    ad->embedding_ = std::move(w);
    used.insert(p.base_name);
  }
  for (const LoraTensorPair& p : info->pairs)
    if (!used.count(p.base_name))
      return Error{fmt::format("{}: tensor '{}' is adapted, but tokenmill's forward does not multiply with it", path,
                               p.base_name)};
  return std::shared_ptr<const LoraAdapter>(std::move(ad));
}

}  // namespace tmill
