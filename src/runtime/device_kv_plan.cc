#include "runtime/device_kv_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace lm {
namespace {

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

}  // namespace

int64_t usable_device_memory(const DeviceMemoryInfo& memory, double memory_fraction) {
  const double withheld = (1.0 - memory_fraction) * static_cast<double>(memory.total_bytes);
  return std::max<int64_t>(0,
                           static_cast<int64_t>(static_cast<double>(memory.free_bytes) - withheld));
}

Result<DeviceKvPlan> plan_device_kv(const DeviceKvSizing& s) {
  LM_CHECK(s.kv_bytes_per_block > 0 && s.block_size > 0);
  if (!(s.memory_fraction > 0.0 && s.memory_fraction <= 1.0))
    return Error{"--cuda-memory-fraction must be in (0, 1]"};
  DeviceKvPlan plan;
  plan.usable_bytes = static_cast<int64_t>(std::floor(
      static_cast<double>(usable_device_memory(s.memory, s.memory_fraction)) * s.wiggle_room));
  // Blocks beside the reserved block 0, which the pool holds too.
  const int64_t fit = plan.usable_bytes / s.kv_bytes_per_block - 1;
  if (fit < 1) {
    return Error{"Not enough device memory for the KV cache: " + gib(plan.usable_bytes) +
                 " usable after the weights and workspaces (" + gib(s.memory.free_bytes) +
                 " free of " + gib(s.memory.total_bytes) + ", --cuda-memory-fraction " +
                 std::to_string(s.memory_fraction) + "), one block takes " +
                 std::to_string(s.kv_bytes_per_block) +
                 " bytes. Lower --max-batch-prefill-tokens, quantize the weights or raise "
                 "--cuda-memory-fraction"};
  }
  int64_t blocks = fit;
  if (s.max_batch_total_tokens) {
    const int64_t wanted = (*s.max_batch_total_tokens + s.block_size - 1) / s.block_size;
    if (wanted > fit) {
      return Error{"MAX_BATCH_TOTAL_TOKENS " + std::to_string(*s.max_batch_total_tokens) +
                   " does not fit the device: the KV cache has room for " +
                   std::to_string(fit * s.block_size) + " tokens (" + gib(plan.usable_bytes) +
                   " usable). Lower it or leave it unset to use what fits"};
    }
    blocks = wanted;
    plan.inferred = false;
  }
  plan.num_blocks = blocks + 1;
  plan.max_batch_total_tokens = blocks * s.block_size;
  return plan;
}

Result<double> parse_wiggle_room(const char* value) {
  if (value == nullptr) return 0.90;
  char* end = nullptr;
  const double room = std::strtod(value, &end);
  if (end == value || *end != '\0' || !(room > 0.0 && room <= 1.0))
    return Error{std::string("TGI_WIGGLE_ROOM=") + value + " must be a number in (0, 1]"};
  return room;
}

}  // namespace lm
