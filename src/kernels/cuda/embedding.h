// Token embedding lookup on the device: gathers table rows into activations.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/cpu/row_format.h"

namespace lm::kernels::cuda {

// out: [num_tokens, hidden_size]; row t = the table row of ids[t] converted from `format` (kF32,
// kF16 or kBF16; row j at table + j * table_row_bytes). The CPU twin is dequantize_row on each
// row. Ids must be valid rows (the server validated them against the vocab).
void embedding_gather(RowFormat format, const void* table, int64_t table_row_bytes,
                      const int32_t* ids, float* out, int64_t num_tokens, int64_t hidden_size,
                      cudaStream_t stream);

// The same with bf16 activations (rounded to nearest even), for a bf16 forward.
void embedding_gather_bf16(RowFormat format, const void* table, int64_t table_row_bytes,
                           const int32_t* ids, __nv_bfloat16* out, int64_t num_tokens,
                           int64_t hidden_size, cudaStream_t stream);

}  // namespace lm::kernels::cuda
