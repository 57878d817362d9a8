#include "tensor/dtype.h"

#include <limits>

#include "base/check.h"

namespace lm {

const DTypeInfo& dtype_info(DType dtype) {
  static const DTypeInfo kInfos[] = {
      {"F32", 1, 4},      {"F16", 1, 2},      {"BF16", 1, 2},       {"Q8_0", 32, 34},
      {"Q4_0", 32, 18},   {"Q4_1", 32, 20},   {"Q5_0", 32, 22},     {"Q5_1", 32, 24},
      {"Q4_K", 256, 144}, {"Q5_K", 256, 176}, {"Q6_K", 256, 210},   {"Q2_K", 256, 84},
      {"Q3_K", 256, 110}, {"IQ4_NL", 32, 18}, {"IQ4_XS", 256, 136}, {"I32", 1, 4},
      {"I8", 1, 1},       {"I64", 1, 8},      {"F8_E4M3", 1, 1},    {"F8_E5M2", 1, 1},
      {"NF4", 64, 36},    {"FP4", 64, 36},    {"Q4_Z128", 128, 68},
  };
  const auto idx = static_cast<size_t>(dtype);
  LM_CHECK(idx < sizeof(kInfos) / sizeof(kInfos[0]));
  return kInfos[idx];
}

std::optional<uint64_t> dtype_bytes(DType dtype, uint64_t num_elements) {
  const DTypeInfo& info = dtype_info(dtype);
  const auto block = static_cast<uint64_t>(info.block_size);
  if (num_elements % block != 0) return std::nullopt;
  const uint64_t blocks = num_elements / block;
  if (blocks > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(info.block_bytes)) {
    return std::nullopt;
  }
  return blocks * static_cast<uint64_t>(info.block_bytes);
}

}  // namespace lm
