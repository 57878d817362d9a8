// Flash-attention-2 structure in fp32 CUDA cores: a block owns kQueryTile query rows of one head
// of one sequence; it streams that sequence's K/V positions in tiles of 32 (one per lane) through
// shared memory, and each warp keeps, per query row, the running max, denominator and output
// (head_dim / 32 values per lane) in registers. Causality masks positions past each row's own.
#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/paged_prefill_attention.h"
#include "kernels/cuda/reduce.cuh"

namespace lm::kernels::cuda {
namespace {

constexpr int kQueryTile = 16;
constexpr int kKeyTile = 32;  // one key per lane when scoring
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kRowsPerWarp = kQueryTile / kWarps;

struct PrefillShape {
  int64_t max_blocks_per_seq;
  int64_t num_heads;
  int64_t group_size;
  int64_t kv_row;
  int64_t head_dim;
  int64_t block_size;
};

size_t shared_floats(int64_t head_dim) {
  // q tile, K tile padded by one float per row (lane j reads row j: no bank conflicts), V tile.
  return static_cast<size_t>(kQueryTile * head_dim + kKeyTile * (head_dim + 1) +
                             kKeyTile * head_dim);
}

// kDimsPerLane = ceil(head_dim / 32), a template so the accumulators stay in registers.
template <int kDimsPerLane>
__global__ void prefill_kernel(const float* q, const float* k_pool, const float* v_pool, float* out,
                               const int32_t* query_begins, const int32_t* first_positions,
                               const int32_t* block_tables, PrefillShape shape, float scale) {
  extern __shared__ float shared[];
  const int64_t seq = blockIdx.z;
  const int64_t head = blockIdx.y;
  const int64_t query_begin = query_begins[seq];
  const int64_t query_len = query_begins[seq + 1] - query_begin;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kQueryTile;
  if (row0 >= query_len) return;
  const int64_t num_rows = min(static_cast<int64_t>(kQueryTile), query_len - row0);
  const int64_t first_position = first_positions[seq] + row0;
  const int64_t num_positions = first_position + num_rows;  // the last row's view
  const int64_t head_dim = shape.head_dim;
  const int64_t k_stride = head_dim + 1;
  const int32_t* block_table = block_tables + seq * shape.max_blocks_per_seq;
  const int64_t kv_offset = (head / shape.group_size) * head_dim;

  float* q_tile = shared;                          // [kQueryTile][head_dim]
  float* k_tile = q_tile + kQueryTile * head_dim;  // [kKeyTile][head_dim + 1]
  float* v_tile = k_tile + kKeyTile * k_stride;    // [kKeyTile][head_dim]
  for (int64_t i = threadIdx.x; i < num_rows * head_dim; i += blockDim.x) {
    const int64_t r = i / head_dim;
    q_tile[i] = q[((query_begin + row0 + r) * shape.num_heads + head) * head_dim + i % head_dim];
  }

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  float running_max[kRowsPerWarp];
  float denominator[kRowsPerWarp];
  float acc[kRowsPerWarp][kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    running_max[i] = -INFINITY;
    denominator[i] = 0.0f;
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) acc[i][c] = 0.0f;
  }

  for (int64_t p0 = 0; p0 < num_positions; p0 += kKeyTile) {
    const int64_t tile = min(static_cast<int64_t>(kKeyTile), num_positions - p0);
    __syncthreads();  // the previous tile (and, first time, nothing) is no longer read
    for (int64_t i = threadIdx.x; i < tile * head_dim; i += blockDim.x) {
      const int64_t j = i / head_dim;
      const int64_t d = i % head_dim;
      const int64_t position = p0 + j;
      const int64_t slot =
          static_cast<int64_t>(block_table[position / shape.block_size]) * shape.block_size +
          position % shape.block_size;
      k_tile[j * k_stride + d] = k_pool[slot * shape.kv_row + kv_offset + d];
      v_tile[j * head_dim + d] = v_pool[slot * shape.kv_row + kv_offset + d];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp * kRowsPerWarp + i;
      if (r >= num_rows) break;  // uniform across the warp
      const int64_t position = first_position + r;
      float score = -INFINITY;
      if (lane < tile && p0 + lane <= position) {
        float dot = 0.0f;
        for (int64_t d = 0; d < head_dim; ++d)
          dot += q_tile[r * head_dim + d] * k_tile[lane * k_stride + d];
        score = dot * scale;
      }
      const float tile_max = warp_max(score);
      if (tile_max == -INFINITY) continue;  // every position of this tile is in this row's future
      const float new_max = fmaxf(running_max[i], tile_max);
      const float correction = expf(running_max[i] - new_max);  // 0 on the first tile
      const float weight = score == -INFINITY ? 0.0f : expf(score - new_max);
      denominator[i] = denominator[i] * correction + warp_sum(weight);
#pragma unroll
      for (int c = 0; c < kDimsPerLane; ++c) acc[i][c] *= correction;
      for (int j = 0; j < tile; ++j) {
        const float w = __shfl_sync(kFullMask, weight, j);
#pragma unroll
        for (int c = 0; c < kDimsPerLane; ++c) {
          const int64_t d = lane + 32 * c;
          if (d < head_dim) acc[i][c] += w * v_tile[j * head_dim + d];
        }
      }
      running_max[i] = new_max;
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp * kRowsPerWarp + i;
    if (r >= num_rows) break;
    float* out_row = out + ((query_begin + row0 + r) * shape.num_heads + head) * head_dim;
    const float inv_denominator = 1.0f / denominator[i];
#pragma unroll
    for (int c = 0; c < kDimsPerLane; ++c) {
      const int64_t d = lane + 32 * c;
      if (d < head_dim) out_row[d] = acc[i][c] * inv_denominator;
    }
  }
}

template <int kDimsPerLane>
void launch(const float* q, const float* k_pool, const float* v_pool, float* out,
            const int32_t* query_begins, const int32_t* first_positions,
            const int32_t* block_tables, const PrefillShape& shape, float scale, dim3 grid,
            cudaStream_t stream) {
  const size_t shared_bytes = shared_floats(shape.head_dim) * sizeof(float);
  // Past 48 KiB a kernel must opt in to more shared memory (sm_80+: up to 163 KiB).
  LM_CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<kDimsPerLane>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(shared_bytes)));
  prefill_kernel<kDimsPerLane><<<grid, kThreads, shared_bytes, stream>>>(
      q, k_pool, v_pool, out, query_begins, first_positions, block_tables, shape, scale);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void paged_prefill_attention(const float* q, const float* k_pool, const float* v_pool, float* out,
                             const int32_t* query_begins, const int32_t* first_positions,
                             const int32_t* block_tables, int64_t max_blocks_per_seq,
                             int64_t num_seqs, int64_t num_heads, int64_t num_kv_heads,
                             int64_t head_dim, int64_t block_size, float scale,
                             int64_t max_query_len, cudaStream_t stream) {
  LM_CHECK(num_seqs >= 0 && head_dim > 0 && head_dim <= kPrefillMaxHeadDim && block_size > 0);
  LM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0 && max_query_len >= 0);
  LM_CHECK(num_seqs <= 65535 && num_heads <= 65535);
  if (num_seqs == 0 || max_query_len == 0) return;
  const PrefillShape shape{max_blocks_per_seq,      num_heads, num_heads / num_kv_heads,
                           num_kv_heads * head_dim, head_dim,  block_size};
  const dim3 grid(static_cast<unsigned>((max_query_len + kQueryTile - 1) / kQueryTile),
                  static_cast<unsigned>(num_heads), static_cast<unsigned>(num_seqs));
  if (head_dim <= 64) {
    launch<2>(q, k_pool, v_pool, out, query_begins, first_positions, block_tables, shape, scale,
              grid, stream);
  } else if (head_dim <= 128) {
    launch<4>(q, k_pool, v_pool, out, query_begins, first_positions, block_tables, shape, scale,
              grid, stream);
  } else {
    launch<8>(q, k_pool, v_pool, out, query_begins, first_positions, block_tables, shape, scale,
              grid, stream);
  }
}

}  // namespace lm::kernels::cuda
