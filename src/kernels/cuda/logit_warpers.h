// HF's top-k, top-p and typical-p warpers on the device, per row of a batch of logits, with the
// CPU twins' boundary rules (runtime/logits_processors.h): top-k keeps every score >= the k-th
// largest; top-p and typical-p rank with a stable sort (ties: lower id first, as torch.sort on
// CUDA) and cut on the same cumulative-probability tests. Filtered scores become -inf. Scores must
// be sanitized (no NaN, no +inf). Rows whose parameter is off (k = 0 or >= vocab, p >= 1) are left
// untouched.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace lm::kernels::cuda {

// logits: [num_rows, vocab]; top_k: [num_rows]. An exact radix select per row, no workspace.
void apply_top_k(float* logits, int64_t num_rows, int64_t vocab, const int32_t* top_k,
                 cudaStream_t stream);

// Device bytes apply_top_p / apply_typical_p need as `workspace` for this many rows.
size_t warper_workspace_bytes(int64_t num_rows, int64_t vocab);

// top_p: [num_rows]. HF TopPLogitsWarper.
void apply_top_p(float* logits, int64_t num_rows, int64_t vocab, const float* top_p,
                 void* workspace, size_t workspace_bytes, cudaStream_t stream);

// typical_p: [num_rows]. HF TypicalLogitsWarper.
void apply_typical_p(float* logits, int64_t num_rows, int64_t vocab, const float* typical_p,
                     void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace lm::kernels::cuda
