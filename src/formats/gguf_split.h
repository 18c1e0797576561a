// llama.cpp's split GGUF (its gguf-split tool): PREFIX-00001-of-00003.gguf, PREFIX-00002-of-00003.gguf,
// ... Each shard is a GGUF file; the first holds the model's metadata, every shard holds split.no
// (u16, 0-based), split.count (u16) and split.tensors.count (i32, all shards' tensors) and its own
// share of the tensors, in order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "formats/gguf.h"

namespace tmill {

// The shard paths, in order, when the file name is PREFIX-NNNNN-of-MMMMM.gguf with MMMMM > 1 (any
// shard may be named); nullopt for any other name.
std::optional<std::vector<std::string>> gguf_split_paths(const std::string& path);

// Opens every shard of a split GGUF and checks that they belong together: split.no is the shard's
// position, split.count the number of shards, split.tensors.count the tensors of all shards, no
// tensor name twice. Errors name the shard at fault (a missing shard: its path).
Result<std::vector<GgufFile>> open_gguf_split(const std::string& path);

}  // namespace tmill
