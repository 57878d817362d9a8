// Pre-quantized Linears on hand-built packs: each format's layout read back exactly (the
// repacked GGML blocks decoded here by their spec equal s * (q - z)), the block format chosen, act
// order regrouped (modules of many shapes in one checkpoint, repacked together), and hostile
// tensors refused with one error naming the tensor. The
// quantization_config reader and --quantize against it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>

#include "base/fp16.h"
#include "loader/quantization_config.h"
#include "loader/quantized_checkpoint.h"

namespace lm {
namespace {

// Tensors built in memory, with storage that lives as long as the checkpoint.
struct Checkpoint {
  std::map<std::string, Tensor> tensors;
  std::vector<std::shared_ptr<std::vector<uint8_t>>> storage;
  std::vector<std::shared_ptr<const void>> owners;

  template <typename T>
  void add(const std::string& name, DType dtype, Shape shape, const std::vector<T>& values) {
    auto bytes = std::make_shared<std::vector<uint8_t>>(values.size() * sizeof(T));
    std::memcpy(bytes->data(), values.data(), bytes->size());
    tensors[name] = Tensor{dtype, std::move(shape), bytes->data(), Device::kCpu};
    storage.push_back(bytes);
  }
};

// Row n of a repacked weight decoded from its GGML layout (kernels/cpu/row_format.h).
std::vector<float> decode_row(const Tensor& w, int64_t n) {
  const int64_t k = w.dim(1);
  std::vector<float> out(static_cast<size_t>(k));
  const auto* row = static_cast<const uint8_t*>(w.data) + n * w.row_bytes();
  if (w.dtype == DType::kF32) {
    std::memcpy(out.data(), row, static_cast<size_t>(k) * 4);
    return out;
  }
  const int64_t block_bytes = dtype_info(w.dtype).block_bytes;
  if (w.dtype == DType::kQ4_Z128) {  // {fp16 d, u8 z, u8 0, 4 x Q4_0's 16 nibble bytes} per 128
    for (int64_t b = 0; b < k / 128; ++b) {
      const uint8_t* p = row + b * block_bytes;
      uint16_t d16;
      std::memcpy(&d16, p, 2);
      EXPECT_LE(p[2], 15);
      EXPECT_EQ(p[3], 0);
      for (int i = 0; i < 128; ++i) {
        const int q = (p[4 + 16 * (i / 32) + i % 16] >> (i % 32 < 16 ? 0 : 4)) & 0xf;
        out[static_cast<size_t>(b * 128 + i)] = fp16_to_fp32(d16) * static_cast<float>(q - p[2]);
      }
    }
    return out;
  }
  for (int64_t b = 0; b < k / 32; ++b) {
    const uint8_t* p = row + b * block_bytes;
    uint16_t d16;
    std::memcpy(&d16, p, 2);
    const float d = fp16_to_fp32(d16);
    for (int i = 0; i < 32; ++i) {
      int q = 0;
      if (w.dtype == DType::kQ8_0) {
        q = static_cast<int8_t>(p[2 + i]);
      } else if (w.dtype == DType::kQ4_0) {
        q = ((p[2 + i % 16] >> (i < 16 ? 0 : 4)) & 0xf) - 8;
      } else {  // Q5_0
        uint32_t qh;
        std::memcpy(&qh, p + 2, 4);
        q = (((p[6 + i % 16] >> (i < 16 ? 0 : 4)) & 0xf) | (((qh >> i) & 1) << 4)) - 16;
      }
      out[static_cast<size_t>(b * 32 + i)] = d * static_cast<float>(q);
    }
  }
  return out;
}

// The weight as the input's columns see it (a regrouped weight's column_order undone).
std::vector<float> weight_values(const Tensor& w) {
  const int64_t rows = w.dim(0), k = w.dim(1);
  std::vector<float> out(static_cast<size_t>(rows * k));
  for (int64_t n = 0; n < rows; ++n) {
    const std::vector<float> row = decode_row(w, n);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t col = w.column_order != nullptr ? w.column_order[j] : j;
      out[static_cast<size_t>(n * k + col)] = row[static_cast<size_t>(j)];
    }
  }
  return out;
}

// A GPTQ module [rows, cols] with random stored values, zeros and fp16 scales: the tensors as
// AutoGPTQ / gptqmodel write them, and the exact weight s * (q - z).
struct GptqCase {
  int bits = 4;
  int64_t rows = 16, cols = 128, group_size = 32;
  bool v1 = true;
  bool act_order = false;
  int zero = -1;  // -1: random zero-points; else every zero-point (8 / 128: symmetric)
  uint32_t seed = 1;
};

std::vector<float> add_gptq(Checkpoint& c, const std::string& p, const GptqCase& g) {
  std::mt19937 rng(g.seed);
  const int per = 32 / g.bits, maxq = (1 << g.bits) - 1;
  const int64_t groups = g.group_size < 0 ? 1 : g.cols / g.group_size;
  std::vector<int32_t> g_idx(static_cast<size_t>(g.cols));
  for (int64_t k = 0; k < g.cols; ++k)
    g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(g.group_size < 0 ? 0 : k / g.group_size);
  if (g.act_order) std::shuffle(g_idx.begin(), g_idx.end(), rng);
  std::vector<uint32_t> qweight(static_cast<size_t>(g.cols / per * g.rows));
  std::vector<uint32_t> qzeros(static_cast<size_t>(groups * g.rows / per));
  std::vector<uint16_t> scales(static_cast<size_t>(groups * g.rows));
  std::vector<int> q(static_cast<size_t>(g.rows * g.cols)), z(static_cast<size_t>(groups * g.rows));
  for (int64_t k = 0; k < g.cols; ++k)
    for (int64_t n = 0; n < g.rows; ++n) {
      const int v = static_cast<int>(rng() % (maxq + 1));
      q[static_cast<size_t>(n * g.cols + k)] = v;
      qweight[static_cast<size_t>(k / per * g.rows + n)] |= static_cast<uint32_t>(v)
                                                            << (g.bits * (k % per));
    }
  for (int64_t gi = 0; gi < groups; ++gi)
    for (int64_t n = 0; n < g.rows; ++n) {
      const int v = g.zero >= 0 ? g.zero : static_cast<int>(rng() % (maxq + 1));
      z[static_cast<size_t>(gi * g.rows + n)] = v;
      qzeros[static_cast<size_t>(gi * g.rows / per + n / per)] |= static_cast<uint32_t>(v)
                                                                  << (g.bits * (n % per));
      scales[static_cast<size_t>(gi * g.rows + n)] =
          fp32_to_fp16(std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f, -9));
    }
  if (g.v1)  // stored as zero - 1, subtracted from the whole word (gptqmodel's v2 -> v1)
    for (uint32_t& w : qzeros) w -= g.bits == 4 ? 0x11111111u : 0x01010101u;
  c.add(p + ".qweight", DType::kI32, {g.cols / per, g.rows}, qweight);
  c.add(p + ".qzeros", DType::kI32, {groups, g.rows / per}, qzeros);
  c.add(p + ".scales", DType::kF16, {groups, g.rows}, scales);
  c.add(p + ".g_idx", DType::kI32, {g.cols}, g_idx);
  std::vector<float> exact(q.size());
  for (int64_t n = 0; n < g.rows; ++n)
    for (int64_t k = 0; k < g.cols; ++k) {
      const auto gi = static_cast<size_t>(g_idx[static_cast<size_t>(k)]);
      exact[static_cast<size_t>(n * g.cols + k)] =
          fp16_to_fp32(scales[gi * static_cast<size_t>(g.rows) + static_cast<size_t>(n)]) *
          static_cast<float>(q[static_cast<size_t>(n * g.cols + k)] -
                             z[gi * static_cast<size_t>(g.rows) + static_cast<size_t>(n)]);
    }
  return exact;
}

QuantizationConfig gptq_config(const GptqCase& g) {
  QuantizationConfig q;
  q.method = QuantMethod::kGptq;
  q.origin = "config.json";
  q.bits = g.bits;
  q.group_size = g.group_size;
  q.desc_act = g.act_order;
  q.gptq_v1_zeros = g.v1;
  return q;
}

struct Repacked {
  std::string error;
  Tensor weight;
  Checkpoint checkpoint;
};

Repacked repack(Checkpoint c, const QuantizationConfig& q, const std::string& module = "m") {
  Repacked r;
  auto summary = repack_quantized_linears(q, c.tensors, c.owners);
  if (!summary.ok()) {
    r.error = summary.error().message;
  } else {
    EXPECT_FALSE(c.tensors.contains(module + ".qweight"));
    r.weight = c.tensors.at(module + ".weight");
  }
  r.checkpoint = std::move(c);
  return r;
}

TEST(QuantizedCheckpoint, GptqRepacksExactlyIntoTheSmallestBlockFormat) {
  struct Expect {
    GptqCase g;
    DType dtype;
  };
  const std::vector<Expect> cases = {
      {{.zero = 8}, DType::kQ4_0},                        // v1 symmetric: stored 7
      {{.v1 = false, .zero = 8}, DType::kQ4_0},           // v2 symmetric: stored 8
      {{}, DType::kQ5_0},                                 // asymmetric 4-bit
      {{.v1 = false}, DType::kQ5_0},                      // gptq_v2 asymmetric
      {{.zero = 0}, DType::kQ5_0},                        // v1 zero 0: borrows in the word
      {{.group_size = -1}, DType::kQ4_Z128},              // per channel: blocks of 128
      {{.group_size = 128}, DType::kQ4_Z128},             // a zero point per block
      {{.group_size = 128, .zero = 8}, DType::kQ4_Z128},  // symmetric too: fewer bytes
      {{.cols = 384, .group_size = 128, .act_order = true}, DType::kQ4_Z128},  // regrouped
      {{.cols = 192, .group_size = -1}, DType::kQ5_0},        // rows not whole blocks of 128
      {{.group_size = 64, .act_order = true}, DType::kQ5_0},  // regrouped
      {{.bits = 8, .zero = 128}, DType::kQ8_0},               // symmetric 8-bit (incl. -128)
      {{.bits = 8}, DType::kF32},                             // asymmetric 8-bit: q - z in +-255
      {{.group_size = 16}, DType::kF32},                      // groups inside a block
  };
  for (const Expect& e : cases) {
    SCOPED_TRACE(::testing::Message() << "bits " << e.g.bits << " group " << e.g.group_size
                                      << " v1 " << e.g.v1 << " zero " << e.g.zero);
    Checkpoint c;
    const std::vector<float> exact = add_gptq(c, "m", e.g);
    const Repacked r = repack(std::move(c), gptq_config(e.g));
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.weight.dtype, e.dtype) << dtype_name(r.weight.dtype);
    EXPECT_EQ(r.weight.shape, (Shape{e.g.rows, e.g.cols}));
    EXPECT_EQ(r.weight.column_order != nullptr, e.g.act_order);
    EXPECT_EQ(weight_values(r.weight), exact);
  }
}

TEST(QuantizedCheckpoint, AwqReadsTheGemmNibbleOrder) {
  // Column 8c + j of a word lives in nibble {0, 4, 1, 5, 2, 6, 3, 7}[j]: pack value j + 1 for
  // column j (zero-point 0, scale 1) and read it back in column order.
  const int64_t rows = 8, cols = 32;
  const int nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  uint32_t word = 0;
  for (int j = 0; j < 8; ++j) word |= static_cast<uint32_t>(j + 1) << (4 * nibble[j]);
  Checkpoint c;
  c.add("m.qweight", DType::kI32, {cols, rows / 8}, std::vector<uint32_t>(cols, word));
  c.add("m.qzeros", DType::kI32, {1, rows / 8}, std::vector<uint32_t>{0});
  c.add("m.scales", DType::kF16, {1, rows}, std::vector<uint16_t>(rows, fp32_to_fp16(1.0f)));
  QuantizationConfig q;
  q.method = QuantMethod::kAwq;
  q.group_size = 32;
  const Repacked r = repack(std::move(c), q);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.weight.dtype, DType::kQ5_0);  // q - z in [1, 8]
  const std::vector<float> w = weight_values(r.weight);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; ++k) EXPECT_EQ(w[static_cast<size_t>(n * cols + k)], n + 1);
}

// An AWQ GEMM module [rows, cols] with random values, zero-points and fp16 scales: qweight
// [cols, rows / 8] and qzeros [groups, rows / 8] with row n in nibble {0, 4, 1, 5, 2, 6, 3, 7}[n %
// 8] of its word; the exact weight s * (q - z).
std::vector<float> add_awq(Checkpoint& c, const std::string& p, int64_t rows, int64_t cols,
                           int64_t group_size, uint32_t seed) {
  const int nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  std::mt19937 rng(seed);
  const int64_t groups = cols / group_size;
  std::vector<uint32_t> qweight(static_cast<size_t>(cols * rows / 8));
  std::vector<uint32_t> qzeros(static_cast<size_t>(groups * rows / 8));
  std::vector<uint16_t> scales(static_cast<size_t>(groups * rows));
  std::vector<int> q(static_cast<size_t>(rows * cols)), z(static_cast<size_t>(groups * rows));
  for (int64_t k = 0; k < cols; ++k)
    for (int64_t n = 0; n < rows; ++n) {
      const int v = static_cast<int>(rng() % 16);
      q[static_cast<size_t>(n * cols + k)] = v;
      qweight[static_cast<size_t>(k * rows / 8 + n / 8)] |= static_cast<uint32_t>(v)
                                                            << (4 * nibble[n % 8]);
    }
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t n = 0; n < rows; ++n) {
      const int v = static_cast<int>(rng() % 16);
      z[static_cast<size_t>(g * rows + n)] = v;
      qzeros[static_cast<size_t>(g * rows / 8 + n / 8)] |= static_cast<uint32_t>(v)
                                                           << (4 * nibble[n % 8]);
      scales[static_cast<size_t>(g * rows + n)] =
          fp32_to_fp16(std::ldexp(1.0f + static_cast<float>(rng() % 1024) / 1024.0f, -9));
    }
  c.add(p + ".qweight", DType::kI32, {cols, rows / 8}, qweight);
  c.add(p + ".qzeros", DType::kI32, {groups, rows / 8}, qzeros);
  c.add(p + ".scales", DType::kF16, {groups, rows}, scales);
  std::vector<float> exact(q.size());
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t k = 0; k < cols; ++k) {
      const auto i = static_cast<size_t>((k / group_size) * rows + n);
      exact[static_cast<size_t>(n * cols + k)] =
          fp16_to_fp32(scales[i]) * static_cast<float>(q[static_cast<size_t>(n * cols + k)] - z[i]);
    }
  return exact;
}

TEST(QuantizedCheckpoint, ModulesOfManyShapesRepackExactlyTogether) {
  // Several modules in one checkpoint are repacked on several threads, reusing one buffer for
  // their integers; the packs are unpacked in tiles of 256 rows (AWQ: and 32 columns). Shapes
  // that end mid-tile, larger and smaller modules in turn, each read back exactly.
  const std::vector<GptqCase> gptq = {
      {.rows = 272, .cols = 160, .zero = 8, .seed = 2},          // Q4_0, 1 + 1/16 row tiles
      {.rows = 24, .cols = 256, .seed = 3},                      // smaller after larger
      {.rows = 520, .cols = 128, .act_order = true, .seed = 4},  // regrouped
      {.rows = 264, .cols = 96, .seed = 5},                      // Q5_0
  };
  for (const int bits : {4, 8}) {
    SCOPED_TRACE(::testing::Message() << bits << "-bit");
    Checkpoint c;
    std::vector<std::vector<float>> exact;
    for (size_t i = 0; i < gptq.size(); ++i) {
      GptqCase g = gptq[i];
      g.bits = bits;
      if (bits == 8 && g.zero == 8) g.zero = 128;
      exact.push_back(add_gptq(c, "m" + std::to_string(i), g));
    }
    GptqCase config = gptq[0];
    config.bits = bits;
    auto summary = repack_quantized_linears(gptq_config(config), c.tensors, c.owners);
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    for (size_t i = 0; i < gptq.size(); ++i)
      EXPECT_EQ(weight_values(c.tensors.at("m" + std::to_string(i) + ".weight")), exact[i]) << i;
  }
  // AWQ: rows {rows, cols, group}; a config has one group size, so the group-16 module (144
  // columns: the last column tile half full; F32 rows, blocks would span groups) goes alone.
  const std::vector<std::vector<std::array<int64_t, 3>>> awq_checkpoints = {
      {{272, 160, 32}, {16, 64, 32}, {520, 96, 32}, {264, 128, 32}}, {{264, 144, 16}}};
  uint32_t seed = 10;
  for (const auto& modules : awq_checkpoints) {
    Checkpoint c;
    std::vector<std::vector<float>> exact;
    for (size_t i = 0; i < modules.size(); ++i) {
      const auto [rows, cols, group] = modules[i];
      exact.push_back(add_awq(c, "a" + std::to_string(i), rows, cols, group, seed++));
    }
    QuantizationConfig q;
    q.method = QuantMethod::kAwq;
    q.group_size = modules[0][2];
    auto summary = repack_quantized_linears(q, c.tensors, c.owners);
    ASSERT_TRUE(summary.ok()) << summary.error().message;
    for (size_t i = 0; i < modules.size(); ++i) {
      const Tensor& w = c.tensors.at("a" + std::to_string(i) + ".weight");
      EXPECT_EQ(w.dtype, modules[i][2] == 16 ? DType::kF32 : DType::kQ5_0) << i;
      EXPECT_EQ(weight_values(w), exact[i]) << i;
    }
  }
}

TEST(QuantizedCheckpoint, EachModulesPackedTensorsAreDoneOnceAndItsBytesListed) {
  Checkpoint c;
  for (int i = 0; i < 5; ++i)
    add_gptq(c, "m" + std::to_string(i),
             {.rows = 16 * (i + 1), .zero = 8, .seed = static_cast<uint32_t>(i)});
  std::map<const void*, std::string> name_of;
  for (const auto& [name, t] : c.tensors) name_of[t.data] = name;
  std::mutex mutex;  // called from the repacking threads
  std::map<std::string, int> done;
  auto summary =
      repack_quantized_linears(gptq_config({}), c.tensors, c.owners, [&](const Tensor& t) {
        std::lock_guard lock(mutex);
        ++done[name_of.at(t.data)];
      });
  ASSERT_TRUE(summary.ok()) << summary.error().message;
  EXPECT_EQ(done.size(), 5u * 4);  // qweight, qzeros, scales, g_idx of each
  for (const auto& [name, times] : done) EXPECT_EQ(times, 1) << name;
  ASSERT_EQ(summary->repacked_bytes.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    const Tensor& w = c.tensors.at("m" + std::to_string(i) + ".weight");
    const bool listed = std::ranges::any_of(summary->repacked_bytes, [&](auto r) {
      return r.data() == w.data && static_cast<int64_t>(r.size()) == w.dim(0) * w.row_bytes();
    });
    EXPECT_TRUE(listed) << i;
  }
}

// compressed-tensors pack-quantized: [N, K] int4 signed, packed 8 a word along K (+8 offset).
QuantizationConfig ct_config(bool symmetric, const std::string& format = "pack-quantized") {
  QuantizationConfig q;
  q.method = QuantMethod::kCompressedTensors;
  q.origin = "config.json";
  q.format = format;
  CompressedTensorsScheme s;
  s.targets = {"Linear"};
  s.format = format;
  s.bits = format == "pack-quantized" ? 4 : 8;
  s.strategy = "group";
  s.group_size = 32;
  s.symmetric = symmetric;
  q.schemes.push_back(s);
  return q;
}

Checkpoint ct_packed(int64_t rows, int64_t cols, int value, int zero) {
  Checkpoint c;
  uint32_t word = 0;
  for (int i = 0; i < 8; ++i) word |= static_cast<uint32_t>(value + 8) << (4 * i);
  c.add("m.weight_packed", DType::kI32, {rows, cols / 8},
        std::vector<uint32_t>(static_cast<size_t>(rows * cols / 8), word));
  c.add("m.weight_shape", DType::kI64, {2}, std::vector<int64_t>{rows, cols});
  c.add("m.weight_scale", DType::kF16, {rows, cols / 32},
        std::vector<uint16_t>(static_cast<size_t>(rows * cols / 32), fp32_to_fp16(0.5f)));
  uint32_t zword = 0;
  for (int i = 0; i < 8; ++i) zword |= static_cast<uint32_t>(zero + 8) << (4 * i);
  c.add("m.weight_zero_point", DType::kI32, {rows / 8, cols / 32},
        std::vector<uint32_t>(static_cast<size_t>(rows / 8 * cols / 32), zword));
  return c;
}

TEST(QuantizedCheckpoint, CompressedTensorsPackQuantized) {
  Repacked sym = repack(ct_packed(8, 64, -3, 0), ct_config(true));
  ASSERT_TRUE(sym.error.empty()) << sym.error;
  EXPECT_EQ(sym.weight.dtype, DType::kQ4_0);
  EXPECT_EQ(weight_values(sym.weight), std::vector<float>(8 * 64, -1.5f));
  EXPECT_FALSE(sym.checkpoint.tensors.contains("m.weight_zero_point"));
  Repacked asym = repack(ct_packed(8, 64, -3, 6), ct_config(false));
  ASSERT_TRUE(asym.error.empty()) << asym.error;
  EXPECT_EQ(asym.weight.dtype, DType::kQ5_0);  // -3 - 6 = -9: past Q4_0's [-8, 7]
  EXPECT_EQ(weight_values(asym.weight), std::vector<float>(8 * 64, -4.5f));
}

// One error naming the tensor, for each way a file can lie.
TEST(QuantizedCheckpoint, HostileTensorsNameTheTensor) {
  const GptqCase g;
  const auto gptq_error = [&](const std::function<void(Checkpoint&)>& spoil,
                              QuantizationConfig q = gptq_config(GptqCase{})) {
    Checkpoint c;
    add_gptq(c, "model.layers.0.mlp.up_proj", g);
    spoil(c);
    return repack(std::move(c), q, "model.layers.0.mlp.up_proj").error;
  };
  const std::string m = "model.layers.0.mlp.up_proj";
  std::string e = gptq_error([&](Checkpoint& c) {
    c.add(m + ".g_idx", DType::kI32, {100}, std::vector<int32_t>(100, 0));
  });
  EXPECT_NE(e.find(m + ".g_idx: has 100 entries for the 128 input columns"), std::string::npos)
      << e;
  e = gptq_error([&](Checkpoint& c) {
    c.add(m + ".g_idx", DType::kI32, {128}, std::vector<int32_t>(128, 9));
  });
  EXPECT_NE(e.find(m + ".g_idx: entry 0 is group 9, outside the 4 groups"), std::string::npos) << e;
  QuantizationConfig wrong_group = gptq_config(g);
  wrong_group.group_size = 64;
  e = gptq_error([](Checkpoint&) {}, wrong_group);
  EXPECT_NE(e.find(m + ".scales: has 4 groups, but group_size 64 over 128 input columns makes 2 "
                       "(mismatched group size)"),
            std::string::npos)
      << e;
  e = gptq_error([&](Checkpoint& c) {
    c.add(m + ".qweight", DType::kF32, {16, 16}, std::vector<float>(256));
  });
  EXPECT_NE(e.find(m + ".qweight: has dtype F32, expected I32"), std::string::npos) << e;
  e = gptq_error([&](Checkpoint& c) {  // a truncated pack: fewer packed rows than the scales say
    c.add(m + ".qweight", DType::kI32, {8, 16}, std::vector<uint32_t>(128));
  });
  EXPECT_NE(e.find(m + ".scales: has 4 groups, but group_size 32 over 64 input columns makes 2"),
            std::string::npos)
      << e;
  e = gptq_error([&](Checkpoint& c) {
    c.add(m + ".qzeros", DType::kI32, {4, 1}, std::vector<uint32_t>(4));
  });
  EXPECT_NE(e.find(m + ".qzeros: has shape [4, 1], expected [4, 2]"), std::string::npos) << e;
  e = gptq_error([&](Checkpoint& c) { c.tensors.erase(m + ".scales"); });
  EXPECT_NE(e.find(m + ".scales: is missing"), std::string::npos) << e;
  e = gptq_error([&](Checkpoint& c) {
    std::vector<uint16_t> scales(64, fp32_to_fp16(1.0f));
    scales[3] = 0x7e00;  // NaN
    c.add(m + ".scales", DType::kF16, {4, 16}, scales);
  });
  EXPECT_NE(e.find(m + ".weight: a scale is not finite"), std::string::npos) << e;
  e = gptq_error([&](Checkpoint& c) {
    c.add(m + ".weight", DType::kF16, {16, 128}, std::vector<uint16_t>(16 * 128));
  });
  EXPECT_NE(e.find(m + ".weight: stored both quantized and as a plain weight"), std::string::npos)
      << e;

  // compressed-tensors: a truncated pack, and an int8 zero-point outside the 4-bit range.
  Checkpoint c = ct_packed(8, 64, 1, 0);
  c.add("m.weight_packed", DType::kI32, {8, 3}, std::vector<uint32_t>(24));
  e = repack(std::move(c), ct_config(true)).error;
  EXPECT_NE(e.find("m.weight_packed: has shape [8, 3], but weight_shape [8, 64] of 4-bit values "
                   "packs into [8, 8] (truncated or mismatched pack)"),
            std::string::npos)
      << e;
  Checkpoint naive;
  naive.add("m.weight", DType::kI8, {8, 64}, std::vector<int8_t>(512, 3));
  naive.add("m.weight_scale", DType::kF16, {8, 2}, std::vector<uint16_t>(16, fp32_to_fp16(1)));
  naive.add("m.weight_zero_point", DType::kI8, {8, 2}, std::vector<int8_t>(16, 9));
  QuantizationConfig q = ct_config(false, "naive-quantized");
  q.schemes[0].bits = 4;
  e = repack(std::move(naive), q).error;
  EXPECT_NE(e.find("m.weight_zero_point: zero-point 9 is outside the 4-bit range [-8, 7]"),
            std::string::npos)
      << e;
}

std::string config_error(const std::string& quantization_config) {
  auto q = parse_quantization_config(R"({"quantization_config": )" + quantization_config + "}",
                                     "config.json", "/nonexistent");
  return q.ok() ? "" : q.error().message;
}

TEST(QuantizationConfig, ReadsEachMethodAndRefusesWhatIsNotBuilt) {
  auto q = parse_quantization_config(
      R"({"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128,
          "desc_act": true, "sym": false, "checkpoint_format": "gptq_v2"}})",
      "config.json", "/nonexistent");
  ASSERT_TRUE(q.ok()) << q.error().message;
  ASSERT_TRUE(q->has_value());
  EXPECT_EQ((*q)->method, QuantMethod::kGptq);
  EXPECT_TRUE((*q)->desc_act);
  EXPECT_FALSE((*q)->gptq_v1_zeros);
  auto none = parse_quantization_config(R"({"hidden_size": 8})", "config.json", "/nonexistent");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  EXPECT_NE(config_error(R"({"quant_method": "gptq", "bits": 3, "group_size": 128})")
                .find("quantization_config.bits is 3"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "awq", "bits": 4, "group_size": 128,
                             "version": "gemv"})")
                .find("\"gemv\": AWQ checkpoints in the GEMM packing"),
            std::string::npos);
  EXPECT_NE(
      config_error(R"({"quant_method": "exl2"})").find("quant_method \"exl2\" is not supported"),
      std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                             "config_groups": {"group_0": {"targets": ["Linear"],
                             "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}})")
                .find("weights.type \"float\" cannot be stored as pack-quantized"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                             "config_groups": {"group_0": {"targets": ["Linear"],
                             "weights": {"num_bits": 4, "type": "float", "strategy": "group",
                             "group_size": 16}}}})")
                .find("float weights are FP8 (8 bits; FP4 is not built)"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                             "config_groups": {"group_0": {"targets": ["Linear"],
                             "weights": {"num_bits": 8, "type": "float", "strategy": "block"}}}})")
                .find("block_structure must be two positive integers"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "fp8", "weight_block_size": [128]})")
                .find("quantization_config.weight_block_size must be two positive integers"),
            std::string::npos);
}

TEST(QuantizationConfig, ReadsFp8Methods) {
  auto q = parse_quantization_config(
      R"({"torch_dtype": "float16", "quantization_config": {"quant_method": "fp8",
          "activation_scheme": "dynamic", "weight_block_size": [128, 64]}})",
      "config.json", "/nonexistent");
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ((*q)->method, QuantMethod::kFp8);
  EXPECT_EQ((*q)->fp8_method, "fp8");
  EXPECT_EQ((*q)->fp8_block_rows, 128);
  EXPECT_EQ((*q)->fp8_block_cols, 64);
  auto fbgemm = parse_quantization_config(
      R"({"quantization_config": {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}})",
      "config.json", "/nonexistent");
  ASSERT_TRUE(fbgemm.ok()) << fbgemm.error().message;
  EXPECT_EQ((*fbgemm)->fp8_method, "fbgemm_fp8");
  EXPECT_EQ((*fbgemm)->fp8_block_rows, 0);
  auto ct = parse_quantization_config(
      R"({"dtype": "bfloat16", "quantization_config": {"quant_method": "compressed-tensors",
          "format": "float-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
          "weights": {"num_bits": 8, "type": "float", "strategy": "block",
          "block_structure": [128, 128]}, "input_activations": {"num_bits": 8, "type": "float",
          "strategy": "group", "group_size": 128, "dynamic": true}}}}})",
      "config.json", "/nonexistent");
  ASSERT_TRUE(ct.ok()) << ct.error().message;
  ASSERT_EQ((*ct)->schemes.size(), 1u);
  EXPECT_TRUE((*ct)->schemes[0].float_weights);
  EXPECT_EQ((*ct)->schemes[0].block_rows, 128);
  EXPECT_TRUE((*ct)->schemes[0].input_activations);
  EXPECT_NE(config_error(R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                             "config_groups": {"group_0": {"targets": ["Linear"],
                             "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                             "input_activations": {"num_bits": 8, "type": "int"}}}})")
                .find("input_activations must be of type \"float\" with float weights"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "fp8", "activation_scheme": "per-block"})")
                .find("activation_scheme is \"per-block\": dynamic or static"),
            std::string::npos);
}

// compressed-tensors' kv_cache_scheme: FP8 with a static scale per layer (the scales are read with
// the weights), with or without weight groups; other KV schemes refused by name.
TEST(QuantizationConfig, ReadsAnFp8KvCacheSchemeAndRefusesOthers) {
  auto kv_only = parse_quantization_config(
      R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "dense",
          "config_groups": {}, "kv_cache_scheme": {"num_bits": 8, "type": "float",
          "strategy": "tensor", "dynamic": false, "symmetric": true}}})",
      "config.json", "/nonexistent");
  ASSERT_TRUE(kv_only.ok()) << kv_only.error().message;
  EXPECT_TRUE((*kv_only)->kv_cache_fp8_scales);
  EXPECT_TRUE((*kv_only)->schemes.empty());
  auto with_weights = parse_quantization_config(
      R"({"quantization_config": {"quant_method": "compressed-tensors",
          "format": "float-quantized", "kv_cache_scheme": {"num_bits": 8, "type": "float"},
          "config_groups": {"group_0": {"targets": ["Linear"],
          "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}}})",
      "config.json", "/nonexistent");
  ASSERT_TRUE(with_weights.ok()) << with_weights.error().message;
  EXPECT_TRUE((*with_weights)->kv_cache_fp8_scales);
  EXPECT_EQ((*with_weights)->schemes.size(), 1u);
  const auto kv_error = [](const std::string& scheme) {
    return config_error(R"({"quant_method": "compressed-tensors", "format": "dense",
                            "kv_cache_scheme": )" +
                        scheme + "}");
  };
  EXPECT_NE(kv_error(R"({"num_bits": 8, "type": "int"})")
                .find("kv_cache_scheme must be FP8 (type \"float\", num_bits 8)"),
            std::string::npos);
  EXPECT_NE(kv_error(R"({"num_bits": 8, "type": "float", "strategy": "attn_head"})")
                .find("kv_cache_scheme strategy is \"attn_head\": only one scale per layer"),
            std::string::npos);
  EXPECT_NE(kv_error(R"({"num_bits": 8, "type": "float", "dynamic": true})")
                .find("kv_cache_scheme is dynamic"),
            std::string::npos);
  EXPECT_NE(kv_error(R"({"num_bits": "8", "type": "float"})").find("num_bits must be an integer"),
            std::string::npos);
}

// Every E4M3 and E5M2 byte decodes to the value its sign, exponent and mantissa fields give.
TEST(Fp8Values, EveryByteDecodesByItsFields) {
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<uint8_t>(b);
    const float sign = (b & 0x80) ? -1.0f : 1.0f;
    const int e4 = (b >> 3) & 0xf, m3 = b & 7;
    const float e4m3 = fp8_e4m3_to_fp32(byte);
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(e4m3)) << b;
    } else {
      const float want = sign * (e4 == 0 ? std::ldexp(static_cast<float>(m3), -9)
                                         : std::ldexp(1.0f + static_cast<float>(m3) / 8, e4 - 7));
      EXPECT_EQ(e4m3, want) << b;
    }
    const int e5 = (b >> 2) & 0x1f, m2 = b & 3;
    const float e5m2 = fp8_e5m2_to_fp32(byte);
    if (e5 == 31) {
      EXPECT_TRUE(m2 == 0 ? std::isinf(e5m2) : std::isnan(e5m2)) << b;
    } else {
      const float want = sign * (e5 == 0 ? std::ldexp(static_cast<float>(m2), -16)
                                         : std::ldexp(1.0f + static_cast<float>(m2) / 4, e5 - 15));
      EXPECT_EQ(e5m2, want) << b;
    }
  }
  EXPECT_EQ(fp8_e4m3_to_fp32(0x7e), 448.0f);  // E4M3FN's largest
}

// An FP8 module of [8, 64] bytes b(n, k) = (n * 64 + k) % 120: positive finite E4M3 and E5M2
// values from 0 (E4M3's subnormals, 2^-9 and up, and E5M2's, 2^-16 and up) to 240 / 24576.
uint8_t fp8_byte(int64_t n, int64_t k) { return static_cast<uint8_t>((n * 64 + k) % 120); }

Checkpoint fp8_module(DType scale_dtype, Shape scale_shape, const std::vector<float>& scales,
                      const std::string& scale_name = "m.weight_scale",
                      DType format = DType::kF8_E4M3) {
  Checkpoint c;
  std::vector<uint8_t> bytes(8 * 64);
  for (int64_t i = 0; i < 8 * 64; ++i) bytes[static_cast<size_t>(i)] = fp8_byte(i / 64, i % 64);
  c.add("m.weight", format, {8, 64}, bytes);
  if (scale_dtype == DType::kF32) {
    c.add(scale_name, scale_dtype, std::move(scale_shape), scales);
  } else {
    std::vector<uint16_t> h;
    for (float v : scales)
      h.push_back(scale_dtype == DType::kBF16 ? fp32_to_bf16(v) : fp32_to_fp16(v));
    c.add(scale_name, scale_dtype, std::move(scale_shape), h);
  }
  c.add("m.input_scale", DType::kF32, {1}, std::vector<float>{0.5f});
  return c;
}

QuantizationConfig fp8_config(int64_t block_rows = 0, int64_t block_cols = 0) {
  QuantizationConfig q;
  q.method = QuantMethod::kFp8;
  q.fp8_method = "fp8";
  q.origin = "config.json";
  q.fp8_block_rows = block_rows;
  q.fp8_block_cols = block_cols;
  return q;
}

TEST(QuantizedCheckpoint, Fp8ScalesPerTensorRowAndBlock) {
  const auto expect = [](const Repacked& r, const std::function<float(int64_t, int64_t)>& scale,
                         DType format = DType::kF8_E4M3) {
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.weight.dtype, DType::kF32);  // 8 rows: not whole FP8 panels
    EXPECT_FALSE(r.checkpoint.tensors.contains("m.weight_scale"));
    EXPECT_FALSE(r.checkpoint.tensors.contains("m.weight_scale_inv"));
    EXPECT_FALSE(r.checkpoint.tensors.contains("m.input_scale"));
    const auto* got = static_cast<const float*>(r.weight.data);
    for (int64_t n = 0; n < 8; ++n)
      for (int64_t k = 0; k < 64; ++k) {
        const uint8_t b = fp8_byte(n, k);
        const float v = format == DType::kF8_E4M3 ? fp8_e4m3_to_fp32(b) : fp8_e5m2_to_fp32(b);
        ASSERT_EQ(got[n * 64 + k], v * scale(n, k)) << n << "," << k;
      }
  };
  // Per tensor (AutoFP8): one fp32 scale, shape [].
  expect(repack(fp8_module(DType::kF32, {}, {0.0123f}), fp8_config()),
         [](int64_t, int64_t) { return 0.0123f; });
  // E5M2 bytes, one scale of shape [1].
  expect(
      repack(fp8_module(DType::kF32, {1}, {0.5f}, "m.weight_scale", DType::kF8_E5M2), fp8_config()),
      [](int64_t, int64_t) { return 0.5f; }, DType::kF8_E5M2);
  // Per row (fbgemm_fp8): [N, 1].
  std::vector<float> rows;
  for (int n = 0; n < 8; ++n) rows.push_back(0.001f * static_cast<float>(n + 1));
  expect(repack(fp8_module(DType::kF32, {8, 1}, rows), fp8_config()),
         [&](int64_t n, int64_t) { return rows[static_cast<size_t>(n)]; });
  // transformers' blocks of 4 x 32: weight_scale_inv [2, 2].
  const std::vector<float> blocks = {0.5f, 0.25f, 0.125f, 3.0f};
  expect(repack(fp8_module(DType::kF32, {2, 2}, blocks, "m.weight_scale_inv"), fp8_config(4, 32)),
         [&](int64_t n, int64_t k) { return blocks[static_cast<size_t>(n / 4 * 2 + k / 32)]; });
  // Blocks of 3 x 48 cut at the edges: [3, 2].
  const std::vector<float> cut = {1, 2, 3, 4, 5, 6};
  expect(repack(fp8_module(DType::kF32, {3, 2}, cut, "m.weight_scale_inv"), fp8_config(3, 48)),
         [&](int64_t n, int64_t k) { return cut[static_cast<size_t>(n / 3 * 2 + k / 48)]; });
}

// A Linear whose rows fill whole FP8 panels (16) is kept as the file's bytes with its scales; 8
// rows (above) are dequantized at load.
TEST(QuantizedCheckpoint, Fp8LinearsOfWholePanelsKeepTheirBytes) {
  Checkpoint c;
  std::vector<uint8_t> bytes(16 * 64);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i % 120);
  c.add("m.weight", DType::kF8_E5M2, {16, 64}, bytes);
  c.add("m.weight_scale_inv", DType::kF32, {2, 2}, std::vector<float>{1, 2, 3, 4});
  Repacked r = repack(std::move(c), fp8_config(8, 32));
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.weight.dtype, DType::kF8_E5M2);
  EXPECT_EQ(r.weight.layout, WeightLayout::kRows);
  EXPECT_EQ(std::memcmp(r.weight.data, bytes.data(), bytes.size()), 0);
  ASSERT_NE(r.weight.fp8_scales, nullptr);
  const Fp8Scales& s = *r.weight.fp8_scales;
  EXPECT_EQ(s.grid, (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(s.block_rows, 8);
  EXPECT_EQ(s.block_cols, 32);
  EXPECT_EQ(s.grid_cols, 2);

  Checkpoint ct = fp8_module(DType::kBF16, {8, 1}, std::vector<float>(8, 0.5f));
  ct.add("m.weight", DType::kF8_E4M3, {16, 64}, std::vector<uint8_t>(16 * 64, 0x38));
  ct.add("m.weight_scale", DType::kBF16, {16, 1}, std::vector<uint16_t>(16, fp32_to_bf16(0.5f)));
  QuantizationConfig cq = ct_config(true, "float-quantized");
  cq.schemes[0].float_weights = true;
  cq.schemes[0].bits = 8;
  cq.schemes[0].strategy = "channel";
  Repacked rc = repack(std::move(ct), cq);
  ASSERT_TRUE(rc.error.empty()) << rc.error;
  ASSERT_NE(rc.weight.fp8_scales, nullptr);
  EXPECT_EQ(rc.weight.fp8_scales->grid, std::vector<float>(16, 0.5f));  // bf16 scales as fp32
  EXPECT_EQ(rc.weight.fp8_scales->block_rows, 1);
  EXPECT_EQ(rc.weight.fp8_scales->block_cols, 64);
}

TEST(QuantizedCheckpoint, HostileFp8TensorsNameTheTensor) {
  const auto error = [](Checkpoint c, QuantizationConfig q = fp8_config()) {
    return repack(std::move(c), q).error;
  };
  Checkpoint nan = fp8_module(DType::kF32, {}, {1.0f});
  std::vector<uint8_t> bytes(8 * 64, 0x38);
  bytes[70] = 0xff;  // E4M3FN's NaN
  nan.add("m.weight", DType::kF8_E4M3, {8, 64}, bytes);
  std::string e = error(std::move(nan));
  EXPECT_NE(e.find("m.weight: holds a NaN or infinity (row 1, column 6)"), std::string::npos) << e;
  e = error(fp8_module(DType::kF32, {8, 2}, std::vector<float>(16, 1.0f)));
  EXPECT_NE(e.find("m.weight_scale: has shape [8, 2], expected [8, 1] for [8, 64] weights in "
                   "blocks of 1 x 64 (mismatched scale or block size)"),
            std::string::npos)
      << e;
  e = error(fp8_module(DType::kF32, {2, 2}, std::vector<float>(4, 1.0f), "m.weight_scale_inv"),
            fp8_config(4, 16));
  EXPECT_NE(e.find("m.weight_scale_inv: has shape [2, 2], expected [2, 4]"), std::string::npos)
      << e;
  Checkpoint e8m0 = fp8_module(DType::kF32, {}, {1.0f});
  e8m0.add("m.weight_scale", DType::kI8, {8, 2}, std::vector<int8_t>(16, 127));
  e = error(std::move(e8m0));
  EXPECT_NE(e.find("m.weight_scale: has dtype I8, expected F32, BF16 or F16"), std::string::npos)
      << e;
  Checkpoint missing = fp8_module(DType::kF32, {}, {1.0f});
  missing.tensors.erase("m.weight_scale");
  e = error(std::move(missing));
  EXPECT_NE(e.find("m.weight_scale: is missing"), std::string::npos) << e;
  e = error(fp8_module(DType::kF32, {}, {INFINITY}));
  EXPECT_NE(e.find("m.weight_scale: holds a non-finite scale"), std::string::npos) << e;
  // An int8 compressed-tensors group over an FP8 weight.
  e = error(fp8_module(DType::kF32, {8, 1}, std::vector<float>(8, 1.0f)),
            ct_config(true, "int-quantized"));
  EXPECT_NE(e.find("m: stored as FP8, but its config group's format is int-quantized with int "
                   "weights"),
            std::string::npos)
      << e;
}

TEST(QuantizationConfig, QuantizeFlagMustNameTheCheckpointsMethod) {
  QuantizationConfig gptq;
  gptq.method = QuantMethod::kGptq;
  gptq.origin = "m/config.json";
  EXPECT_TRUE(check_quantize_flag("gptq", gptq).ok());
  EXPECT_TRUE(check_quantize_flag("marlin", gptq).ok());
  EXPECT_EQ(check_quantize_flag("awq", gptq).error().message,
            "--quantize awq: the checkpoint is quantized with gptq (m/config.json); use "
            "--quantize gptq or leave it unset");
  EXPECT_NE(
      check_quantize_flag("gptq", std::nullopt).error().message.find("no quantization_config"),
      std::string::npos);
  QuantizationConfig fp8;
  fp8.method = QuantMethod::kFp8;
  EXPECT_TRUE(check_quantize_flag("fp8", fp8).ok());
  EXPECT_FALSE(check_quantize_flag("marlin", fp8).ok());
  QuantizationConfig ct = fp8;
  ct.method = QuantMethod::kCompressedTensors;
  ct.schemes.push_back(CompressedTensorsScheme{});
  EXPECT_FALSE(check_quantize_flag("fp8", ct).ok());
  ct.schemes[0].float_weights = true;
  EXPECT_TRUE(check_quantize_flag("fp8", ct).ok());
  EXPECT_TRUE(check_quantize_flag("compressed-tensors", ct).ok());
  EXPECT_NE(check_quantize_flag("fp8", std::nullopt).error().message.find("no quantization_config"),
            std::string::npos);
}

}  // namespace
}  // namespace lm
