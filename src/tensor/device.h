// Where a tensor's memory lives. CPU is the reference backend; CUDA slots in later
// (docs/architecture.md) without changing the layers above ops/.
#pragma once

#include <optional>
#include <string_view>

namespace lm {

enum class Device { kCpu, kCuda };

inline std::string_view device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

inline std::optional<Device> parse_device(std::string_view s) {
  if (s == "cpu") return Device::kCpu;
  if (s == "cuda") return Device::kCuda;
  return std::nullopt;
}

}  // namespace lm
