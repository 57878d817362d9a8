// Split-context decode attention. Kernel 1: a block per (head, sequence, partition) scores its
// positions into shared memory (a warp per position), takes the partition's softmax and its
// weighted sum of V rows (a thread per dimension, so V reads are coalesced). Kernel 2: merges the
// partitions with their maxima and denominators (the online-softmax combination rule), so the
// result equals one softmax over the whole context.
#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/paged_decode_attention.h"
#include "kernels/cuda/reduce.cuh"

namespace lm::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

struct DecodeShape {
  int64_t max_blocks_per_seq;
  int64_t num_heads;
  int64_t group_size;
  int64_t kv_row;  // floats per slot: num_kv_heads * head_dim
  int64_t head_dim;
  int64_t block_size;
  int64_t num_partitions;
};

__device__ __forceinline__ int64_t slot_of(const int32_t* block_table, int64_t position,
                                           int64_t block_size) {
  return static_cast<int64_t>(block_table[position / block_size]) * block_size +
         position % block_size;
}

// Writes the partition's normalized output (or the final output when there is one partition),
// plus its max score and denominator for the merge.
__global__ void decode_partition_kernel(const float* q, const float* k_pool, const float* v_pool,
                                        float* out, const int32_t* context_lens,
                                        const int32_t* block_tables, DecodeShape shape, float scale,
                                        float* partial_out, float* partial_max,
                                        float* partial_sum) {
  extern __shared__ float shared[];
  __shared__ float scratch[32];
  const int64_t head = blockIdx.x;
  const int64_t seq = blockIdx.y;
  const int64_t partition = blockIdx.z;
  const int64_t context_len = context_lens[seq];
  const int64_t begin = partition * kDecodePartitionSize;
  if (begin >= context_len) return;  // this sequence is shorter than the longest one
  const int64_t count = min(kDecodePartitionSize, context_len - begin);
  const int64_t head_dim = shape.head_dim;
  const int32_t* block_table = block_tables + seq * shape.max_blocks_per_seq;
  const int64_t kv_offset = (head / shape.group_size) * head_dim;
  const int64_t row = seq * shape.num_heads + head;  // (sequence, head) index

  float* q_shared = shared;           // [head_dim]
  float* scores = shared + head_dim;  // [kDecodePartitionSize]
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) q_shared[d] = q[row * head_dim + d];
  __syncthreads();

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  for (int64_t j = warp; j < count; j += kWarps) {
    const float* k_row =
        k_pool + slot_of(block_table, begin + j, shape.block_size) * shape.kv_row + kv_offset;
    float dot = 0.0f;
    for (int64_t d = lane; d < head_dim; d += 32) dot += q_shared[d] * k_row[d];
    dot = warp_sum(dot);
    if (lane == 0) scores[j] = dot * scale;
  }
  __syncthreads();

  float max_score = -INFINITY;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) max_score = fmaxf(max_score, scores[j]);
  max_score = block_max(max_score, scratch);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const float weight = expf(scores[j] - max_score);
    scores[j] = weight;
    sum += weight;
  }
  sum = block_sum(sum, scratch);  // its barriers also publish the weights

  const float inv_sum = 1.0f / sum;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < count; ++j) {
      const float* v_row =
          v_pool + slot_of(block_table, begin + j, shape.block_size) * shape.kv_row + kv_offset;
      acc += scores[j] * v_row[d];
    }
    if (shape.num_partitions == 1) {
      out[row * head_dim + d] = acc * inv_sum;
    } else {
      partial_out[(row * shape.num_partitions + partition) * head_dim + d] = acc * inv_sum;
    }
  }
  if (shape.num_partitions > 1 && threadIdx.x == 0) {
    partial_max[row * shape.num_partitions + partition] = max_score;
    partial_sum[row * shape.num_partitions + partition] = sum;
  }
}

// out = sum_p w_p * out_p / sum_p w_p with w_p = sum_p * exp(max_p - max): each partition's
// softmax rescaled to the global maximum.
__global__ void decode_merge_kernel(float* out, const int32_t* context_lens, DecodeShape shape,
                                    const float* partial_out, const float* partial_max,
                                    const float* partial_sum) {
  const int64_t head = blockIdx.x;
  const int64_t seq = blockIdx.y;
  const int64_t row = seq * shape.num_heads + head;
  const int64_t num_used = (context_lens[seq] + kDecodePartitionSize - 1) / kDecodePartitionSize;
  const float* maxima = partial_max + row * shape.num_partitions;
  const float* sums = partial_sum + row * shape.num_partitions;
  float global_max = -INFINITY;
  for (int64_t p = 0; p < num_used; ++p) global_max = fmaxf(global_max, maxima[p]);
  float denominator = 0.0f;
  for (int64_t p = 0; p < num_used; ++p) denominator += sums[p] * expf(maxima[p] - global_max);
  const float inv_denominator = 1.0f / denominator;
  for (int64_t d = threadIdx.x; d < shape.head_dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t p = 0; p < num_used; ++p) {
      const float weight = sums[p] * expf(maxima[p] - global_max);
      acc += weight * partial_out[(row * shape.num_partitions + p) * shape.head_dim + d];
    }
    out[row * shape.head_dim + d] = acc * inv_denominator;
  }
}

}  // namespace

int64_t decode_attention_num_partitions(int64_t max_context_len) {
  return (max_context_len + kDecodePartitionSize - 1) / kDecodePartitionSize;
}

int64_t decode_attention_workspace_floats(int64_t num_seqs, int64_t num_heads, int64_t head_dim,
                                          int64_t max_context_len) {
  const int64_t partitions = decode_attention_num_partitions(max_context_len);
  if (partitions <= 1) return 0;
  return num_seqs * num_heads * partitions * (head_dim + 2);
}

void paged_decode_attention(const float* q, const float* k_pool, const float* v_pool, float* out,
                            const int32_t* context_lens, const int32_t* block_tables,
                            int64_t max_blocks_per_seq, int64_t num_seqs, int64_t num_heads,
                            int64_t num_kv_heads, int64_t head_dim, int64_t block_size, float scale,
                            int64_t max_context_len, float* workspace, cudaStream_t stream) {
  LM_CHECK(num_seqs >= 0 && head_dim > 0 && block_size > 0 && max_context_len > 0);
  LM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0);
  LM_CHECK(max_context_len <= max_blocks_per_seq * block_size);
  LM_CHECK(num_seqs <= 65535);
  if (num_seqs == 0) return;
  DecodeShape shape{max_blocks_per_seq,
                    num_heads,
                    num_heads / num_kv_heads,
                    num_kv_heads * head_dim,
                    head_dim,
                    block_size,
                    decode_attention_num_partitions(max_context_len)};
  float* partial_out = nullptr;
  float* partial_max = nullptr;
  float* partial_sum = nullptr;
  if (shape.num_partitions > 1) {
    LM_CHECK_MSG(workspace != nullptr, "paged_decode_attention: workspace needed");
    partial_out = workspace;
    partial_max = partial_out + num_seqs * num_heads * shape.num_partitions * head_dim;
    partial_sum = partial_max + num_seqs * num_heads * shape.num_partitions;
  }
  const dim3 grid(static_cast<unsigned>(num_heads), static_cast<unsigned>(num_seqs),
                  static_cast<unsigned>(shape.num_partitions));
  const size_t shared_bytes = static_cast<size_t>(head_dim + kDecodePartitionSize) * sizeof(float);
  LM_CHECK(shared_bytes <= 48 * 1024);
  decode_partition_kernel<<<grid, kThreads, shared_bytes, stream>>>(
      q, k_pool, v_pool, out, context_lens, block_tables, shape, scale, partial_out, partial_max,
      partial_sum);
  LM_CUDA_CHECK(cudaGetLastError());
  if (shape.num_partitions > 1) {
    decode_merge_kernel<<<dim3(static_cast<unsigned>(num_heads), static_cast<unsigned>(num_seqs)),
                          kThreads, 0, stream>>>(out, context_lens, shape, partial_out, partial_max,
                                                 partial_sum);
    LM_CUDA_CHECK(cudaGetLastError());
  }
}

}  // namespace lm::kernels::cuda
