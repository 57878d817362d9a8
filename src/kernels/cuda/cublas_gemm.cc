// Row-major Y = X . W^T as cuBLAS's column-major product: a row-major [r, c] matrix is a
// column-major [c, r] one, so Y^T[n, m] = W[n, k] . X^T[k, m] = op(A = W as [k, n])^T . B (X as
// [k, m]), with no copies.
#include "kernels/cuda/cublas_gemm.h"

#include <cublas_v2.h>

#include <cstdio>
#include <cstdlib>
#include <limits>

#include "base/check.h"

namespace lm::kernels::cuda {
namespace {

void check_cublas(cublasStatus_t status, const char* what) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "cuBLAS %s failed: %s\n", what, cublasGetStatusString(status));
  std::fflush(stderr);
  std::abort();
}

}  // namespace

CublasGemm::CublasGemm() { check_cublas(cublasCreate(&handle_), "cublasCreate"); }

CublasGemm::~CublasGemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

void CublasGemm::set_workspace(void* workspace, size_t bytes) {
  workspace_ = workspace;
  workspace_bytes_ = bytes;
}

void CublasGemm::matmul_f32_out(GemmType type, const void* x, const void* w, float* y, int64_t m,
                                int64_t n, int64_t k, cudaStream_t stream) {
  run(type, x, w, y, /*y_f32=*/true, m, n, k, stream);
}

void CublasGemm::matmul(GemmType type, const void* x, const void* w, void* y, int64_t m, int64_t n,
                        int64_t k, cudaStream_t stream) {
  run(type, x, w, y, /*y_f32=*/false, m, n, k, stream);
}

void CublasGemm::run(GemmType type, const void* x, const void* w, void* y, bool y_f32, int64_t m,
                     int64_t n, int64_t k, cudaStream_t stream) {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  LM_CHECK(m >= 0 && n >= 0 && k > 0 && m <= kMaxInt && n <= kMaxInt && k <= kMaxInt);
  if (m == 0 || n == 0) return;
  check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
  // NOTE: cublasSetStream puts the handle back on cuBLAS's own workspace pool, so ours is given
  // again after it on every call.
  if (workspace_ != nullptr)
    check_cublas(cublasSetWorkspace(handle_, workspace_, workspace_bytes_), "cublasSetWorkspace");
  const cudaDataType_t ab_type = type == GemmType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  const cudaDataType_t c_type = y_f32 ? CUDA_R_32F : ab_type;
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const int mi = static_cast<int>(m);
  const int ni = static_cast<int>(n);
  const int ki = static_cast<int>(k);
  check_cublas(
      cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, ni, mi, ki, &alpha, w, ab_type, ki, x,
                   ab_type, ki, &beta, y, c_type, ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

}  // namespace lm::kernels::cuda
