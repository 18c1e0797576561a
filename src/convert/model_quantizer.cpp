#include "convert/model_quantizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "convert/imatrix_file.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quant/quant.h"

namespace tmill {

uint64_t QuantizeReport::kv_bytes_per_token() const { return static_cast<uint64_t>(2 * kv_layers * kv_heads * head_dim * 2); }

namespace {

// Integer metadata that may be stored per layer as an array (first element then).
int64_t meta_int(const GgufFile& f, const std::string& key, int64_t def = 0) {
  const GgufValue* v = f.find(key);
  if (!v) return def;
  if (auto i = v->as_int()) return *i;
  if (auto a = v->as_int_array(); a && !a->empty()) return (*a)[0];
  return def;
}

struct Job {
  const GgufTensorInfo* info;
  QuantTensorPlan plan;
  std::optional<std::vector<float>> importance;
};

// Converts one tensor into `dst` and fills the error statistics of its report.
Status convert_tensor(const Job& job, uint8_t* dst, size_t nbytes, ThreadPool& pool, std::vector<float>& f32_buf,
                      QuantTensorReport& rep) {
  const GgufTensorInfo& t = *job.info;
  const DType to = job.plan.target;
  if (!can_dequantize(t.type))
    return Error{fmt::format("tensor {}: cannot convert from {} (no dequantizer)", t.name, dtype_name(t.type))};
  if (!can_quantize(to)) return Error{fmt::format("tensor {}: cannot quantize to {}", t.name, dtype_name(to))};

  const float* src;
  const bool aligned = reinterpret_cast<uintptr_t>(t.data) % 4 == 0;  // GGUF alignment is normally 32
  if (t.type == DType::F32 && aligned) {
    src = reinterpret_cast<const float*>(t.data);
  } else {
    f32_buf.resize(static_cast<size_t>(t.n_elements));
    if (aligned) {
      dequantize_tensor(t.type, t.data, f32_buf.data(), t.n_elements, &pool);
    } else {
      std::vector<uint8_t> copy(t.data, t.data + t.nbytes);
      dequantize_tensor(t.type, copy.data(), f32_buf.data(), t.n_elements, &pool);
    }
    src = f32_buf.data();
  }
  const int64_t cols = t.ne[0];
  const int64_t rows = t.n_elements / cols;
  const int64_t rows_per_mat = t.ne.size() >= 2 ? t.ne[1] : 1;
  const size_t row_bytes = *dtype_row_bytes(to, static_cast<uint64_t>(cols));
  TM_ASSERT(row_bytes * static_cast<size_t>(rows) == nbytes, "output size mismatch");
  const float* imp = job.importance ? job.importance->data() : nullptr;

  // Quantize rows in chunks of ~16K elements; dequantize each row back to measure the error.
  struct Acc {
    double err = 0, ref = 0;
    bool bad_input = false;
    std::vector<float> row;
  };
  std::vector<Acc> acc(static_cast<size_t>(pool.size()));
  const int64_t grain = std::max<int64_t>(1, 16384 / cols);
  pool.parallel_for(rows, grain, [&](int64_t r0, int64_t r1, int tid) {
    Acc& a = acc[static_cast<size_t>(tid)];
    a.row.resize(static_cast<size_t>(cols));
    for (int64_t r = r0; r < r1; ++r) {
      const float* x = src + r * cols;
      uint8_t* q = dst + static_cast<size_t>(r) * row_bytes;
      const float* w = imp ? imp + (r / rows_per_mat) * cols : nullptr;  // one vector per expert
      if (!std::all_of(x, x + cols, [](float v) { return std::isfinite(v); })) {
        a.bad_input = true;  // never feed NaN/Inf to the quantizers (float -> int of NaN is undefined)
        continue;
      }
      quantize_row(to, x, q, cols, w);
      dequantize_row(to, q, a.row.data(), cols);
      double e = 0, s = 0;
      for (int64_t j = 0; j < cols; ++j) {
        const double d = static_cast<double>(x[j]) - a.row[static_cast<size_t>(j)];
        e += d * d;
        s += static_cast<double>(x[j]) * x[j];
      }
      a.err += e;
      a.ref += s;
    }
  });
  double err = 0, ref = 0;
  for (const Acc& a : acc) {
    if (a.bad_input) return Error{fmt::format("tensor {}: the input holds NaN or Inf values", t.name)};
    err += a.err;
    ref += a.ref;
  }
  // Like llama.cpp's row validation: never write a tensor that dequantizes to NaN/Inf.
  if (!std::isfinite(err) || !std::isfinite(ref))
    return Error{fmt::format("tensor {}: non-finite values after conversion to {} (NaN/Inf in the input, or values "
                             "beyond the type's range)",
                             t.name, dtype_name(to))};
  rep.rel_rms = ref > 0 ? std::sqrt(err / ref) : (err > 0 ? INFINITY : 0.0);
  return ok_status();
}

}  // namespace

Result<QuantizeReport> quantize_model(const QuantizeModelOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  TM_ASSIGN_OR_RETURN(GgufFile in, GgufFile::open(opt.input));
  QuantizeReport report;
  const std::string arch = in.get_string("general.architecture").value_or("llama");
  report.shape.arch = arch;
  report.shape.n_layer = meta_int(in, arch + ".block_count");
  report.shape.n_head = meta_int(in, arch + ".attention.head_count");
  report.shape.n_head_kv = meta_int(in, arch + ".attention.head_count_kv", report.shape.n_head);
  report.shape.n_expert = meta_int(in, arch + ".expert_count");
  report.kv_layers = report.shape.n_layer;
  report.kv_heads = report.shape.n_head_kv > 0 ? report.shape.n_head_kv : report.shape.n_head;
  if (const GgufValue* kv = in.find(arch + ".attention.head_count_kv")) {
    if (auto per_layer = kv->as_int_array()) {  // (the recipe keeps llama.cpp's view: layer 0's count)
      report.kv_layers = report.kv_heads = 0;
      for (int64_t h : *per_layer)
        if (h > 0) ++report.kv_layers, report.kv_heads = std::max(report.kv_heads, h);
    }
  }
  // Recurrent layers, as llama.cpp marks them: a per-layer head_count_kv of 0 (and, with a per-layer
  // feed_forward_length, an FFN width of 0: nemotron_h's MLP layers hold no state), or
  // attention.recurrent_layers, or every full_attention_interval-th layer attention (qwen35); falcon-h1's
  // layers have both a mixer and attention.
  if (const int64_t d_state = meta_int(in, arch + ".ssm.state_size"); d_state > 0) {
    const int64_t L = report.shape.n_layer;
    std::vector<int64_t> kv(static_cast<size_t>(L), report.kv_heads), ff(static_cast<size_t>(L), 0), recr;
    if (const GgufValue* v = in.find(arch + ".attention.head_count_kv"))
      if (auto a = v->as_int_array(); a && a->size() >= kv.size()) kv.assign(a->begin(), a->begin() + L);
    if (const GgufValue* v = in.find(arch + ".feed_forward_length"))
      if (auto a = v->as_int_array(); a && a->size() >= ff.size()) ff.assign(a->begin(), a->begin() + L);
    if (const GgufValue* v = in.find(arch + ".attention.recurrent_layers"))
      if (auto a = v->as_int_array(); a && a->size() >= static_cast<size_t>(L)) recr.assign(a->begin(), a->begin() + L);
    const int64_t interval = meta_int(in, arch + ".full_attention_interval");
    const bool by_kv = recr.empty() && interval <= 0;
    const bool both = arch == "falcon-h1";
    report.kv_layers = report.state_layers = 0;
    for (int64_t l = 0; l < L; ++l) {
      const auto i = static_cast<size_t>(l);
      const bool r = both || (!recr.empty() ? recr[i] != 0 : interval > 0 ? (l + 1) % interval != 0 : kv[i] == 0 && ff[i] == 0);
      report.state_layers += r;
      report.kv_layers += both || (!r && (by_kv ? kv[i] > 0 : true));
    }
    const int64_t inner = meta_int(in, arch + ".ssm.inner_size"), groups = meta_int(in, arch + ".ssm.group_count");
    const int64_t conv = std::max<int64_t>(meta_int(in, arch + ".ssm.conv_kernel"), 1);
    report.state_bytes_per_seq = static_cast<uint64_t>(report.state_layers) *
                                 static_cast<uint64_t>((conv - 1) * (inner + 2 * groups * d_state) + inner * d_state) *
                                 sizeof(float);
  }
  report.context_length = meta_int(in, arch + ".context_length");
  report.head_dim = meta_int(in, arch + ".attention.key_length");
  if (report.head_dim == 0 && report.shape.n_head > 0)
    report.head_dim = meta_int(in, arch + ".embedding_length") / report.shape.n_head;

  Imatrix imatrix;
  QuantPlanOptions plan_opt = opt.plan;
  if (!opt.imatrix_path.empty()) {
    TM_ASSIGN_OR_RETURN(imatrix, load_imatrix(opt.imatrix_path));
    plan_opt.has_imatrix = true;
  }

  std::vector<QuantTensorDesc> descs;
  for (const GgufTensorInfo& t : in.tensors()) descs.push_back({t.name, t.ne, t.type});
  TM_ASSIGN_OR_RETURN(std::vector<QuantTensorPlan> plans, plan_tensor_types(opt.recipe, report.shape, descs, plan_opt));

  // Output metadata: everything from the input, in order, plus the file type and quantization version.
  GgufWriter w(static_cast<uint32_t>(in.alignment()));
  for (const auto& [k, v] : in.metadata()) w.set(k, v);
  for (const char* k : {"split.no", "split.count", "split.tensors.count"}) w.remove(k);
  w.set_u32("general.quantization_version", 2);
  w.set_u32("general.file_type", static_cast<uint32_t>(opt.recipe.ftype));
  if (plan_opt.has_imatrix) {
    w.set_string("quantize.imatrix.file", opt.imatrix_path);
    if (!imatrix.datasets.empty()) w.set_string("quantize.imatrix.dataset", imatrix.datasets.front());
    w.set_u32("quantize.imatrix.entries_count", static_cast<uint32_t>(imatrix.entries.size()));
    w.set_u32("quantize.imatrix.chunks_count", static_cast<uint32_t>(imatrix.chunk_count));
  }

  const auto& tensors = in.tensors();
  std::vector<Job> jobs(tensors.size());
  report.tensors.resize(tensors.size());
  int64_t total_convert = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    Job& job = jobs[i];
    job.info = &t;
    job.plan = plans[i];
    QuantTensorReport& rep = report.tensors[i];
    rep.name = t.name;
    rep.ne = t.ne;
    rep.from = t.type;
    rep.to = job.plan.target;
    rep.bytes_in = t.nbytes;
    rep.converted = job.plan.target != t.type;
    rep.note = job.plan.note;
    if (!rep.note.empty()) ++report.n_fallback;
    const auto row_bytes = dtype_row_bytes(rep.to, static_cast<uint64_t>(t.ne[0]));
    if (!row_bytes)
      return Error{fmt::format("tensor {}: rows of {} do not fit {}", t.name, t.ne[0], dtype_name(rep.to))};
    rep.bytes_out = *row_bytes * static_cast<uint64_t>(t.n_elements / t.ne[0]);
    if (rep.converted) total_convert += t.n_elements;
    if (rep.converted && plan_opt.has_imatrix && dtype_info(rep.to).quantized) {
      if (auto v = imatrix.importance(t.name)) {
        const int64_t n_mat = t.ne.size() >= 3 ? t.ne[2] : 1;
        if (static_cast<int64_t>(v->size()) == t.ne[0] * n_mat) {
          job.importance = std::move(*v);
          rep.used_imatrix = true;
        } else if (t.name != "token_embd.weight") {
          return Error{fmt::format("imatrix entry for {} has {} values, the tensor needs {}", t.name, v->size(),
                                   t.ne[0] * n_mat)};
        }
      } else {
        rep.note += std::string(rep.note.empty() ? "" : "; ") + "no imatrix entry";
      }
    }
    // llama.cpp: "Missing importance matrix for tensor ... in a very low-bit quantization"; and the
    // quantizers of IQ2_XXS, IQ2_XS and IQ1_S cannot run without one at all (ggml asserts).
    if (rep.converted && !job.importance &&
        (tensor_requires_imatrix(t.name, rep.to, opt.recipe.ftype) || quantize_needs_importance(rep.to)))
      return Error{fmt::format("tensor {}: no importance data for {} (a very low-bit type{}); {}", t.name,
                               dtype_name(rep.to), plan_opt.has_imatrix ? ": the imatrix has no entry for it" : "",
                               kImatrixHowTo)};
    report.bytes_in += rep.bytes_in;
    report.bytes_out += rep.bytes_out;
    report.n_elements += t.n_elements;
  }

  ThreadPool pool(opt.threads > 0 ? opt.threads : default_thread_count());
  std::vector<float> f32_buf;
  size_t done = 0;
  int64_t done_elems = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    TM_TRY(w.add_tensor(tensors[i].name, report.tensors[i].to, tensors[i].ne, [&, i](uint8_t* dst, size_t nbytes) -> Status {
      const Job& jb = jobs[i];
      QuantTensorReport& r = report.tensors[i];
      if (!r.converted) {
        std::memcpy(dst, jb.info->data, nbytes);
      } else {
        TM_TRY(convert_tensor(jb, dst, nbytes, pool, f32_buf, r));
        done_elems += jb.info->n_elements;
      }
      ++done;
      if (opt.progress) opt.progress(done, tensors.size(), done_elems, total_convert, r.name);
      return ok_status();
    }));
  }
  if (opt.output_sink) {
    TM_TRY(w.write_to([&](const void* p, size_t n) {
      report.file_bytes_out += n;
      return opt.output_sink(p, n);
    }));
  } else {
    TM_TRY(w.write(opt.output));
    std::error_code ec;
    report.file_bytes_out = std::filesystem::file_size(opt.output, ec);
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace tmill
