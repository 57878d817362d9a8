// Copies a model's weights into one device arena as a DeviceWeightPlan places them: rows the
// device reads as stored are copied byte for byte; the others are dequantized on the host and
// rounded to F16 (fp32_to_fp16, nearest even), one matrix at a time.
#pragma once

#include "runtime/cuda/device_allocation.h"
#include "runtime/device_weight_plan.h"

namespace lm::cuda_runtime {

DeviceAllocation upload_weights(const DeviceWeightPlan& plan);

}  // namespace lm::cuda_runtime
