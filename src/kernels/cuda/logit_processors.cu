// Elementwise processors: the penalties touch only each row's distinct ids (one thread per id, so
// no two threads write the same logit); sanitize and temperature are grid-stride maps.
#include <algorithm>
#include <cfloat>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/logit_processors.h"

namespace lm::kernels::cuda {
namespace {

__global__ void sanitize_kernel(float* logits, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float x = logits[i];
    if (isnan(x)) {
      logits[i] = -INFINITY;
    } else if (x > FLT_MAX) {
      logits[i] = FLT_MAX;
    }
  }
}

__global__ void penalties_kernel(float* logits, int64_t vocab, const int32_t* token_begins,
                                 const int32_t* token_ids, const int32_t* token_counts,
                                 const int64_t* num_ids, const float* repetition_penalty,
                                 const float* frequency_penalty, const float* presence_penalty) {
  const int64_t row = blockIdx.x;
  const float repetition = repetition_penalty[row];
  const float frequency_weight = frequency_penalty[row];
  const float presence = presence_penalty[row];
  const bool repeat = repetition != 1.0f;
  const bool frequency_presence =
      (frequency_weight != 0.0f || presence != 0.0f) && num_ids[row] > 0;
  if (!repeat && !frequency_presence) return;
  float* scores = logits + row * vocab;
  for (int64_t i = token_begins[row] + threadIdx.x; i < token_begins[row + 1]; i += blockDim.x) {
    const int32_t id = token_ids[i];
    if (id < 0 || id >= vocab) continue;
    float x = scores[id];
    if (repeat) x = fminf(x < 0.0f ? x * repetition : x / repetition, FLT_MAX);
    if (frequency_presence) {
      const float frequency =
          static_cast<float>(token_counts[i]) / static_cast<float>(num_ids[row]);
      // __fmul_rn keeps nvcc from fusing this into an FMA: the CPU rounds the product first.
      x -= __fmul_rn(frequency, frequency_weight);
      x -= presence;
      x = fminf(x, FLT_MAX);
    }
    scores[id] = x;
  }
}

__global__ void temperature_kernel(float* logits, int64_t vocab, const float* temperature) {
  const int64_t row = blockIdx.y;
  const float t = temperature[row];
  if (t == 1.0f) return;
  float* scores = logits + row * vocab;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vocab;
       i += int64_t{gridDim.x} * blockDim.x)
    scores[i] = fminf(scores[i] / t, FLT_MAX);
}

}  // namespace

void sanitize_scores(float* logits, int64_t num_rows, int64_t vocab, cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && vocab > 0);
  const int64_t n = num_rows * vocab;
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 4096);
  sanitize_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(logits, n);
  LM_CUDA_CHECK(cudaGetLastError());
}

void apply_penalties(float* logits, int64_t num_rows, int64_t vocab, const int32_t* token_begins,
                     const int32_t* token_ids, const int32_t* token_counts, const int64_t* num_ids,
                     const float* repetition_penalty, const float* frequency_penalty,
                     const float* presence_penalty, cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && vocab > 0);
  if (num_rows == 0) return;
  penalties_kernel<<<static_cast<unsigned>(num_rows), 256, 0, stream>>>(
      logits, vocab, token_begins, token_ids, token_counts, num_ids, repetition_penalty,
      frequency_penalty, presence_penalty);
  LM_CUDA_CHECK(cudaGetLastError());
}

void apply_temperature(float* logits, int64_t num_rows, int64_t vocab, const float* temperature,
                       cudaStream_t stream) {
  LM_CHECK(num_rows >= 0 && vocab > 0 && num_rows <= 65535);
  if (num_rows == 0) return;
  const int64_t blocks_per_row = std::min<int64_t>((vocab + 255) / 256, 256);
  temperature_kernel<<<dim3(static_cast<unsigned>(blocks_per_row), static_cast<unsigned>(num_rows)),
                       256, 0, stream>>>(logits, vocab, temperature);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lm::kernels::cuda
