// The ISA decision as a pure function of CPUID and XCR0 (synthetic values: a VM that advertises
// AVX-512 while its OS does not enable the ZMM state must get AVX2), the level names, and the
// start-time cap's refusal of a level this CPU does not run.
#include <gtest/gtest.h>

#include "kernels/cpu/isa.h"

namespace lm::kernels {
namespace {

constexpr uint32_t kOsxsave = 1u << 27;
constexpr uint32_t kAvxFmaF16c = (1u << 28) | (1u << 12) | (1u << 29);
constexpr uint32_t kAvx2 = 1u << 5;
constexpr uint32_t kAvx512FBwVl = (1u << 16) | (1u << 30) | (1u << 31);
constexpr uint32_t kVnni = 1u << 11;
constexpr uint32_t kBf16 = 1u << 5;     // CPUID 7.1 eax
constexpr uint32_t kAvxVnni = 1u << 4;  // CPUID 7.1 eax
constexpr uint64_t kXcr0Ymm = 0x7;      // x87, SSE, AVX
constexpr uint64_t kXcr0Zmm = 0xe7;     // + opmask, ZMM_Hi256, Hi16_ZMM

// A Sapphire Rapids class CPU as CPUID describes it, with the OS state `xcr0`.
CpuId sapphire_rapids(uint64_t xcr0) {
  return CpuId{.leaf1_ecx = kOsxsave | kAvxFmaF16c,
               .leaf7_ebx = kAvx2 | kAvx512FBwVl,
               .leaf7_ecx = kVnni,
               .leaf7_1_eax = kBf16,
               .xcr0 = xcr0};
}

TEST(IsaDetection, EveryLevelWhenTheOsEnablesItsRegisterState) {
  EXPECT_EQ(detect_isa(sapphire_rapids(kXcr0Zmm)), Isa::kAvx512Bf16);
  EXPECT_EQ(isa_limit_reason(sapphire_rapids(kXcr0Zmm)), "");
  CpuId no_bf16 = sapphire_rapids(kXcr0Zmm);  // Ice Lake
  no_bf16.leaf7_1_eax = 0;
  EXPECT_EQ(detect_isa(no_bf16), Isa::kAvx512Vnni);
  CpuId no_vnni = sapphire_rapids(kXcr0Zmm);
  no_vnni.leaf7_ecx = 0;  // the BF16 level includes VNNI's
  EXPECT_EQ(detect_isa(no_vnni), Isa::kAvx512);
  CpuId avx2_only = sapphire_rapids(kXcr0Ymm);
  avx2_only.leaf7_ebx = kAvx2;
  avx2_only.leaf7_ecx = 0;
  EXPECT_EQ(detect_isa(avx2_only), Isa::kAvx2);
  EXPECT_EQ(isa_limit_reason(avx2_only), "");
  EXPECT_EQ(detect_isa(CpuId{}), Isa::kScalar);
}

TEST(IsaDetection, Avx512AdvertisedWithoutZmmStateFallsBackToAvx2) {
  const CpuId vm = sapphire_rapids(kXcr0Ymm);
  EXPECT_EQ(detect_isa(vm), Isa::kAvx2);
  EXPECT_EQ(isa_limit_reason(vm),
            "the CPU advertises AVX-512 but the OS does not enable the opmask/ZMM register state "
            "(XCR0 = 0x7)");
  // Each of the three AVX-512 state bits is needed.
  for (uint64_t missing : {0x20u, 0x40u, 0x80u})
    EXPECT_EQ(detect_isa(sapphire_rapids(kXcr0Zmm & ~missing)), Isa::kAvx2) << missing;
}

TEST(IsaDetection, NoAvxStateOrNoOsxsaveMeansScalar) {
  EXPECT_EQ(detect_isa(sapphire_rapids(0x3)), Isa::kScalar);  // x87 + SSE only
  EXPECT_EQ(isa_limit_reason(sapphire_rapids(0x3)),
            "the CPU advertises AVX2 but the OS does not enable the AVX register state "
            "(XCR0 = 0x3)");
  CpuId no_osxsave = sapphire_rapids(kXcr0Zmm);
  no_osxsave.leaf1_ecx &= ~kOsxsave;  // XCR0 cannot be read: trust nothing above scalar
  EXPECT_EQ(detect_isa(no_osxsave), Isa::kScalar);
}

TEST(IsaDetection, Avx2NeedsFmaAndF16cToo) {
  for (uint32_t missing : {1u << 12, 1u << 29, 1u << 28}) {
    CpuId id = sapphire_rapids(kXcr0Zmm);
    id.leaf1_ecx &= ~missing;
    EXPECT_EQ(detect_isa(id), Isa::kScalar) << missing;
  }
}

// The two levels outside the chain: Alder Lake has AVX-VNNI without AVX-512, Skylake-SP AVX-512
// without any VNNI; an AVX-512 VNNI CPU runs avx-vnni through the EVEX encoding.
TEST(IsaDetection, AvxVnniFromEitherEncodingAndNotOnSkylake) {
  const CpuId alder_lake{.leaf1_ecx = kOsxsave | kAvxFmaF16c,
                         .leaf7_ebx = kAvx2,
                         .leaf7_1_eax = kAvxVnni,
                         .xcr0 = kXcr0Ymm};
  EXPECT_EQ(detect_isa(alder_lake), Isa::kAvxVnni);
  EXPECT_TRUE(has_avx_vnni_vex(alder_lake));
  EXPECT_FALSE(level_runs(alder_lake, Isa::kAvx512));

  CpuId skylake = sapphire_rapids(kXcr0Zmm);
  skylake.leaf7_ecx = 0;
  skylake.leaf7_1_eax = 0;
  EXPECT_EQ(detect_isa(skylake), Isa::kAvx512);
  EXPECT_TRUE(level_runs(skylake, Isa::kAvx512));
  EXPECT_FALSE(level_runs(skylake, Isa::kAvxVnni));

  CpuId zen4 = sapphire_rapids(kXcr0Zmm);  // AVX512-VNNI + VL, no AVX-VNNI
  for (Isa isa : kAllIsas) EXPECT_TRUE(level_runs(zen4, isa)) << isa_name(isa);
  EXPECT_FALSE(has_avx_vnni_vex(zen4));
  CpuId with_both = zen4;  // Sapphire Rapids has both encodings: the level takes VEX's
  with_both.leaf7_1_eax |= kAvxVnni;
  EXPECT_TRUE(has_avx_vnni_vex(with_both));
  EXPECT_EQ(detect_isa(with_both), Isa::kAvx512Bf16);
  // Without the ZMM state the EVEX encoding faults: avx-vnni only through AVX-VNNI's VEX one.
  EXPECT_FALSE(level_runs(sapphire_rapids(kXcr0Ymm), Isa::kAvxVnni));
  CpuId vm_with_vex = sapphire_rapids(kXcr0Ymm);
  vm_with_vex.leaf7_1_eax |= kAvxVnni;
  EXPECT_EQ(detect_isa(vm_with_vex), Isa::kAvxVnni);
  // AVX-VNNI without the OS's AVX state is nothing (the VEX encoding needs the YMM registers).
  CpuId no_ymm_state = alder_lake;
  no_ymm_state.xcr0 = 0x3;
  EXPECT_EQ(detect_isa(no_ymm_state), Isa::kScalar);
  EXPECT_FALSE(level_runs(no_ymm_state, Isa::kAvxVnni));
}

TEST(IsaDetection, NamesRoundTrip) {
  for (Isa isa : kAllIsas) EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  EXPECT_EQ(parse_isa("avx512vnni"), std::nullopt);
  EXPECT_EQ(parse_isa("auto"), std::nullopt);  // the launcher's word for "no cap"
}

TEST(IsaDetection, ThisMachineAgreesWithTheDecision) {
  EXPECT_EQ(detected_isa(), detect_isa(read_cpu_id()));
}

TEST(IsaDetection, CapAboveThisCpuIsAnErrorThatSaysWhatItRuns) {
  if (detected_isa() == Isa::kAvx512Bf16) GTEST_SKIP() << "this CPU runs every level";
  const Status s = select_isa(Isa::kAvx512Bf16);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find(std::string("its best: ") + isa_name(detected_isa())),
            std::string::npos)
      << s.error().message;
}

}  // namespace
}  // namespace lm::kernels
