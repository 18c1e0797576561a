#include "model/gpu_lora.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace tmill {

GpuLora::~GpuLora() {
  for (auto& d : cache_) release(*d);
  ops_.release(ids_);
  ops_.release(scratch_);
}

void GpuLora::release(DevAdapter& d) {
  for (void* p : d.allocs) ops_.release(p);
  d.allocs.clear();
}

uint64_t GpuLora::device_bytes() const {
  uint64_t n = 0;
  for (const auto& d : cache_) n += d->bytes;
  return n;
}

// A and B as contiguous float32 rows on the device (the views' rows may be strided: a fused tensor's).
Result<GpuLora::DevWeight> GpuLora::upload(const LoraWeight& w, DevAdapter& d) {
  DevWeight o;
  o.rank = w.rank(), o.cols = w.a.cols, o.rows = w.b.rows, o.factor = w.factor;
  for (const Matrix* m : {&w.a, &w.b}) {
    if (m->type != DType::F32) return Error{"GPU LoRA: adapter values must be float32"};
    const size_t row = static_cast<size_t>(m->cols) * 4, bytes = row * static_cast<size_t>(m->rows);
    std::vector<float> packed(static_cast<size_t>(m->rows * m->cols));
    for (int64_t r = 0; r < m->rows; ++r) std::memcpy(packed.data() + r * m->cols, m->row(r), row);
    TM_ASSIGN_OR_RETURN(void* p, ops_.alloc(bytes));
    d.allocs.push_back(p);
    d.bytes += bytes;
    TM_TRY(ops_.upload(p, packed.data(), bytes));
    (m == &w.a ? o.a : o.b) = static_cast<const float*>(p);
  }
  return o;
}

Result<const GpuLora::DevAdapter*> GpuLora::device_copy(const LoraAdapter& a) {
  for (auto& d : cache_)
    if (d->serial == a.serial()) {
      d->last_used = clock_;
      return d.get();
    }
  auto owned = std::make_unique<DevAdapter>();
  DevAdapter& d = *owned;
  d.serial = a.serial();
  d.last_used = clock_;
  auto fill = [&](const LoraWeight* w, DevWeight* out) -> Status {
    if (!w) return {};
    auto u = upload(*w, d);
    if (!u.ok()) return u.error_value();
    *out = *u;
    d.widest = std::max(d.widest, u->cols + u->rank + u->rows);
    return {};
  };
  Status st;
  d.layers.resize(static_cast<size_t>(n_layer_));
  for (int64_t l = 0; l < n_layer_ && st.ok(); ++l)
    for (int s = 0; s < kLoraSlots && st.ok(); ++s)
      st = fill(a.layer(l, static_cast<LoraSlot>(s)), &d.layers[static_cast<size_t>(l)][static_cast<size_t>(s)]);
  if (st.ok()) st = fill(a.output(), &d.output);
  if (st.ok()) st = fill(a.embedding(), &d.embedding);
  if (!st.ok()) {
    release(d);
    return st.error_value();
  }
  // room for it: the least recently used adapters not bound this step go first
  while (static_cast<int64_t>(cache_.size()) >= max_cached_) {
    auto lru = cache_.end();
    for (auto it = cache_.begin(); it != cache_.end(); ++it)
      if ((*it)->last_used != clock_ && (lru == cache_.end() || (*it)->last_used < (*lru)->last_used)) lru = it;
    if (lru == cache_.end()) break;  // every cached adapter is bound this step
    release(**lru);
    cache_.erase(lru);
  }
  cache_.push_back(std::move(owned));
  return cache_.back().get();
}

Status GpuLora::ensure(int64_t ids, int64_t floats) {
  auto grow = [&](auto*& buf, int64_t& cap, int64_t need) -> Status {  // (4-byte elements)
    if (need <= cap) return {};
    ops_.release(buf);
    buf = nullptr;
    TM_ASSIGN_OR_RETURN(void* p, ops_.alloc(static_cast<size_t>(need) * 4));
    buf = static_cast<std::remove_reference_t<decltype(buf)>>(p);
    cap = need;
    return {};
  };
  TM_TRY(grow(ids_, cap_ids_, ids));
  return grow(scratch_, cap_floats_, floats);
}

Status GpuLora::begin(const ForwardBatch& batch, const std::vector<int64_t>& logit_rows) {
  groups_.clear();
  if (batch.loras.empty()) return {};
  ++clock_;
  // each binding's token rows, logits rows and token ids, back to back in one upload
  std::vector<std::vector<int32_t>> rows(batch.loras.size()), outs(batch.loras.size());
  std::vector<int32_t> binding_of_token(batch.tokens.size(), -1);
  for (const SeqSlice& s : batch.seqs) {
    if (s.lora < 0) continue;
    if (static_cast<size_t>(s.lora) >= batch.loras.size() || !batch.loras[static_cast<size_t>(s.lora)].adapter)
      return Error{"GPU forward: a sequence names a LoRA binding the batch does not have"};
    for (int32_t i = 0; i < s.n_tokens; ++i) {
      rows[static_cast<size_t>(s.lora)].push_back(s.token_begin + i);
      binding_of_token[static_cast<size_t>(s.token_begin + i)] = s.lora;
    }
  }
  for (size_t r = 0; r < logit_rows.size(); ++r)
    if (const int32_t b = binding_of_token[static_cast<size_t>(logit_rows[r])]; b >= 0)
      outs[static_cast<size_t>(b)].push_back(static_cast<int32_t>(r));
  std::vector<int32_t> h_ids;
  std::vector<const LoraAdapter*> adapters;
  for (size_t b = 0; b < batch.loras.size(); ++b) {
    if (rows[b].empty()) continue;  // a binding no sequence uses costs nothing
    adapters.push_back(batch.loras[b].adapter);
    Group g;
    g.scale = batch.loras[b].scale;
    g.n_rows = static_cast<int64_t>(rows[b].size());
    g.n_out = static_cast<int64_t>(outs[b].size());
    groups_.push_back(g);
    h_ids.insert(h_ids.end(), rows[b].begin(), rows[b].end());
    h_ids.insert(h_ids.end(), outs[b].begin(), outs[b].end());
    for (int32_t t : rows[b]) h_ids.push_back(batch.tokens[static_cast<size_t>(t)]);
  }
  if (groups_.empty()) return {};
  // the adapters on the device, and scratch for the largest product of the step (n rows gathered,
  // A x and B (A x)); the previous step is done, so nothing queued reads what is released here
  int64_t floats = 0;
  for (size_t i = 0; i < groups_.size(); ++i) {
    auto d = device_copy(*adapters[i]);
    if (!d.ok()) {
      groups_.clear();
      return d.error_value();
    }
    groups_[i].dev = *d;
    floats = std::max(floats, std::max(groups_[i].n_rows, groups_[i].n_out) * (*d)->widest);
  }
  TM_TRY(ensure(static_cast<int64_t>(h_ids.size()), floats));
  TM_TRY(ops_.upload(ids_, h_ids.data(), h_ids.size() * 4));
  const int32_t* p = ids_;
  for (Group& g : groups_) {
    g.rows = p, p += g.n_rows;
    g.out_rows = p, p += g.n_out;
    g.tokens = p, p += g.n_rows;
  }
  return {};
}

Status GpuLora::delta(const DevWeight& w, float scale, const float* x, int64_t x_width, const int32_t* rows, int64_t n,
                      float* y, int64_t y_width) {
  if (!w.a || n == 0) return {};
  float* xs = scratch_;
  float* t = xs + n * w.cols;
  float* u = t + n * w.rank;
  TM_TRY(ops_.get_rows(DType::F32, x, static_cast<size_t>(x_width) * 4, w.cols, rows, n, xs, 1.0f));
  TM_TRY(ops_.matmul(DType::F32, w.a, w.rank, w.cols, static_cast<size_t>(w.cols) * 4, xs, n, t, nullptr, 0));
  TM_TRY(ops_.matmul(DType::F32, w.b, w.rows, w.rank, static_cast<size_t>(w.rank) * 4, t, n, u, nullptr, 0));
  if (y_width != w.rows) return Error{"GPU LoRA: an adapted matrix's output width does not match"};
  return ops_.scatter_add(y, u, rows, n, w.rows, scale * w.factor);
}

Status GpuLora::apply(int64_t l, LoraSlot s, const float* x, int64_t x_width, float* y, int64_t y_width) {
  for (const Group& g : groups_) {
    const DevWeight& w = g.dev->layers[static_cast<size_t>(l)][static_cast<size_t>(s)];
    TM_TRY(delta(w, g.scale, x, x_width, g.rows, g.n_rows, y, y_width));
  }
  return {};
}

Status GpuLora::apply_output(const float* x, int64_t E, float* y, int64_t V) {
  for (const Group& g : groups_) TM_TRY(delta(g.dev->output, g.scale, x, E, g.out_rows, g.n_out, y, V));
  return {};
}

Status GpuLora::apply_embedding(float* x, int64_t E, float embd_scale) {
  for (const Group& g : groups_) {
    const DevWeight& w = g.dev->embedding;  // A: n_vocab rows of rank, B: E x rank
    if (!w.a) continue;
    if (w.rows != E) return Error{"GPU LoRA: the embedding adapter's width does not match"};
    float* t = scratch_;
    float* u = t + g.n_rows * w.rank;
    TM_TRY(ops_.get_rows(DType::F32, w.a, static_cast<size_t>(w.rank) * 4, w.rank, g.tokens, g.n_rows, t, 1.0f));
    TM_TRY(ops_.matmul(DType::F32, w.b, E, w.rank, static_cast<size_t>(w.rank) * 4, t, g.n_rows, u, nullptr, 0));
    TM_TRY(ops_.scatter_add(x, u, g.rows, g.n_rows, E, embd_scale * g.scale * w.factor));
  }
  return {};
}

}  // namespace tmill
