// What the process can see of CUDA devices, as plain C++ (no CUDA types), so the launcher can pick
// a device without including CUDA headers.
#pragma once

#include <string>

namespace lm::kernels::cuda {

// Number of usable CUDA devices; 0 when there is no driver, no device, or the runtime fails.
int device_count();

// "NVIDIA H200, 139.8 GiB, sm_90" for device `index` (which must exist).
std::string device_description(int index);

}  // namespace lm::kernels::cuda
