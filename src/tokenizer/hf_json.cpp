#include "tokenizer/tokenizer.h"
namespace tmill {
Result<std::shared_ptr<Tokenizer>> Tokenizer::from_hf_dir(const std::string& dir) { return Error{"todo"}; }
Status hf_tokenizer_to_gguf(const std::string& hf_dir, GgufWriter& w) { return Error{"todo"}; }
}
