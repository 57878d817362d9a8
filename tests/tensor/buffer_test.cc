// Buffer: zeroed, 64-byte aligned host memory; large buffers asked for huge pages start on a
// 2 MiB boundary with the kernel's huge-page advice on their mapping.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "tensor/tensor.h"

namespace lm {
namespace {

// The VmFlags line of the /proc/self/smaps mapping that holds p ("" if none does).
std::string vm_flags_of(const void* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> begin >> dash >> end && dash == '-' &&
        line.find(':') > line.find(' ')) {
      inside = begin <= address && address < end;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool all_zero_and_writable(Buffer& b, int64_t floats) {
  float* f = b.f32();
  const bool zero = f[0] == 0.0f && f[floats / 2] == 0.0f && f[floats - 1] == 0.0f;
  f[0] = 1.0f;
  f[floats - 1] = 2.0f;
  return zero && f[0] == 1.0f && f[floats - 1] == 2.0f;
}

TEST(Buffer, HugePagesStartOnATwoMebibyteBoundaryWithTheAdvice) {
  constexpr int64_t kFloats = 3 * (1 << 20) + 5;  // 12 MiB and a bit: not a whole number of pages
  Buffer huge({kFloats}, DType::kF32, Buffer::Pages::kHuge);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(huge.f32()) % (uintptr_t{2} << 20), 0u);
  EXPECT_TRUE(all_zero_and_writable(huge, kFloats));
  EXPECT_NE(vm_flags_of(huge.f32()).find(" hg"), std::string::npos) << vm_flags_of(huge.f32());

  Buffer small({kFloats});
  EXPECT_TRUE(all_zero_and_writable(small, kFloats));
  const std::string flags = vm_flags_of(small.f32());
  EXPECT_FALSE(flags.empty());
  EXPECT_EQ(flags.find(" hg"), std::string::npos) << flags;
}

TEST(Buffer, SmallBuffersAskingForHugePagesAreOrdinary) {
  Buffer tiny({100}, DType::kF32, Buffer::Pages::kHuge);  // heap
  EXPECT_EQ(reinterpret_cast<uintptr_t>(tiny.f32()) % 64, 0u);
  EXPECT_TRUE(all_zero_and_writable(tiny, 100));
  Buffer mapped({(1 << 18) + 1}, DType::kF32, Buffer::Pages::kHuge);  // 1 MiB: mapped, < 2 MiB
  EXPECT_TRUE(all_zero_and_writable(mapped, (1 << 18) + 1));
}

TEST(Buffer, MovingKeepsTheMemoryAndReleasesItOnce) {
  Buffer a({1 << 20}, DType::kF32, Buffer::Pages::kHuge);
  a.f32()[7] = 3.0f;
  const float* data = a.f32();
  Buffer b(std::move(a));
  EXPECT_EQ(b.f32(), data);
  EXPECT_EQ(b.f32()[7], 3.0f);
  Buffer c;
  c = std::move(b);
  EXPECT_EQ(c.f32()[7], 3.0f);
}

}  // namespace
}  // namespace lm
