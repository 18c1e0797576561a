// LoRA adapters as the engine's public API sees them: what to load at start (LoraSpec) and what is
// loaded (LoraInfo). Requests name an adapter in GenerateRequest::lora.
#pragma once

#include <cstdint>
#include <string>

namespace tmill {

// An adapter to load when the engine starts (EngineConfig::loras).
struct LoraSpec {
  std::string name;  // what requests call it; "" = the file name without ".gguf"
  std::string path;  // llama.cpp's LoRA GGUF (convert_lora_to_gguf.py)
};

// One loaded adapter (Engine::loras, Engine::load_lora).
struct LoraInfo {
  std::string name;
  std::string path;
  uint64_t id = 0;         // unique per load in this engine (a reload under the same name gets a new one)
  int64_t rank = 0;        // the largest rank of its tensors
  float alpha = 0.0f;      // adapter.lora.alpha (0: none; the scale is then the request's alone)
  int64_t n_tensors = 0;   // adapted base tensors
  uint64_t bytes = 0;      // memory its float32 values take
};

}  // namespace tmill
