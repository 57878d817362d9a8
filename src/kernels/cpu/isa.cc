// Run-time ISA detection (CPUID and XGETBV, decided by a pure function of them), the process's
// level, and the assembly of the per-ISA kernel tables.
#include "kernels/cpu/isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <atomic>
#include <cstdio>

#include "base/check.h"
#include "kernels/cpu/int8_interleaved.h"
#include "kernels/cpu/lanes/lane_kernels.h"

namespace lm::kernels {

namespace {

constexpr bool bit(uint64_t word, int b) { return ((word >> b) & 1) != 0; }

// XCR0: SSE (1) and AVX (2) state for YMM; opmask (5), ZMM_Hi256 (6), Hi16_ZMM (7) for AVX-512.
constexpr uint64_t kXcr0Avx = (1u << 1) | (1u << 2);
constexpr uint64_t kXcr0Avx512 = kXcr0Avx | (1u << 5) | (1u << 6) | (1u << 7);

bool os_saves(const CpuId& id, uint64_t state) {
  return bit(id.leaf1_ecx, 27) && (id.xcr0 & state) == state;  // OSXSAVE: XGETBV is readable
}

bool cpu_has_avx2(const CpuId& id) {
  return bit(id.leaf1_ecx, 28) && bit(id.leaf1_ecx, 12) && bit(id.leaf1_ecx, 29) &&
         bit(id.leaf7_ebx, 5);  // AVX, FMA, F16C, AVX2
}

bool cpu_has_avx512(const CpuId& id) { return cpu_has_avx2(id) && bit(id.leaf7_ebx, 16); }

bool cpu_has_avx512_vnni(const CpuId& id) {
  return cpu_has_avx512(id) && bit(id.leaf7_ebx, 30) && bit(id.leaf7_ebx, 31) &&
         bit(id.leaf7_ecx, 11);  // BW, VL, VNNI
}

bool cpu_has_avx512_bf16(const CpuId& id) {
  return cpu_has_avx512_vnni(id) && bit(id.leaf7_1_eax, 5);  // AVX512_BF16
}

bool avx2_runs(const CpuId& id) { return cpu_has_avx2(id) && os_saves(id, kXcr0Avx); }

bool avx512_vnni_runs(const CpuId& id) {
  return cpu_has_avx512_vnni(id) && os_saves(id, kXcr0Avx512);
}

}  // namespace

bool has_avx_vnni_vex(const CpuId& id) { return bit(id.leaf7_1_eax, 4); }

bool level_runs(const CpuId& id, Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return avx2_runs(id);
    case Isa::kAvxVnni:  // VEX vpdpbusd needs only the YMM state; EVEX (VL) the AVX-512 state
      return avx2_runs(id) && (has_avx_vnni_vex(id) || avx512_vnni_runs(id));
    case Isa::kAvx512:
      return avx2_runs(id) && cpu_has_avx512(id) && os_saves(id, kXcr0Avx512);
    case Isa::kAvx512Vnni:
      return avx512_vnni_runs(id);
    case Isa::kAvx512Bf16:
      return avx512_vnni_runs(id) && cpu_has_avx512_bf16(id);
  }
  return false;
}

CpuId read_cpu_id() {
  CpuId id;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx)) id.leaf1_ecx = ecx;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    id.leaf7_ebx = ebx;
    id.leaf7_ecx = ecx;
    // Sub-leaf 1 exists when sub-leaf 0's eax (the highest sub-leaf) says so.
    if (eax >= 1 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) id.leaf7_1_eax = eax;
  }
  if (bit(id.leaf1_ecx, 27)) {  // XGETBV exists only with OSXSAVE
    uint32_t lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    id.xcr0 = (static_cast<uint64_t>(hi) << 32) | lo;
  }
#endif
  return id;
}

Isa detect_isa(const CpuId& id) {
  Isa best = Isa::kScalar;
  for (Isa isa : kAllIsas) {
    if (level_runs(id, isa)) best = isa;
  }
  return best;
}

std::string isa_limit_reason(const CpuId& id) {
  const auto xcr0 = [&] {
    char text[64];
    std::snprintf(text, sizeof text, "XCR0 = 0x%llx", static_cast<unsigned long long>(id.xcr0));
    return std::string(text);
  };
  if (cpu_has_avx2(id) && !os_saves(id, kXcr0Avx))
    return "the CPU advertises AVX2 but the OS does not enable the AVX register state (" + xcr0() +
           ")";
  if (cpu_has_avx512(id) && os_saves(id, kXcr0Avx) && !os_saves(id, kXcr0Avx512))
    return "the CPU advertises AVX-512 but the OS does not enable the opmask/ZMM register state "
           "(" +
           xcr0() + ")";
  return "";
}

namespace {

// This machine's CPUID words, read once.
const CpuId& this_cpu() {
  static const CpuId id = read_cpu_id();
  return id;
}

}  // namespace

Isa detected_isa() {
  static const Isa detected = detect_isa(this_cpu());
  return detected;
}

bool isa_supported(Isa isa) { return level_runs(this_cpu(), isa); }

namespace {

// -1 until the level is fixed by select_isa or by the first best_isa().
std::atomic<int> g_selected_isa{-1};

}  // namespace

Isa best_isa() {
  int selected = g_selected_isa.load(std::memory_order_acquire);
  if (selected < 0) {
    int expected = -1;
    g_selected_isa.compare_exchange_strong(expected, static_cast<int>(detected_isa()),
                                           std::memory_order_acq_rel);
    selected = g_selected_isa.load(std::memory_order_acquire);
  }
  return static_cast<Isa>(selected);
}

Status select_isa(Isa cap) {
  if (!isa_supported(cap)) {
    std::string message = std::string(isa_name(cap)) +
                          " is not a level this CPU runs (its best: " + isa_name(detected_isa()) +
                          ")";
    if (const std::string reason = isa_limit_reason(this_cpu()); !reason.empty())
      message += ": " + reason;
    return Error{message};
  }
  int expected = -1;
  if (!g_selected_isa.compare_exchange_strong(expected, static_cast<int>(cap),
                                              std::memory_order_acq_rel)) {
    LM_CHECK_MSG(expected == static_cast<int>(cap),
                 "select_isa after the kernels already chose another level");
  }
  return {};
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvxVnni:
      return "avx-vnni";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Vnni:
      return "avx512-vnni";
    case Isa::kAvx512Bf16:
      return "avx512-bf16";
  }
  return "?";
}

std::optional<Isa> parse_isa(std::string_view name) {
  for (Isa isa : kAllIsas) {
    if (name == isa_name(isa)) return isa;
  }
  return std::nullopt;
}

namespace {

// Each vector table starts from the one below it (AVX2's from the scalar reference; AVX-512's from
// AVX2's, not avx-vnni's) and is built
// once, on first use.
const IsaKernels& avx2_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = scalar_kernels();
    add_avx2_kernels(kernels);
    avx2::add_lane_kernels(kernels);
    return kernels;
  }();
  return kKernels;
}

// AVX2's table with the interleaved int8 GEMM on 256-bit vpdpbusd: AVX-VNNI's VEX encoding where
// the CPU has it, else AVX512-VNNI + VL's EVEX one (the same operation; the level's bits).
const IsaKernels& avx_vnni_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = avx2_kernels();
    kernels.int8_interleaved_gemm = has_avx_vnni_vex(this_cpu())
                                        ? int8_interleaved_gemm_avx_vnni
                                        : int8_interleaved_gemm_avx_vnni_evex;
    return kernels;
  }();
  return kKernels;
}

// AVX-512F: the compute-bound lane ops on 16 lanes (GEMM tile and panel, attention rows, the
// exps); the memory-bound ones and everything else stay AVX2's.
const IsaKernels& avx512_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = avx2_kernels();
    avx512::add_lane_kernels(kernels);
    add_avx512_bnb4_kernels(kernels);
    return kernels;
  }();
  return kKernels;
}

const IsaKernels& avx512_vnni_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = avx512_kernels();
    add_avx512_vnni_kernels(kernels);
    return kernels;
  }();
  return kKernels;
}

const IsaKernels& avx512_bf16_kernels() {
  static const IsaKernels kKernels = [] {
    IsaKernels kernels = avx512_vnni_kernels();
    add_avx512_bf16_kernels(kernels);
    return kernels;
  }();
  return kKernels;
}

}  // namespace

const IsaKernels& isa_kernels(Isa isa) {
  LM_CHECK_MSG(isa_supported(isa), "ISA not supported by this CPU");
  switch (isa) {
    case Isa::kScalar:
      return scalar_kernels();
    case Isa::kAvx2:
      return avx2_kernels();
    case Isa::kAvxVnni:
      return avx_vnni_kernels();
    case Isa::kAvx512:
      return avx512_kernels();
    case Isa::kAvx512Vnni:
      return avx512_vnni_kernels();
    case Isa::kAvx512Bf16:
      return avx512_bf16_kernels();
  }
  LM_CHECK(false);
}

}  // namespace lm::kernels
