// The last step of sampling on the device: each row's log-softmax statistics, the chosen token
// (argmax, or an inverse-CDF draw from a uniform the host's seeded generator supplies) with its
// logprob, and the top-n alternatives. Semantics of the CPU twins in runtime/sampler.cc and
// runtime/logits_processors.h (log_softmax_of).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lm::kernels::cuda {

// Per row of logits [num_rows, vocab] (sanitized): max, argmax (lowest id holding it),
// sum_exp = sum over ids of expf(x - max) accumulated in double, log_sum = float(log(sum_exp)).
// A row of all -inf gives max -inf, argmax 0, sum_exp 0, log_sum -inf.
struct RowSoftmaxStats {
  float* max;
  int32_t* argmax;
  double* sum_exp;
  float* log_sum;
};

void log_softmax_stats(const float* logits, int64_t num_rows, int64_t vocab, RowSoftmaxStats stats,
                       cudaStream_t stream);

// ids[r]: argmax when is_random[r] is 0; otherwise the first id (in id order) whose cumulative
// weight expf(x - max) exceeds uniforms[r] * sum_exp (uniforms in [0, 1), from the sequence's
// generator), or the last id of non-zero weight if rounding leaves none. logprobs[r] = (x[id] -
// max) - log_sum, -inf for an all -inf row.
void choose_tokens(const float* logits, int64_t num_rows, int64_t vocab, RowSoftmaxStats stats,
                   const uint8_t* is_random, const double* uniforms, int32_t* ids, float* logprobs,
                   cudaStream_t stream);

// The top_n best ids per row by (score descending, id ascending) with their logprobs, into
// top_ids / top_logprobs [num_rows, top_n]; counts[r] <= top_n ids are written (-inf scores are
// never listed). NOTE: the CPU sampler also lists ids tied with the n-th; the device returns
// exactly the first n, and the host may extend ties from the logits if it needs TGI's list.
void top_n_logprobs(const float* logits, int64_t num_rows, int64_t vocab, int32_t top_n,
                    RowSoftmaxStats stats, int32_t* top_ids, float* top_logprobs, int32_t* counts,
                    cudaStream_t stream);

}  // namespace lm::kernels::cuda
