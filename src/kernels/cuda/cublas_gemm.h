// Dense linear layers for batches (prefill, batched decode) through cuBLAS: bf16 or f16 operands
// with fp32 accumulation. A thin owner of one cuBLAS handle; no tensors, no policy.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

// cublasHandle_t without including cublas_v2.h in every user.
struct cublasContext;

namespace lm::kernels::cuda {

enum class GemmType { kF16, kBF16 };

class CublasGemm {
 public:
  CublasGemm();
  ~CublasGemm();
  CublasGemm(const CublasGemm&) = delete;
  CublasGemm& operator=(const CublasGemm&) = delete;

  // Y[m, n] = X[m, k] . W[n, k]^T, row-major as our Linear layers store them (W is the
  // checkpoint's [out_features, in_features]). x and w hold `type` values; y is fp32. The sums are
  // accumulated in fp32 (CUBLAS_COMPUTE_32F). Enqueued on `stream`.
  void matmul_f32_out(GemmType type, const void* x, const void* w, float* y, int64_t m, int64_t n,
                      int64_t k, cudaStream_t stream);

  // Gives cuBLAS a workspace of its own (device memory the caller owns and keeps alive), so that
  // it allocates nothing while a stream is captured into a CUDA graph.
  void set_workspace(void* workspace, size_t bytes);

  // The same with y in `type` (rounded from the fp32 sums).
  void matmul(GemmType type, const void* x, const void* w, void* y, int64_t m, int64_t n, int64_t k,
              cudaStream_t stream);

 private:
  void run(GemmType type, const void* x, const void* w, void* y, bool y_f32, int64_t m, int64_t n,
           int64_t k, cudaStream_t stream);

  cublasContext* handle_ = nullptr;
  void* workspace_ = nullptr;  // set_workspace's (null: cuBLAS's own pool)
  size_t workspace_bytes_ = 0;
};

}  // namespace lm::kernels::cuda
