// The device KV pool's size, decided as TGI's shard decides it after loading and warm-up (spec
// §5.6): the free device memory, less the part --cuda-memory-fraction withholds, times the wiggle
// room, in whole blocks. Plain arithmetic over measured numbers, so it is tested on the CPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"

namespace lm {

// What cudaMemGetInfo reports.
struct DeviceMemoryInfo {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};

struct DeviceKvSizing {
  DeviceMemoryInfo memory;       // measured with the weights and every workspace allocated
  double memory_fraction = 1.0;  // --cuda-memory-fraction: the share of the device we may use
  double wiggle_room = 0.90;     // TGI_WIGGLE_ROOM (the shard's default)
  int64_t kv_bytes_per_block = 0;
  int64_t block_size = 16;
  // MAX_BATCH_TOTAL_TOKENS when the operator set it: the pool holds that much (if it fits)
  // instead of everything that fits.
  std::optional<int64_t> max_batch_total_tokens;
};

struct DeviceKvPlan {
  int64_t usable_bytes = 0;            // what the fraction and wiggle room leave for the pool
  int64_t num_blocks = 0;              // block 0 (reserved, pads block tables) included
  int64_t max_batch_total_tokens = 0;  // (num_blocks - 1) * block_size
  bool inferred = true;                // false: MAX_BATCH_TOTAL_TOKENS decided it
};

// TGI's get_cuda_free_memory: free - (1 - fraction) * total, at least 0.
int64_t usable_device_memory(const DeviceMemoryInfo& memory, double memory_fraction);

// The pool for `sizing`. Errors (a sentence the operator can act on) when not even two blocks fit
// or when MAX_BATCH_TOTAL_TOKENS asks for more than fits.
Result<DeviceKvPlan> plan_device_kv(const DeviceKvSizing& sizing);

// TGI_WIGGLE_ROOM's value: unset gives 0.90; it must be in (0, 1].
Result<double> parse_wiggle_room(const char* value);

}  // namespace lm
