// Top-k: a four-pass radix select on the order-preserving integer image of each float (8 bits per
// pass, a shared histogram per row) finds the exact k-th largest value. Top-p and typical-p need
// a rank order, so each row is sorted (CUB's segmented radix sort: stable, ascending, ids as
// values) and one block per row scans the sorted probabilities in double, like the CPU's double
// mass, to find the cut.
#include <cub/block/block_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include <algorithm>
#include <climits>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/logit_warpers.h"
#include "kernels/cuda/reduce.cuh"

namespace lm::kernels::cuda {
namespace {

constexpr int kThreads = 1024;  // one block per row for the row-wide kernels

// Monotone map float -> uint32: a < b as floats iff key(a) < key(b) (with -0 just below +0).
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t bits = __float_as_uint(x);
  return (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
}

__device__ __forceinline__ float key_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? key & 0x7fffffffu : ~key);
}

__global__ void top_k_kernel(float* logits, int64_t vocab, const int32_t* top_k) {
  __shared__ uint32_t histogram[256];
  __shared__ uint32_t prefix;
  __shared__ int64_t remaining;  // rank of the wanted value among those matching the prefix
  const int64_t row = blockIdx.x;
  const int64_t k = top_k[row];
  if (k <= 0 || k >= vocab) return;
  float* scores = logits + row * vocab;
  if (threadIdx.x == 0) {
    prefix = 0;
    remaining = k;
  }
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) histogram[i] = 0;
    __syncthreads();
    // Only keys that agree with the chosen digits above `shift + 8` are counted.
    const uint32_t high_mask = shift == 24 ? 0u : ~((1u << (shift + 8)) - 1u);
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      const uint32_t key = order_key(scores[i]);
      if ((key & high_mask) == prefix) atomicAdd(&histogram[(key >> shift) & 0xffu], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // from the largest digit down, find the one holding rank `remaining`
      int64_t above = 0;
      int digit = 255;
      for (; digit > 0; --digit) {
        if (above + histogram[digit] >= remaining) break;
        above += histogram[digit];
      }
      remaining -= above;
      prefix |= static_cast<uint32_t>(digit) << shift;
    }
    __syncthreads();
  }
  const float kth_value = key_value(prefix);
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (scores[i] < kth_value) scores[i] = -INFINITY;
  }
}

// Device workspace of the sort-based warpers, carved from one allocation.
struct SortBuffers {
  float* keys_in;    // [rows * vocab] sort keys (score, or |-log p - entropy|)
  float* keys_out;   // [rows * vocab] sorted keys
  int32_t* ids_in;   // [rows * vocab] 0..vocab-1 per row
  int32_t* ids_out;  // [rows * vocab] ids in ascending key order
  float* probs;      // [rows * vocab] softmax probability by id
  int32_t* offsets;  // [rows + 1] segment starts
  float* row_max;    // [rows] -inf marks a row with nothing left to filter
  void* sort_temp;   // CUB's scratch
  size_t sort_temp_bytes;
};

size_t align_up(size_t bytes) { return (bytes + 255) / 256 * 256; }

size_t cub_temp_bytes(int64_t num_rows, int64_t vocab) {
  size_t bytes = 0;
  LM_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      nullptr, bytes, static_cast<const float*>(nullptr), static_cast<float*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<int>(num_rows * vocab), static_cast<int>(num_rows),
      static_cast<const int32_t*>(nullptr), static_cast<const int32_t*>(nullptr)));
  return bytes;
}

SortBuffers carve(void* workspace, size_t workspace_bytes, int64_t num_rows, int64_t vocab) {
  const auto n = static_cast<size_t>(num_rows * vocab);
  auto* base = static_cast<char*>(workspace);
  size_t used = 0;
  auto take = [&](size_t bytes) {
    char* p = base + used;
    used += align_up(bytes);
    return p;
  };
  SortBuffers b{};
  b.keys_in = reinterpret_cast<float*>(take(n * sizeof(float)));
  b.keys_out = reinterpret_cast<float*>(take(n * sizeof(float)));
  b.ids_in = reinterpret_cast<int32_t*>(take(n * sizeof(int32_t)));
  b.ids_out = reinterpret_cast<int32_t*>(take(n * sizeof(int32_t)));
  b.probs = reinterpret_cast<float*>(take(n * sizeof(float)));
  b.offsets = reinterpret_cast<int32_t*>(take(static_cast<size_t>(num_rows + 1) * sizeof(int32_t)));
  b.row_max = reinterpret_cast<float*>(take(static_cast<size_t>(num_rows) * sizeof(float)));
  b.sort_temp_bytes = cub_temp_bytes(num_rows, vocab);
  b.sort_temp = take(b.sort_temp_bytes);
  LM_CHECK_MSG(used <= workspace_bytes, "logit warper workspace too small");
  return b;
}

// Softmax of the row (probabilities as the CPU computes them: float(expf(x - max) / double sum))
// and the sort keys: the scores for top-p; for typical-p |-logprob - entropy|, with +inf for
// filtered ids so they sort last and carry no mass.
template <bool kTypical>
__global__ void prepare_kernel(const float* logits, int64_t num_rows, int64_t vocab,
                               SortBuffers b) {
  __shared__ float scratch_f[32];
  __shared__ double scratch_d[32];
  const int64_t row = blockIdx.x;
  const float* scores = logits + row * vocab;
  const int64_t base = row * vocab;
  if (threadIdx.x == 0) b.offsets[row] = static_cast<int32_t>(base);
  if (row == 0 && threadIdx.x == 0) b.offsets[num_rows] = static_cast<int32_t>(num_rows * vocab);
  float max = -INFINITY;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) max = fmaxf(max, scores[i]);
  max = block_max(max, scratch_f);
  if (threadIdx.x == 0) b.row_max[row] = max;
  double sum = 0.0;
  if (max != -INFINITY) {
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) sum += expf(scores[i] - max);
  }
  sum = block_sum(sum, scratch_d);
  const float log_sum = static_cast<float>(log(sum));
  double neg_entropy = 0.0;
  if (kTypical && max != -INFINITY) {
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      if (scores[i] == -INFINITY) continue;
      const float logprob = (scores[i] - max) - log_sum;
      neg_entropy += static_cast<double>(logprob) * expf(logprob);
    }
    neg_entropy = block_sum(neg_entropy, scratch_d);
  }
  const float entropy = static_cast<float>(-neg_entropy);
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float x = scores[i];
    const bool live = x != -INFINITY && max != -INFINITY;
    b.probs[base + i] = live ? static_cast<float>(expf(x - max) / sum) : 0.0f;
    b.ids_in[base + i] = static_cast<int32_t>(i);
    if (kTypical) {
      b.keys_in[base + i] = live ? fabsf(-((x - max) - log_sum) - entropy) : INFINITY;
    } else {
      b.keys_in[base + i] = x;
    }
  }
}

// Scans the row's sorted probabilities in double and returns (to every thread) the first sorted
// index whose inclusive mass satisfies `stop(float mass)`, or vocab if none does.
template <typename Stop>
__device__ int64_t first_index_where(const SortBuffers& b, int64_t base, int64_t vocab, Stop stop) {
  using BlockScan = cub::BlockScan<double, kThreads>;
  __shared__ typename BlockScan::TempStorage scan_storage;
  __shared__ long long found;
  if (threadIdx.x == 0) found = LLONG_MAX;
  __syncthreads();
  double carried = 0.0;
  for (int64_t tile = 0; tile < vocab; tile += kThreads) {
    const int64_t i = tile + threadIdx.x;
    const double prob = i < vocab ? static_cast<double>(b.probs[base + b.ids_out[base + i]]) : 0.0;
    double inclusive;
    double tile_total;
    BlockScan(scan_storage).InclusiveSum(prob, inclusive, tile_total);
    if (i < vocab && stop(static_cast<float>(carried + inclusive)))
      atomicMin(&found, static_cast<long long>(i));
    carried += tile_total;
    __syncthreads();
    if (found != LLONG_MAX) break;
  }
  return found == LLONG_MAX ? vocab : static_cast<int64_t>(found);
}

__global__ void top_p_cut_kernel(float* logits, int64_t vocab, const float* top_p, SortBuffers b) {
  const int64_t row = blockIdx.x;
  if (top_p[row] >= 1.0f || b.row_max[row] == -INFINITY) return;
  const int64_t base = row * vocab;
  // Ascending order: HF drops while the cumulative sum is <= 1 - top_p, never the best (last).
  const float opposite = 1.0f - top_p[row];
  const int64_t first_kept =
      min(first_index_where(b, base, vocab, [opposite](float mass) { return mass > opposite; }),
          vocab - 1);
  for (int64_t i = threadIdx.x; i < first_kept; i += blockDim.x)
    logits[base + b.ids_out[base + i]] = -INFINITY;
}

__global__ void typical_cut_kernel(float* logits, int64_t vocab, const float* typical_p,
                                   SortBuffers b) {
  const int64_t row = blockIdx.x;
  const float mass_wanted = typical_p[row];
  if (mass_wanted >= 1.0f || b.row_max[row] == -INFINITY) return;
  const int64_t base = row * vocab;
  const int64_t last =
      first_index_where(b, base, vocab, [mass_wanted](float mass) { return mass >= mass_wanted; });
  if (last >= vocab) return;  // the mass never reached typical_p (rounding): keep all, as HF
  // Cut by value: every id whose key equals the last kept one's stays.
  const float threshold = b.keys_out[base + last];
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    if (logits[base + i] != -INFINITY && b.keys_in[base + i] > threshold)
      logits[base + i] = -INFINITY;
  }
}

template <bool kTypical>
void run_sorted_warper(float* logits, int64_t num_rows, int64_t vocab, const float* param,
                       void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && vocab > 0 && num_rows * vocab <= INT_MAX);
  if (num_rows == 0) return;
  const SortBuffers b = carve(workspace, workspace_bytes, num_rows, vocab);
  const auto rows = static_cast<unsigned>(num_rows);
  prepare_kernel<kTypical><<<rows, kThreads, 0, stream>>>(logits, num_rows, vocab, b);
  LM_CUDA_CHECK(cudaGetLastError());
  size_t temp_bytes = b.sort_temp_bytes;
  LM_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      b.sort_temp, temp_bytes, b.keys_in, b.keys_out, b.ids_in, b.ids_out,
      static_cast<int>(num_rows * vocab), static_cast<int>(num_rows), b.offsets, b.offsets + 1, 0,
      static_cast<int>(sizeof(float) * 8), stream));
  if (kTypical) {
    typical_cut_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, param, b);
  } else {
    top_p_cut_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab, param, b);
  }
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void apply_top_k(float* logits, int64_t num_rows, int64_t vocab, const int32_t* top_k,
                 cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && vocab > 0);
  if (num_rows == 0) return;
  top_k_kernel<<<static_cast<unsigned>(num_rows), kThreads, 0, stream>>>(logits, vocab, top_k);
  LM_CUDA_CHECK(cudaGetLastError());
}

size_t warper_workspace_bytes(int64_t num_rows, int64_t vocab) {
  LM_CHECK(num_rows >= 0 && vocab > 0 && num_rows * vocab <= INT_MAX);
  const auto n = static_cast<size_t>(num_rows * vocab);
  return 4 * align_up(n * 4) + align_up(n * 4) + align_up(static_cast<size_t>(num_rows + 1) * 4) +
         align_up(static_cast<size_t>(num_rows) * 4) + align_up(cub_temp_bytes(num_rows, vocab));
}

void apply_top_p(float* logits, int64_t num_rows, int64_t vocab, const float* top_p,
                 void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  run_sorted_warper<false>(logits, num_rows, vocab, top_p, workspace, workspace_bytes, stream);
}

void apply_typical_p(float* logits, int64_t num_rows, int64_t vocab, const float* typical_p,
                     void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  run_sorted_warper<true>(logits, num_rows, vocab, typical_p, workspace, workspace_bytes, stream);
}

}  // namespace lm::kernels::cuda
