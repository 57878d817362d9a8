// The AVX2 (+F16C) activation row of LLM.int8's quantizer (llm_int8.h), eight values at a time;
// the scalar row in llm_int8.cc is the reference it equals bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/int8_dot.h"

namespace lm::kernels {

// Whether this build has it (an x86 compiler with AVX2 and F16C).
bool llm_int8_avx2_built();

// One activation row: `row` (k floats) is scratch; outliers appended to column / value in order.
void quantize_activation_row_avx2(const float* xr, int64_t k, BlockQ8Act* blocks,
                                  std::vector<int32_t>& column, std::vector<float>& value,
                                  float* row);

}  // namespace lm::kernels
