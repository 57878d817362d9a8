#include "runtime/cuda/weight_upload.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "base/check.h"
#include "base/fp16.h"
#include "kernels/cpu/q4_z128_blocks.h"
#include "kernels/cuda/cuda_check.h"

namespace lm::cuda_runtime {

DeviceAllocation upload_weights(const DeviceWeightPlan& plan) {
  DeviceAllocation arena(plan.arena_bytes);
  std::vector<float> row;
  std::vector<uint16_t> staged;
  std::vector<uint8_t> blocks;
  for (const DeviceMatrix& m : plan.matrices) {
    LM_CHECK(m.source != nullptr && m.source->dim(0) == m.rows && m.source->dim(1) == m.cols);
    if (!m.converted()) {
      LM_CHECK(m.source->row_bytes() == m.row_bytes);
      LM_CUDA_CHECK(cudaMemcpy(arena.as<char>(m.offset), m.source->data,
                               static_cast<size_t>(m.bytes), cudaMemcpyHostToDevice));
      continue;
    }
    const auto* source = static_cast<const uint8_t*>(m.source->data);
    if (m.stored == kernels::RowFormat::kQ4_Z128 && m.device != kernels::RowFormat::kF16) {
      // Re-encoded exactly into the GGML blocks the plan chose (Q4_0 or Q8_0).
      blocks.resize(static_cast<size_t>(m.bytes));
      for (int64_t r = 0; r < m.rows; ++r) {
        kernels::q4_z128_to_ggml_row(m.device, source + r * m.source->row_bytes(),
                                     blocks.data() + r * m.row_bytes, m.cols);
      }
      LM_CUDA_CHECK(cudaMemcpy(arena.as<char>(m.offset), blocks.data(),
                               static_cast<size_t>(m.bytes), cudaMemcpyHostToDevice));
      continue;
    }
    LM_CHECK(m.device == kernels::RowFormat::kF16);
    row.resize(static_cast<size_t>(m.cols));
    staged.resize(static_cast<size_t>(m.rows * m.cols));
    for (int64_t r = 0; r < m.rows; ++r) {
      kernels::dequantize_row(m.stored, source + r * m.source->row_bytes(), row.data(), m.cols);
      for (int64_t c = 0; c < m.cols; ++c)
        staged[static_cast<size_t>(r * m.cols + c)] = fp32_to_fp16(row[static_cast<size_t>(c)]);
    }
    LM_CUDA_CHECK(cudaMemcpy(arena.as<char>(m.offset), staged.data(), static_cast<size_t>(m.bytes),
                             cudaMemcpyHostToDevice));
  }
  for (const DeviceVector& v : plan.vectors) {
    LM_CUDA_CHECK(cudaMemcpy(arena.as<char>(v.offset), v.values.data(),
                             v.values.size() * sizeof(float), cudaMemcpyHostToDevice));
  }
  // A copy from pageable memory returns once staged: the runner's non-blocking stream must not
  // read the arena before the last bytes land.
  LM_CUDA_CHECK(cudaDeviceSynchronize());
  return arena;
}

}  // namespace lm::cuda_runtime
