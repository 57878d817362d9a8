// TGI's logit processors on the device, row by row over a batch of logits, with the exact float
// operations of the CPU twins in runtime/logits_processors.h (so results match bit for bit).
// Parameters are per row; a row whose parameter is "off" is left untouched, as on the CPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lm::kernels::cuda {

// logits: [num_rows, vocab]. NaN -> -inf, +inf -> the largest float.
void sanitize_scores(float* logits, int64_t num_rows, int64_t vocab, cudaStream_t stream);

// Row r's distinct token ids (prompt + generated) are token_ids[token_begins[r],
// token_begins[r + 1]) with their occurrence counts in token_counts; num_ids[r] is the sequence
// length they were counted over. repetition_penalty[r] (1: off) is HF's; frequency_penalty[r]
// and presence_penalty[r] (both 0: off) are TGI's. Ids outside [0, vocab) are skipped.
void apply_penalties(float* logits, int64_t num_rows, int64_t vocab, const int32_t* token_begins,
                     const int32_t* token_ids, const int32_t* token_counts, const int64_t* num_ids,
                     const float* repetition_penalty, const float* frequency_penalty,
                     const float* presence_penalty, cudaStream_t stream);

// x = min(x / temperature[r], FLT_MAX) for rows whose temperature is not 1.
void apply_temperature(float* logits, int64_t num_rows, int64_t vocab, const float* temperature,
                       cudaStream_t stream);

}  // namespace lm::kernels::cuda
