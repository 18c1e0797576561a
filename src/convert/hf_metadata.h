// Private to src/convert (hf_model.cpp): the metadata keys of a converted Hugging Face model.
#pragma once

#include "convert/hf_model.h"
#include "core/dtype.h"
#include "core/result.h"
#include "formats/gguf.h"

namespace tmill {

// general.*, the architecture's hyper-parameters, RoPE scaling and (opts.add_tokenizer) the tokenizer,
// as llama.cpp's convert_hf_to_gguf.py writes them; wtype: the 2-D weights' type (general.file_type),
// any_mxfp4: gpt-oss experts kept in MXFP4 (file type MOSTLY_MXFP4_MOE).
Status write_hf_metadata(const HfModel& m, const HfConvertOptions& opts, DType wtype, bool any_mxfp4, GgufWriter& w);

}  // namespace tmill
