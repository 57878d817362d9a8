// ops::linear over interleaved weights: which weights plan_cpu_weight interleaves, and that the
// int8 GEMM over them agrees with the row layout's int8 path, alone or sharing one prepared input
// between several Linears (bit for bit with separate calls); how prepare_cpu_weights places a
// model's weights in one huge-page arena.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "../kernels/kernel_test_util.h"
#include "kernels/cpu/interleaved_rows.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/panels16.h"
#include "kernels/cpu/row_format.h"
#include "ops/cpu_weights.h"
#include "ops/linear.h"

namespace lm {
namespace {

// n rows of k random weights quantized to Q4_0, owned by `storage`.
Tensor q4_0_weight(int64_t n, int64_t k, uint32_t seed, Buffer& storage) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(n * k));
  for (float& v : w) v = dist(rng);
  storage = Buffer({n, k}, DType::kQ4_0);
  Tensor t = storage.view();
  for (int64_t j = 0; j < n; ++j)
    kernels::quantize_row_q4_0(w.data() + j * k, t.as<uint8_t>() + j * t.row_bytes(), k);
  return t;
}

// w's own interleaved copy in `storage`, as prepare_cpu_weights would place it, when it plans
// kInterleave; else nullopt.
std::optional<Tensor> interleave_for_cpu(const Tensor& w, Buffer& storage) {
  if (ops::plan_cpu_weight(w, false) != ops::CpuWeightPlan::kInterleave) return std::nullopt;
  storage = Buffer(w.shape, w.dtype);
  return ops::place_cpu_weight(w, ops::CpuWeightPlan::kInterleave, storage.view().data);
}

Buffer random_input(int64_t m, int64_t k, uint32_t seed) {
  Buffer x({m, k});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (int64_t i = 0; i < m * k; ++i) x.f32()[i] = dist(rng);
  return x;
}

TEST(InterleaveForCpu, TakesBlockFormatsWithWholeGroupsOfEightRowsOnly) {
  if (!kernels::has_interleaved_matmul()) GTEST_SKIP() << "no interleaved int8 GEMM on this CPU";
  Buffer rows, packed;
  const Tensor w = q4_0_weight(16, 64, 1, rows);
  const auto view = interleave_for_cpu(w, packed);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->layout, WeightLayout::kInterleaved8);
  EXPECT_EQ(view->shape, w.shape);
  EXPECT_NE(view->data, w.data);
  Buffer odd_rows, unused;
  EXPECT_FALSE(interleave_for_cpu(q4_0_weight(12, 64, 2, odd_rows), unused).has_value());
  Buffer f16({16, 64}, DType::kF16);
  EXPECT_FALSE(interleave_for_cpu(f16.view(), unused).has_value());
  EXPECT_FALSE(interleave_for_cpu(*view, unused).has_value());  // already interleaved
}

// n x k F16 weights with a byte pattern, owned by `storage`.
Tensor f16_weight(int64_t n, int64_t k, Buffer& storage) {
  storage = Buffer({n, k}, DType::kF16);
  auto* bytes = static_cast<uint8_t*>(storage.view().data);
  for (int64_t i = 0; i < n * k * 2; ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  return storage.view();
}

TEST(PrepareCpuWeights, PlacesInterleavedPanelledAndRowCopiesInOneHugePageArena) {
  const bool interleaves = kernels::has_interleaved_matmul();
  Buffer rows_q, rows_f, rows_small, arena;
  Tensor q4 = q4_0_weight(16, 96, 1, rows_q);   // 864 bytes
  Tensor f16 = f16_weight(1024, 1024, rows_f);  // 2 MiB
  Tensor small = f16_weight(3, 64, rows_small);
  Tensor vector = small;
  vector.shape = {3 * 64};  // not a matrix: kept
  const std::vector<Tensor> sources = {q4, f16, small, vector};
  Tensor* weights[] = {&q4, &f16, &small, &vector};
  std::vector<size_t> placed;  // each call: its weight placed, the next one not yet
  const auto plans = ops::prepare_cpu_weights(
      weights, /*copy_rows=*/true, arena, [&](size_t i, const Tensor& source) {
        EXPECT_EQ(source.data, sources[i].data);
        EXPECT_NE(weights[i]->data, source.data);
        if (i + 1 < 3) {
          EXPECT_EQ(weights[i + 1]->data, sources[i + 1].data);  // not placed yet
        }
        placed.push_back(i);
      });
  EXPECT_EQ(placed, (std::vector<size_t>{0, 1, 2}));
  using Plan = ops::CpuWeightPlan;
  // F16 in whole panels of 16 rows is panelled; 3 rows are not.
  EXPECT_EQ(plans, (std::vector<Plan>{interleaves ? Plan::kInterleave : Plan::kCopyRows,
                                      Plan::kPanels16, Plan::kCopyRows, Plan::kKeep}));
  const auto* base = static_cast<const uint8_t*>(arena.view().data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % (uintptr_t{2} << 20), 0u);  // over 2 MiB in all
  EXPECT_EQ(q4.data, base);  // one after another, each on a 64-byte boundary
  EXPECT_EQ(f16.data, base + 896);
  EXPECT_EQ(small.data, base + 896 + (2 << 20));
  EXPECT_EQ(vector.data, sources[3].data);
  EXPECT_EQ(q4.layout, interleaves ? WeightLayout::kInterleaved8 : WeightLayout::kRows);
  EXPECT_EQ(f16.layout, WeightLayout::kPanels16);
  EXPECT_EQ(small.layout, WeightLayout::kRows);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(weights[i]->shape, sources[i].shape);
    EXPECT_EQ(weights[i]->dtype, sources[i].dtype);
  }
  std::vector<uint16_t> panels(1024 * 1024);
  kernels::pack_panels16(kernels::RowFormat::kF16, sources[1].data, sources[1].row_bytes(), 1024,
                         1024, panels.data());
  EXPECT_EQ(std::memcmp(f16.data, panels.data(), 1024 * 1024 * 2), 0);
  EXPECT_EQ(std::memcmp(small.data, sources[2].data, 3 * 64 * 2), 0);
  if (interleaves) {
    std::vector<uint8_t> row(static_cast<size_t>(q4.row_bytes()));
    for (int64_t j = 0; j < 16; ++j) {
      kernels::deinterleave_row(kernels::RowFormat::kQ4_0, q4.data, j, 96, row.data());
      EXPECT_EQ(std::memcmp(row.data(), sources[0].as<uint8_t>() + j * q4.row_bytes(), row.size()),
                0)
          << j;
    }
  }
}

TEST(PanelInPlace, PanelsWholePanelsOf16BitRowsOnly) {
  Buffer rows_f, rows_small, rows_q;
  Tensor f16 = f16_weight(32, 40, rows_f);
  std::vector<uint16_t> want(32 * 40);
  kernels::pack_panels16(kernels::RowFormat::kF16, f16.data, f16.row_bytes(), 32, 40, want.data());
  const void* data = f16.data;
  EXPECT_TRUE(ops::panel_in_place(f16));
  EXPECT_EQ(f16.data, data);
  EXPECT_EQ(f16.layout, WeightLayout::kPanels16);
  EXPECT_EQ(std::memcmp(f16.data, want.data(), want.size() * 2), 0);
  EXPECT_FALSE(ops::panel_in_place(f16));  // already panels
  Tensor small = f16_weight(3, 64, rows_small);
  EXPECT_FALSE(ops::panel_in_place(small));
  EXPECT_EQ(small.layout, WeightLayout::kRows);
  Tensor q4 = q4_0_weight(16, 64, 3, rows_q);
  EXPECT_FALSE(ops::panel_in_place(q4));
}

// Where the source's pages cannot be handed back, rows stay where they are (F16 ones too); weights
// the int8 GEMM reads interleaved are still interleaved.
TEST(PrepareCpuWeights, KeepsRowsWhenTheirPagesCannotBeHandedBack) {
  Buffer rows_f, arena;
  Tensor f16 = f16_weight(16, 64, rows_f);
  const void* data = f16.data;
  Tensor* weights[] = {&f16};
  EXPECT_EQ(ops::prepare_cpu_weights(weights, /*copy_rows=*/false, arena),
            std::vector<ops::CpuWeightPlan>{ops::CpuWeightPlan::kKeep});
  EXPECT_EQ(f16.data, data);
  EXPECT_TRUE(arena.view().empty());

  Buffer rows_q;
  const Tensor q4 = q4_0_weight(16, 64, 2, rows_q);
  EXPECT_EQ(ops::plan_cpu_weight(q4, /*copy_rows=*/false), kernels::has_interleaved_matmul()
                                                               ? ops::CpuWeightPlan::kInterleave
                                                               : ops::CpuWeightPlan::kKeep);
}

TEST(InterleaveForCpu, SharedInputLinearsMatchSeparateCallsAndTheRowLayout) {
  if (!kernels::has_interleaved_matmul()) GTEST_SKIP() << "no interleaved int8 GEMM on this CPU";
  ThreadPool pool(2);
  constexpr int64_t m = 5, k = 256;
  Buffer rows_a, rows_b, packed_a, packed_b;
  const Tensor a = q4_0_weight(24, k, 3, rows_a), b = q4_0_weight(40, k, 4, rows_b);
  const Tensor ia = *interleave_for_cpu(a, packed_a);
  const Tensor ib = *interleave_for_cpu(b, packed_b);
  Buffer bias({40});
  for (int64_t j = 0; j < 40; ++j) bias.f32()[j] = 0.25f * static_cast<float>(j);
  Buffer x = random_input(m, k, 5);
  Buffer ya({m, 24}), yb({m, 40}), sa({m, 24}), sb({m, 40}), ra({m, 24}), rb({m, 40});
  Tensor ya_t = ya.view(), yb_t = yb.view(), sa_t = sa.view(), sb_t = sb.view();
  Tensor ra_t = ra.view(), rb_t = rb.view();
  ops::linear(x.view(), ia, {}, ya_t, pool);
  ops::linear(x.view(), ib, bias.view(), yb_t, pool);
  ops::linear_shared_input(x.view(), {{&ia, {}, &sa_t}, {&ib, bias.view(), &sb_t}}, pool);
  // The row layout on the int8 path: the same products, summed in another order.
  ops::linear_shared_input(x.view(), {{&a, {}, &ra_t}, {&b, bias.view(), &rb_t}}, pool,
                           /*quantize_activations=*/true);
  for (int64_t i = 0; i < m * 24; ++i) {
    ASSERT_EQ(sa.f32()[i], ya.f32()[i]) << i;
    ASSERT_NEAR(sa.f32()[i], ra.f32()[i], 1e-4f * (1.0f + std::abs(ra.f32()[i])));
  }
  for (int64_t i = 0; i < m * 40; ++i) {
    ASSERT_EQ(sb.f32()[i], yb.f32()[i]) << i;
    ASSERT_NEAR(sb.f32()[i], rb.f32()[i], 1e-4f * (1.0f + std::abs(rb.f32()[i])));
  }
}

// A Q4_K_M layer mixes formats in one shared-input call (Q4_K q/k, Q6_K v): one preparation of
// x serves them all, and each output matches its own linear() call bit for bit.
TEST(InterleaveForCpu, SharedInputMixesFormats) {
  if (!kernels::has_interleaved_matmul()) GTEST_SKIP() << "no interleaved int8 GEMM on this CPU";
  ThreadPool pool(2);
  constexpr int64_t m = 3, k = 512;
  const std::pair<DType, kernels::RowFormat> formats[] = {
      {DType::kQ4_K, kernels::RowFormat::kQ4_K},
      {DType::kQ6_K, kernels::RowFormat::kQ6_K},
      {DType::kQ4_0, kernels::RowFormat::kQ4_0}};
  std::vector<Buffer> rows, packed;
  std::vector<Tensor> weights;
  for (const auto& [dtype, format] : formats) {
    Buffer storage;
    Tensor w;
    if (dtype == DType::kQ4_0) {
      w = q4_0_weight(16, k, 7, storage);
    } else {
      const auto bytes = kernels::testing::random_kquant_rows(format, 16, k, 8);
      storage = Buffer({16, k}, dtype);
      std::copy(bytes.begin(), bytes.end(), static_cast<uint8_t*>(storage.view().data));
      w = storage.view();
    }
    Buffer p;
    weights.push_back(*interleave_for_cpu(w, p));
    rows.push_back(std::move(storage));
    packed.push_back(std::move(p));
  }
  Buffer x = random_input(m, k, 9);
  std::vector<Buffer> shared, alone;
  std::vector<Tensor> shared_t, alone_t;
  for (int i = 0; i < 3; ++i) {
    shared.emplace_back(Shape{m, 16});
    alone.emplace_back(Shape{m, 16});
  }
  for (int i = 0; i < 3; ++i) {
    shared_t.push_back(shared[i].view());
    alone_t.push_back(alone[i].view());
    ops::linear(x.view(), weights[i], {}, alone_t[i], pool);
  }
  ops::linear_shared_input(x.view(),
                           {{&weights[0], {}, &shared_t[0]},
                            {&weights[1], {}, &shared_t[1]},
                            {&weights[2], {}, &shared_t[2]}},
                           pool);
  for (int i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < m * 16; ++j) ASSERT_EQ(shared[i].f32()[j], alone[i].f32()[j]) << i;
  }
}

}  // namespace
}  // namespace lm
