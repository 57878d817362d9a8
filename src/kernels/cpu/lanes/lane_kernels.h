// The entries each vector ISA's kernel table gets from the ops written once against the lane
// policies (lane_kernels.cc, built once per ISA): one declaration per ISA.
#pragma once

#include "kernels/cpu/isa.h"

namespace lm::kernels {

namespace avx2 {
void add_lane_kernels(IsaKernels& kernels);
}  // namespace avx2

namespace avx512 {
void add_lane_kernels(IsaKernels& kernels);
}  // namespace avx512

}  // namespace lm::kernels
