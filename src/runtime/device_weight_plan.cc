#include "runtime/device_weight_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "kernels/cpu/q4_z128_blocks.h"
#include "model/rope_frequencies.h"
#include "ops/linear.h"

namespace lm {
namespace {

// The arena's form of a stored format no device kernel reads: our Q4_Z128 re-encoded exactly
// into GGML's blocks (Q4_0 where every value is a Q4_0 level, as symmetric GPTQ's are, else Q8_0:
// never the 16 bits of F16), anything else dequantized to F16.
kernels::RowFormat converted_format(kernels::RowFormat stored, const Tensor& w) {
  if (stored != kernels::RowFormat::kQ4_Z128) return kernels::RowFormat::kF16;
  const auto* rows = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.dim(0); ++r) {
    if (!kernels::q4_z128_fits_q4_0(rows + r * w.row_bytes(), w.dim(1)))
      return kernels::RowFormat::kQ8_0;
  }
  return kernels::RowFormat::kQ4_0;
}

Error lacks(const ModelConfig& c, const std::string& what) {
  return Error{"--device cuda: the CUDA runner does not compute " + what +
               " yet (this model: " + c.architecture_name + "); use --device cpu"};
}

// Adds matrices and vectors in order, each at the next aligned offset; a tensor already placed in
// the same device form (a tied LM head) is placed once.
class ArenaBuilder {
 public:
  explicit ArenaBuilder(DeviceWeightPlan& plan) : plan_(plan) {}

  Result<int32_t> matrix(const std::string& name, const Tensor& w, bool float_only) {
    if (w.empty() || w.rank() != 2) return Error{"the weight " + name + " is not a matrix"};
    if (w.layout != WeightLayout::kRows || w.fp8_scales != nullptr || w.column_order != nullptr ||
        w.int8_row_absmax != nullptr) {
      return Error{"--device cuda: the weight " + name +
                   " is stored in a form the CUDA runner does not read yet (FP8 with scales, "
                   "act-order GPTQ or LLM.int8); use --device cpu"};
    }
    const std::optional<kernels::RowFormat> stored = ops::row_format(w.dtype);
    if (!stored) {
      return Error{"--device cuda: the weight " + name + " has dtype " +
                   std::string(dtype_name(w.dtype)) +
                   ", which the CUDA runner does not read; use "
                   "--device cpu"};
    }
    DeviceMatrix m;
    m.name = name;
    m.source = &w;
    m.stored = *stored;
    const bool is_float = m.stored == kernels::RowFormat::kF32 ||
                          m.stored == kernels::RowFormat::kF16 ||
                          m.stored == kernels::RowFormat::kBF16;
    const bool keep = float_only ? is_float : device_reads_stored_format(m.stored);
    m.device = keep         ? m.stored
               : float_only ? kernels::RowFormat::kF16
                            : converted_format(m.stored, w);
    m.rows = w.dim(0);
    m.cols = w.dim(1);
    const auto key = std::pair{w.data, static_cast<int>(m.device)};
    if (const auto it = placed_.find(key); it != placed_.end()) return it->second;
    m.row_bytes = kernels::row_bytes(m.device, m.cols);
    m.bytes = m.row_bytes * m.rows;
    m.offset = next(m.bytes);
    if (m.converted()) ++plan_.num_converted;
    if (m.device != kernels::RowFormat::kF16 && m.device != kernels::RowFormat::kBF16)
      plan_.max_dequantized_elements = std::max(plan_.max_dequantized_elements, m.rows * m.cols);
    plan_.matrices.push_back(std::move(m));
    const auto index = static_cast<int32_t>(plan_.matrices.size() - 1);
    placed_.emplace(key, index);
    return index;
  }

  int32_t vector(const std::string& name, std::vector<float> values) {
    if (values.empty()) return -1;
    DeviceVector v;
    v.name = name;
    v.offset = next(static_cast<int64_t>(values.size() * sizeof(float)));
    v.values = std::move(values);
    plan_.vectors.push_back(std::move(v));
    return static_cast<int32_t>(plan_.vectors.size() - 1);
  }

 private:
  int64_t next(int64_t bytes) {
    const int64_t offset = plan_.arena_bytes;
    plan_.arena_bytes = device_aligned(offset + bytes);
    return offset;
  }

  DeviceWeightPlan& plan_;
  std::map<std::pair<const void*, int>, int32_t> placed_;
};

}  // namespace

bool device_reads_stored_format(kernels::RowFormat format) {
  using kernels::RowFormat;
  switch (format) {
    case RowFormat::kF32:
    case RowFormat::kF16:
    case RowFormat::kBF16:
    case RowFormat::kQ8_0:
    case RowFormat::kQ4_0:
    case RowFormat::kQ4_1:
      return true;
    default:
      return false;
  }
}

std::string DeviceWeightPlan::summary() const {
  std::map<std::string, int64_t> counts;
  for (const DeviceMatrix& m : matrices) {
    std::string key = kernels::row_format_info(m.device).name;
    if (m.converted()) key += std::string(" from ") + kernels::row_format_info(m.stored).name;
    ++counts[key];
  }
  std::string text = std::to_string(matrices.size()) + " matrices (";
  bool first = true;
  for (const auto& [key, count] : counts) {
    text += (first ? "" : ", ") + std::to_string(count) + " " + key;
    first = false;
  }
  char size[64];
  std::snprintf(size, sizeof size, "), %.2f GiB on the device",
                static_cast<double>(arena_bytes) / (1 << 30));
  return text + size;
}

Status check_cuda_runner_supports(const ModelConfig& c) {
  if (c.moe.num_experts > 0) return lacks(c, "mixture-of-experts layers");
  if (c.qk_norm) return lacks(c, "per-head query/key norms (Qwen3, Gemma 3)");
  if (c.gemma_scaling || c.sandwich_norms || c.mlp_activation != MlpActivation::kSilu)
    return lacks(c, "Gemma's embedding scale, sandwich norms and GeGLU MLP");
  if (c.final_logit_softcapping > 0 || c.attn_logit_softcapping > 0)
    return lacks(c, "logit soft-capping");
  // A window at least as long as the longest sequence never hides a position.
  if (c.local_rope || std::any_of(c.layer_sliding_windows.begin(), c.layer_sliding_windows.end(),
                                  [&](int64_t w) { return w > 0 && w < c.max_context(); }))
    return lacks(c, "sliding-window attention");
  if (c.rotary_dims() != c.head_dim) return lacks(c, "RoPE over part of each head");
  if (c.rope.depends_on_length())
    return lacks(c, "RoPE that depends on the sequence's length (dynamic NTK, LongRoPE)");
  // The GEMV reads each activation row with 16-byte loads.
  for (const int64_t width :
       {c.hidden_size, c.intermediate_size, c.num_attention_heads * c.head_dim,
        c.num_key_value_heads * c.head_dim})
    if (width % 4 != 0) return lacks(c, "a layer width that is not a multiple of 4");
  if (c.head_dim > 256 || c.head_dim % 2 != 0)
    return lacks(
        c, "attention heads of " + std::to_string(c.head_dim) + " dimensions (at most 256, even)");
  return {};
}

Result<DeviceWeightPlan> plan_device_weights(const ModelConfig& c, const LlamaWeights& weights) {
  if (Status s = check_cuda_runner_supports(c); !s.ok()) return s.error();
  DeviceWeightPlan plan;
  ArenaBuilder arena(plan);
  auto embed = arena.matrix("embed_tokens", weights.embed_tokens, /*float_only=*/true);
  if (!embed.ok()) return embed.error();
  plan.embed_tokens = *embed;
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const LlamaLayerWeights& w = weights.layers[l];
    const std::string prefix = "layers." + std::to_string(l) + ".";
    DeviceLayerSlots slots;
    for (auto [name, tensor, slot] : {std::tuple{"q_proj", &w.q_proj, &slots.q_proj},
                                      {"k_proj", &w.k_proj, &slots.k_proj},
                                      {"v_proj", &w.v_proj, &slots.v_proj},
                                      {"o_proj", &w.o_proj, &slots.o_proj},
                                      {"gate_proj", &w.gate_proj, &slots.gate_proj},
                                      {"up_proj", &w.up_proj, &slots.up_proj},
                                      {"down_proj", &w.down_proj, &slots.down_proj}}) {
      auto index = arena.matrix(prefix + name, *tensor, /*float_only=*/false);
      if (!index.ok()) return index.error();
      *slot = *index;
    }
    slots.input_layernorm = arena.vector(prefix + "input_layernorm", w.input_layernorm);
    slots.post_attention_layernorm =
        arena.vector(prefix + "post_attention_layernorm", w.post_attention_layernorm);
    slots.q_bias = arena.vector(prefix + "q_bias", w.q_bias);
    slots.k_bias = arena.vector(prefix + "k_bias", w.k_bias);
    slots.v_bias = arena.vector(prefix + "v_bias", w.v_bias);
    plan.layers.push_back(slots);
  }
  plan.norm = arena.vector("norm", weights.norm);
  auto head = arena.matrix("lm_head", weights.lm_head, /*float_only=*/false);
  if (!head.ok()) return head.error();
  plan.lm_head = *head;
  // The model's RoPE does not depend on the length (checked above): one table serves every step.
  RopeFrequencies rope = rope_frequencies(c, c.max_position_embeddings, weights.rope_freq_factors);
  plan.rope_attention_scaling = rope.attention_scaling;
  plan.rope_inv_freq = arena.vector("rope.inv_freq", std::move(rope.inv_freq));
  return plan;
}

}  // namespace lm
