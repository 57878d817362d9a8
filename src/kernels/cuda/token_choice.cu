// One block per row. Arg-max reductions order pairs by (score desc, id asc), so ties resolve to
// the lowest id as torch.argmax does. The draw scans weights in id order with a block-wide
// inclusive scan in double (the CPU sums sequentially in double; only a target sitting within
// rounding of a cumulative boundary can choose differently).
#include <cub/block/block_scan.cuh>

#include <climits>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/reduce.cuh"
#include "kernels/cuda/token_choice.h"

namespace lm::kernels::cuda {
namespace {

constexpr int kThreads = 1024;

struct Candidate {
  float score;
  int32_t id;
};

__device__ __forceinline__ bool better(Candidate a, Candidate b) {
  return a.score > b.score || (a.score == b.score && a.id < b.id);
}

__device__ Candidate block_best(Candidate c, float* scratch_score, int32_t* scratch_id) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Candidate other{__shfl_xor_sync(kFullMask, c.score, offset),
                          __shfl_xor_sync(kFullMask, c.id, offset)};
    if (better(other, c)) c = other;
  }
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  if (lane == 0) {
    scratch_score[warp] = c.score;
    scratch_id[warp] = c.id;
  }
  __syncthreads();
  const int num_warps = blockDim.x / 32;
  c = lane < num_warps ? Candidate{scratch_score[lane], scratch_id[lane]}
                       : Candidate{-INFINITY, INT_MAX};
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Candidate other{__shfl_xor_sync(kFullMask, c.score, offset),
                          __shfl_xor_sync(kFullMask, c.id, offset)};
    if (better(other, c)) c = other;
  }
  __syncthreads();
  return c;
}

__global__ void stats_kernel(const float* logits, int64_t vocab, RowSoftmaxStats stats) {
  __shared__ float scratch_score[32];
  __shared__ int32_t scratch_id[32];
  __shared__ double scratch_sum[32];
  const int64_t row = blockIdx.x;
  const float* scores = logits + row * vocab;
  Candidate best{-INFINITY, INT_MAX};
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const Candidate c{scores[i], static_cast<int32_t>(i)};
    if (better(c, best)) best = c;
  }
  best = block_best(best, scratch_score, scratch_id);
  double sum = 0.0;
  if (best.score != -INFINITY) {
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) sum += expf(scores[i] - best.score);
  }
  sum = block_sum(sum, scratch_sum);
  if (threadIdx.x == 0) {
    stats.max[row] = best.score;
    stats.argmax[row] = best.score == -INFINITY ? 0 : best.id;
    stats.sum_exp[row] = sum;
    stats.log_sum[row] = best.score == -INFINITY ? -INFINITY : static_cast<float>(log(sum));
  }
}

__device__ __forceinline__ float logprob_of(float score, float max, float log_sum) {
  return max == -INFINITY ? -INFINITY : (score - max) - log_sum;
}

__global__ void choose_kernel(const float* logits, int64_t vocab, RowSoftmaxStats stats,
                              const uint8_t* is_random, const double* uniforms, int32_t* ids,
                              float* logprobs) {
  using BlockScan = cub::BlockScan<double, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ long long found;
  __shared__ int last_nonzero;
  const int64_t row = blockIdx.x;
  const float* scores = logits + row * vocab;
  const float max = stats.max[row];
  int32_t chosen = stats.argmax[row];
  if (is_random[row] != 0 && max != -INFINITY) {
    const double target = uniforms[row] * stats.sum_exp[row];
    if (threadIdx.x == 0) {
      found = LLONG_MAX;
      last_nonzero = chosen;
    }
    __syncthreads();
    double carried = 0.0;
    for (int64_t tile = 0; tile < vocab; tile += kThreads) {
      const int64_t i = tile + threadIdx.x;
      const float weight = i < vocab ? expf(scores[i] - max) : 0.0f;
      double inclusive;
      double tile_total;
      BlockScan(scan_storage).InclusiveSum(static_cast<double>(weight), inclusive, tile_total);
      if (weight != 0.0f) {
        atomicMax(&last_nonzero, static_cast<int>(i));
        if (carried + inclusive > target) atomicMin(&found, static_cast<long long>(i));
      }
      carried += tile_total;
      __syncthreads();
      if (found != LLONG_MAX) break;
    }
    chosen = found != LLONG_MAX ? static_cast<int32_t>(found) : last_nonzero;
  }
  if (threadIdx.x == 0) {
    ids[row] = chosen;
    logprobs[row] = logprob_of(scores[chosen], max, stats.log_sum[row]);
  }
}

__global__ void top_n_kernel(const float* logits, int64_t vocab, int32_t top_n,
                             RowSoftmaxStats stats, int32_t* top_ids, float* top_logprobs,
                             int32_t* counts) {
  __shared__ float scratch_score[32];
  __shared__ int32_t scratch_id[32];
  const int64_t row = blockIdx.x;
  const float* scores = logits + row * vocab;
  const float max = stats.max[row];
  const float log_sum = stats.log_sum[row];
  // Round r takes the best id ranked strictly after round r - 1's pick.
  Candidate previous{INFINITY, -1};
  int32_t count = 0;
  for (; count < top_n; ++count) {
    Candidate best{-INFINITY, INT_MAX};
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const Candidate c{scores[i], static_cast<int32_t>(i)};
      if (better(previous, c) && better(c, best)) best = c;
    }
    best = block_best(best, scratch_score, scratch_id);
    if (best.score == -INFINITY) break;
    if (threadIdx.x == 0) {
      top_ids[row * top_n + count] = best.id;
      top_logprobs[row * top_n + count] = logprob_of(best.score, max, log_sum);
    }
    previous = best;
  }
  if (threadIdx.x == 0) counts[row] = count;
}

}  // namespace

void log_softmax_stats(const float* logits, int64_t num_rows, int64_t vocab, RowSoftmaxStats stats,
                       cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && vocab > 0 && vocab <= INT_MAX);
  if (num_rows == 0) return;
  stats_kernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(logits, vocab, stats);
  LM_CUDA_CHECK(cudaGetLastError());
}

void choose_tokens(const float* logits, int64_t num_rows, int64_t vocab, RowSoftmaxStats stats,
                   const uint8_t* is_random, const double* uniforms, int32_t* ids, float* logprobs,
                   cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && vocab > 0 && vocab <= INT_MAX);
  if (num_rows == 0) return;
  choose_kernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(
      logits, vocab, stats, is_random, uniforms, ids, logprobs);
  LM_CUDA_CHECK(cudaGetLastError());
}

void top_n_logprobs(const float* logits, int64_t num_rows, int64_t vocab, int32_t top_n,
                    RowSoftmaxStats stats, int32_t* top_ids, float* top_logprobs, int32_t* counts,
                    cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && vocab > 0 && vocab <= INT_MAX && top_n >= 0);
  if (num_rows == 0) return;
  top_n_kernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(
      logits, vocab, top_n, stats, top_ids, top_logprobs, counts);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lm::kernels::cuda
