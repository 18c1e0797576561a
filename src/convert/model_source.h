// The model a command is given, made into the one GGUF file the engine maps (`serve MODEL`,
// `generate --model MODEL`, ...):
//   - a GGUF file: as it is;
//   - a split GGUF (llama.cpp's PREFIX-00001-of-0000N.gguf; any shard may be named): the shards
//     merged into one GGUF in memory;
//   - a Hugging Face model folder (config.json, *.safetensors, tokenizer.json, tokenizer_config.json):
//     converted in memory exactly as `tokenmill convert` writes it (the safetensors are mapped, the
//     GGUF layout is written to an in-memory file);
// then, when asked, the weights converted to another float type (`--dtype`) or quantized
// (`--quantization`) in memory exactly as `tokenmill quantize` writes them. The in-memory file is
// not evictable like a file's page cache: what the engine copies (repacked weights) is held twice.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/mmap.h"
#include "core/result.h"

namespace tmill {

struct ModelLoadOptions {
  // auto (the file's own types; an HF folder's 2-D weights keep their safetensors dtype), or the
  // type weights are converted to at load: float32 (float, f32), float16 (half, f16), bfloat16 (bf16).
  std::string dtype = "auto";
  // "" or a type of `tokenmill quantize` (q8_0, q4_0, q4_k_m, ...): the weights quantized at load.
  std::string quantization;
  int threads = 0;  // quantization threads (0: all cores)
  // Each stage's tensors as they are produced: stage ("convert", "merge", "dtype", "quantize"),
  // tensors done, tensor count, the tensor's name.
  std::function<void(const std::string&, size_t, size_t, const std::string&)> progress;
};

enum class ModelSourceKind { Gguf, SplitGguf, HfFolder };

struct PreparedModel {
  std::string path;  // what the engine opens: the file itself, or an in-memory file (/proc/self/fd/N)
  ModelSourceKind kind = ModelSourceKind::Gguf;
  std::string steps;  // what was done, for the log ("Hugging Face folder converted (BF16), quantized to Q8_0"); "" for none
  std::shared_ptr<MemoryFile> memory;  // holds the in-memory file until the engine has mapped it
  double seconds = 0;                  // time taken to prepare it
};

// A folder is a Hugging Face model folder; a PREFIX-NNNNN-of-MMMMM.gguf name a split GGUF.
ModelSourceKind model_source_kind(const std::string& path);

// Checks --dtype and --quantization without reading a model (so a command line fails at once):
// unknown values, another tool's formats (--quantization awq: refused naming it), both given for
// a GGUF.
Status check_model_load_options(const ModelLoadOptions& o);

Result<PreparedModel> prepare_model(const std::string& source, const ModelLoadOptions& o);

// The bytes the weights will take once prepared, without preparing them (memory planning before
// the load): a GGUF's size (all shards); an HF folder's safetensors, by the dtype they are
// converted to; with --quantization, estimated from the type's bits per weight.
Result<uint64_t> estimate_model_bytes(const std::string& source, const ModelLoadOptions& o);

}  // namespace tmill
