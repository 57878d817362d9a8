// One block per token copies its K and V rows; the slot mapping is the only indirection, so a
// kernel never needs to know about sequences or blocks.
#include "base/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/store_kv.h"

namespace lm::kernels::cuda {
namespace {

__global__ void store_kv_kernel(const float* k, const float* v, const int64_t* slot_mapping,
                                float* k_pool, float* v_pool, int64_t kv_dim) {
  const int64_t token = blockIdx.x;
  const int64_t slot = slot_mapping[token];
  if (slot < 0) return;
  for (int64_t i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    k_pool[slot * kv_dim + i] = k[token * kv_dim + i];
    v_pool[slot * kv_dim + i] = v[token * kv_dim + i];
  }
}

}  // namespace

void store_kv(const float* k, const float* v, const int64_t* slot_mapping, float* k_pool,
              float* v_pool, int64_t num_tokens, int64_t kv_dim, cudaStream_t stream) {
  LM_CHECK(num_tokens >= 0 && kv_dim > 0);
  if (num_tokens == 0) return;
  store_kv_kernel<<<static_cast<unsigned>(num_tokens), 256, 0, stream>>>(k, v, slot_mapping, k_pool,
                                                                         v_pool, kv_dim);
  LM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace lm::kernels::cuda
