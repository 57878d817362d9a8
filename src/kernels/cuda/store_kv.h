// Writes a flat batch's K/V rows into their paged-cache slots on the device (CPU twin: store_kv in
// kernels/cpu/paged_attention.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace lm::kernels::cuda {

// k, v: [num_tokens, kv_dim] fp32. k_pool, v_pool: [num_slots, kv_dim] (a slot is
// block_id * block_size + row). Token t goes to slot slot_mapping[t]; a negative slot skips it.
void store_kv(const float* k, const float* v, const int64_t* slot_mapping, float* k_pool,
              float* v_pool, int64_t num_tokens, int64_t kv_dim, cudaStream_t stream);

}  // namespace lm::kernels::cuda
