// Importance-matrix files: load and save an Imatrix (quant/imatrix.h).
//
// File format: llama.cpp's GGUF imatrix format, so files are interchangeable with llama-imatrix /
// llama-quantize:
//   metadata  general.type          string   "imatrix"
//             imatrix.datasets      [string] calibration sources
//             imatrix.chunk_count   u32      number of chunks processed
//             imatrix.chunk_size    u32      tokens per chunk
//   tensors   "<weight name>.in_sum2"  F32 ne = [n_cols, n_mat]  sum over tokens of x_j^2 per column
//             "<weight name>.counts"   F32 ne = [1, n_mat]       number of tokens summed
//   (n_mat is the number of experts for a 3-D MoE weight, else 1; other tensors are ignored.)
// The importance of column j of matrix m is in_sum2[m][j] / counts[m] (1 when counts is 0), the
// mean squared activation. load_imatrix also reads llama.cpp's legacy binary ".dat" format.
#pragma once

#include <string>

#include "core/result.h"
#include "quant/imatrix.h"

namespace tmill {

Result<Imatrix> load_imatrix(const std::string& path);
Status save_imatrix(const Imatrix& m, const std::string& path);

}  // namespace tmill
