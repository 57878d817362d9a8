// Embedding gather: one block per token, threads stride over the hidden dimension so that each
// warp reads and writes contiguous memory.
#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/embedding.h"

#include <cuda_fp16.h>

namespace lm::kernels::cuda {
namespace {

__device__ __forceinline__ float load_element(RowFormat format, const uint8_t* row, int64_t i) {
  if (format == RowFormat::kF32) return reinterpret_cast<const float*>(row)[i];
  const unsigned short bits = reinterpret_cast<const unsigned short*>(row)[i];
  if (format == RowFormat::kF16) return __half2float(__ushort_as_half(bits));
  return __bfloat162float(__ushort_as_bfloat16(bits));
}

__device__ __forceinline__ void store_element(float* out, int64_t i, float v) { out[i] = v; }
__device__ __forceinline__ void store_element(__nv_bfloat16* out, int64_t i, float v) {
  out[i] = __float2bfloat16_rn(v);
}

template <typename Out>
__global__ void embedding_gather_kernel(RowFormat format, const uint8_t* table,
                                        int64_t table_row_bytes, const int32_t* ids, Out* out,
                                        int64_t hidden_size) {
  const int64_t token = blockIdx.x;
  const uint8_t* row = table + static_cast<int64_t>(ids[token]) * table_row_bytes;
  Out* out_row = out + token * hidden_size;
  for (int64_t i = threadIdx.x; i < hidden_size; i += blockDim.x)
    store_element(out_row, i, load_element(format, row, i));
}

template <typename Out>
void launch(RowFormat format, const void* table, int64_t table_row_bytes, const int32_t* ids,
            Out* out, int64_t num_tokens, int64_t hidden_size, cudaStream_t stream) {
  LM_CHECK_MSG(format == RowFormat::kF32 || format == RowFormat::kF16 || format == RowFormat::kBF16,
               "embedding_gather: table must be f32, f16 or bf16");
  LM_CHECK(num_tokens >= 0 && hidden_size > 0);
  if (num_tokens == 0) return;
  embedding_gather_kernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(
      format, static_cast<const uint8_t*>(table), table_row_bytes, ids, out, hidden_size);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void embedding_gather(RowFormat format, const void* table, int64_t table_row_bytes,
                      const int32_t* ids, float* out, int64_t num_tokens, int64_t hidden_size,
                      cudaStream_t stream) {
  launch(format, table, table_row_bytes, ids, out, num_tokens, hidden_size, stream);
}

void embedding_gather_bf16(RowFormat format, const void* table, int64_t table_row_bytes,
                           const int32_t* ids, __nv_bfloat16* out, int64_t num_tokens,
                           int64_t hidden_size, cudaStream_t stream) {
  launch(format, table, table_row_bytes, ids, out, num_tokens, hidden_size, stream);
}

}  // namespace lm::kernels::cuda
