// Launch geometry of the grid-stride elementwise kernels: enough blocks of kThreads for n
// elements, capped (each thread then strides over several).
#pragma once

#include <cstdint>

namespace lm::kernels::cuda {

inline constexpr int kElementwiseThreads = 256;

inline unsigned elementwise_blocks(int64_t n) {
  const int64_t blocks = (n + kElementwiseThreads - 1) / kElementwiseThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? blocks : 65535 * 8);
}

}  // namespace lm::kernels::cuda
