#include "convert/model_source.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "convert/hf_convert.h"
#include "convert/hf_tensor_plan.h"
#include "convert/model_quantizer.h"
#include "convert/quant_recipe.h"
#include "core/dtype.h"
#include "formats/gguf.h"
#include "formats/gguf_split.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"

namespace tmill {
namespace {

namespace fs = std::filesystem;

// --dtype as vLLM spells it (and as convert --outtype does) -> "auto", "f32", "f16", "bf16".
Result<std::string> float_type_of(const std::string& dtype) {
  if (dtype == "auto" || dtype.empty()) return std::string("auto");
  if (dtype == "float32" || dtype == "float" || dtype == "f32" || dtype == "F32") return std::string("f32");
  if (dtype == "float16" || dtype == "half" || dtype == "f16" || dtype == "F16") return std::string("f16");
  if (dtype == "bfloat16" || dtype == "bf16" || dtype == "BF16") return std::string("bf16");
  return Error{fmt::format("--dtype {}: expected auto, float16 (half), bfloat16 or float32 (float): the type the "
                           "weights are converted to at load; for a quantized type use --quantization (q8_0, q4_k_m, "
                           "...)",
                           dtype)};
}

// vLLM's --quantization names a checkpoint's own format (awq, gptq, compressed-tensors, fp8 and their
// kernels' spellings): the pre-quantized formats tokenmill converts, and whether an HF config is one.
std::optional<std::function<bool(const HfConfig&)>> checkpoint_format(const std::string& lower) {
  using P = HfConfig::Packed;
  if (lower == "awq" || lower == "awq_marlin") return [](const HfConfig& c) { return c.packed == P::Awq; };
  if (lower == "gptq" || lower == "gptq_marlin") return [](const HfConfig& c) { return c.packed == P::Gptq; };
  if (lower == "compressed_tensors")
    return [](const HfConfig& c) { return c.packed == P::CompressedTensors || c.scaled(); };
  if (lower == "fp8") return [](const HfConfig& c) { return c.fp8; };
  return std::nullopt;
}

// --quantization: a `tokenmill quantize` type (the weights quantized at load), or the checkpoint's own
// format (nullopt: loaded as it is; with `source`, checked to be that folder's format).
Result<std::optional<QuantRecipe>> quant_recipe_of(const std::string& q, const std::string& source = "") {
  if (q.empty()) return std::optional<QuantRecipe>{};
  auto r = recipe_from_name(q);
  if (r.ok()) return std::optional<QuantRecipe>{*r};
  std::string lower;
  for (char ch : q) lower += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch == '-' ? '_' : ch);
  const std::string format = hf_quant_format_name(lower);
  if (auto is_it = checkpoint_format(lower)) {
    if (source.empty()) return std::optional<QuantRecipe>{};
    std::error_code ec;
    auto c = fs::is_directory(source, ec) ? load_hf_config(source) : Result<HfConfig>(Error{"not a folder"});
    if (c.ok() && (*is_it)(*c)) return std::optional<QuantRecipe>{};
    return Error{fmt::format("--quantization {}: {} is no {} checkpoint (a Hugging Face folder whose config.json's "
                             "quantization_config says so); tokenmill loads such checkpoints without the flag, and "
                             "quantizes other weights at load to a GGUF type (q8_0, q4_0, q4_k_m, ...)",
                             q, source, format)};
  }
  if (format.front() != '\'')  // another tool's format: vLLM's --quantization bitsandbytes, modelopt, ...
    return Error{fmt::format("--quantization {}: tokenmill does not load {} weights; it quantizes at load to a GGUF "
                             "type instead (q8_0, q4_0, q4_k_m, q5_k_m, q6_k, ...)",
                             q, format)};
  return Error{"--quantization: " + r.error()};
}

// Bytes per element of a type (fractional for block types).
double bytes_per_element(DType t) { return static_cast<double>(*dtype_row_bytes(t, 256)) / 256.0; }

Status write_memory(const GgufWriter& w, MemoryFile& mem) {
  return w.write_to([&mem](const void* p, size_t n) { return mem.append(p, n); });
}

// Progress of one GgufWriter under a stage name.
void report_progress(GgufWriter& w, const ModelLoadOptions& o, const std::string& stage) {
  if (!o.progress) return;
  auto progress = o.progress;
  w.set_progress([progress, stage](size_t done, size_t n, const std::string& name) { progress(stage, done, n, name); });
}

Result<std::shared_ptr<MemoryFile>> merge_split(const std::string& path, const ModelLoadOptions& o) {
  TM_ASSIGN_OR_RETURN(std::vector<GgufFile> shards, open_gguf_split(path));
  GgufWriter w(static_cast<uint32_t>(shards[0].alignment()));
  for (const auto& [k, v] : shards[0].metadata())
    if (k.rfind("split.", 0) != 0) w.set(k, v);
  for (const GgufFile& s : shards)
    for (const GgufTensorInfo& t : s.tensors()) TM_TRY(w.add_tensor(t.name, t.type, t.ne, t.data));
  report_progress(w, o, "merge");
  TM_ASSIGN_OR_RETURN(MemoryFile mem, MemoryFile::create("tokenmill-model"));
  TM_TRY(write_memory(w, mem));  // the shards stay mapped until here
  return std::make_shared<MemoryFile>(std::move(mem));
}

// `input` (a path) converted by a recipe into a new in-memory file.
Result<std::shared_ptr<MemoryFile>> requantize(const std::string& input, const QuantRecipe& recipe, bool pure,
                                               const ModelLoadOptions& o, const std::string& stage) {
  TM_ASSIGN_OR_RETURN(MemoryFile mem, MemoryFile::create("tokenmill-model"));
  QuantizeModelOptions q;
  q.input = input;
  q.recipe = recipe;
  q.plan.pure = pure;
  q.threads = o.threads;
  q.output_sink = [&mem](const void* p, size_t n) { return mem.append(p, n); };
  if (o.progress) {
    auto progress = o.progress;
    q.progress = [progress, stage](size_t done, size_t n, int64_t, int64_t, const std::string& name) {
      progress(stage, done, n, name);
    };
  }
  TM_TRY(quantize_model(q));
  return std::make_shared<MemoryFile>(std::move(mem));
}

}  // namespace

ModelSourceKind model_source_kind(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return ModelSourceKind::HfFolder;
  if (gguf_split_paths(path)) return ModelSourceKind::SplitGguf;
  return ModelSourceKind::Gguf;
}

Status check_model_load_options(const ModelLoadOptions& o) {
  TM_TRY(float_type_of(o.dtype));
  TM_TRY(quant_recipe_of(o.quantization));
  return {};
}

Result<PreparedModel> prepare_model(const std::string& source, const ModelLoadOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  TM_ASSIGN_OR_RETURN(const std::string ftype, float_type_of(o.dtype));
  TM_ASSIGN_OR_RETURN(const std::optional<QuantRecipe> recipe, quant_recipe_of(o.quantization, source));
  PreparedModel p;
  p.kind = model_source_kind(source);
  p.path = source;
  std::vector<std::string> steps;
  if (p.kind == ModelSourceKind::HfFolder) {
    std::error_code ec;
    if (!fs::is_regular_file(fs::path(source) / "config.json", ec))
      return Error{fmt::format("{}: a folder without config.json: not a Hugging Face model folder", source)};
    TM_ASSIGN_OR_RETURN(MemoryFile mem, MemoryFile::create("tokenmill-model"));
    HfConvertOptions co;
    co.outtype = ftype;
    TM_TRY(convert_hf_model_with(source, co, [&](GgufWriter& w) -> Status {
      report_progress(w, o, "convert");
      return write_memory(w, mem);
    }));
    p.memory = std::make_shared<MemoryFile>(std::move(mem));
    steps.push_back(ftype == "auto" ? "Hugging Face folder converted in memory"
                                    : fmt::format("Hugging Face folder converted in memory to {}", ftype));
  } else {
    if (p.kind == ModelSourceKind::SplitGguf) {
      TM_ASSIGN_OR_RETURN(p.memory, merge_split(source, o));
      steps.push_back(fmt::format("{} shards merged in memory", gguf_split_paths(source)->size()));
    }
    if (ftype != "auto") {
      if (recipe)
        return Error{fmt::format("--dtype {} and --quantization {}: give one of them for a GGUF file", o.dtype,
                                 o.quantization)};
      TM_ASSIGN_OR_RETURN(QuantRecipe fr, recipe_from_name(ftype));
      const std::string input = p.memory ? p.memory->path() : source;
      TM_ASSIGN_OR_RETURN(p.memory, requantize(input, fr, /*pure=*/true, o, "dtype"));
      steps.push_back(fmt::format("weights converted to {}", fr.name));
    }
  }
  if (recipe) {
    const std::string input = p.memory ? p.memory->path() : source;
    TM_ASSIGN_OR_RETURN(p.memory, requantize(input, *recipe, /*pure=*/false, o, "quantize"));
    steps.push_back(fmt::format("quantized to {}", recipe->name));
  }
  if (p.memory) p.path = p.memory->path();
  for (const auto& s : steps) p.steps += (p.steps.empty() ? "" : ", ") + s;
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return p;
}

Result<uint64_t> estimate_model_bytes(const std::string& source, const ModelLoadOptions& o) {
  TM_ASSIGN_OR_RETURN(const std::string ftype, float_type_of(o.dtype));
  TM_ASSIGN_OR_RETURN(const std::optional<QuantRecipe> recipe, quant_recipe_of(o.quantization, source));
  // (elements, stored bytes) of every weight matrix, and the bytes of everything else
  double matrices = 0, other = 0;
  std::optional<DType> stored_as;
  const ModelSourceKind kind = model_source_kind(source);
  const auto config = kind == ModelSourceKind::HfFolder ? load_hf_config(source) : Result<HfConfig>(Error{"a file"});
  if (config.ok() && config->packed != HfConfig::Packed::None) {
    // packed integers: as the converter plans them (Q4 blocks or dequantized, read from their groups)
    TM_ASSIGN_OR_RETURN(const HfModel m, HfModel::open(source));
    TM_ASSIGN_OR_RETURN(const HfTensorPlan plan, HfTensorPlan::make(m));
    TM_ASSIGN_OR_RETURN(const DType wtype, plan.weight_type(ftype));
    const HfTensorPlan::Bytes b = plan.bytes(wtype);
    if (!recipe) return b.total;
    return static_cast<uint64_t>(static_cast<double>(b.total - b.matrices) +
                                 b.matrix_elements * bytes_per_element(recipe->default_type));
  }
  if (kind == ModelSourceKind::HfFolder) {
    TM_ASSIGN_OR_RETURN(SafetensorsModel w, SafetensorsModel::open(source));
    for (const std::string& name : w.names()) {
      const SafetensorsTensor& t = *w.find(name)->tensor;
      if (!st_dtype_is_float(t.dtype) && !st_dtype_is_fp8(t.dtype) && !(t.dtype == StDType::I8 && t.shape.size() == 2)) {
        // (gpt-oss's MXFP4 blocks and scales: kept as they are)
        other += static_cast<double>(t.nbytes());
        continue;
      }
      const double n = static_cast<double>(t.n_elements);
      if (t.shape.size() >= 2) {
        matrices += n;
        stored_as = stored_as.value_or(t.dtype == StDType::F32 ? DType::F32 : t.dtype == StDType::F16 ? DType::F16 : DType::BF16);
        // (FP8 and INT8 matrices are converted dequantized: BF16 unless --dtype says otherwise)
      } else {
        other += n * 4;
      }
    }
  } else {
    std::vector<std::string> paths{source};
    if (kind == ModelSourceKind::SplitGguf) paths = *gguf_split_paths(source);
    if (!recipe && ftype == "auto") {
      uint64_t total = 0;
      for (const auto& path : paths) {
        std::error_code ec;
        total += fs::file_size(path, ec);
        if (ec) return Error{fmt::format("cannot size the model file {}: {}", path, ec.message())};
      }
      return total;
    }
    for (const auto& path : paths) {
      TM_ASSIGN_OR_RETURN(GgufFile f, GgufFile::open(path));
      for (const GgufTensorInfo& t : f.tensors()) {
        if (t.ne.size() >= 2) matrices += static_cast<double>(t.n_elements);
        else other += static_cast<double>(t.nbytes);
      }
    }
  }
  DType target = stored_as.value_or(DType::F32);
  if (ftype == "f32") target = DType::F32;
  if (ftype == "f16") target = DType::F16;
  if (ftype == "bf16") target = DType::BF16;
  if (recipe) target = recipe->default_type;
  return static_cast<uint64_t>(matrices * bytes_per_element(target) + other);
}

}  // namespace tmill
