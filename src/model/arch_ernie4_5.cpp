// ERNIE 4.5 dense (GGUF "ernie4_5": ERNIE-4.5-0.3B): the llama block -- RoPE on adjacent pairs, GQA,
// SwiGLU, tied or untied output. (Its mixture-of-experts sibling, ernie4_5-moe, is another
// architecture.)
#include "model/config.h"

namespace tmill {
ArchSpec arch_ernie4_5() { return {"ernie4_5", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false}; }
}  // namespace tmill
