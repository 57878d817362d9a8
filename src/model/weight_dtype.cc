#include "model/weight_dtype.h"

#include <map>
#include <set>
#include <type_traits>
#include <vector>

#include "ops/convert_weight.h"

namespace lm {
namespace {

// Every weight matrix once (a tied LM head is the embedding table); Weights is LlamaWeights,
// const or not, and the pointers follow.
template <typename Weights>
auto matrices(Weights& w) {
  std::vector<decltype(&w.embed_tokens)> out{&w.embed_tokens};
  for (auto& l : w.layers)
    for (auto* t : l.linears()) out.push_back(t);
  if (w.lm_head.data != w.embed_tokens.data) out.push_back(&w.lm_head);
  return out;
}

int64_t fp32_vector_bytes(const LlamaWeights& w) {
  size_t floats = w.norm.size() + w.rope_freq_factors.size();
  for (const LlamaLayerWeights& l : w.layers) {
    floats += l.input_layernorm.size() + l.post_attention_layernorm.size() + l.q_bias.size() +
              l.k_bias.size() + l.v_bias.size() + l.q_norm.size() + l.k_norm.size() +
              l.attn_output_norm.size() + l.mlp_output_norm.size() +
              l.moe.shared_expert_gate.size();
  }
  return static_cast<int64_t>(floats * sizeof(float));
}

bool changes(const Tensor& t, std::optional<DType> dtype) {
  return dtype && ops::is_float_weight_dtype(t.dtype) && t.dtype != *dtype;
}

// A matrix and the dtype it is re-encoded to; T is Tensor, const or not.
template <typename T>
struct Target {
  T* tensor;
  DType dtype;
};

// The matrices quantize_float_weights quantizes, each with its block type (`block`, or
// llama.cpp's fallback where the rows are not whole K-quant super-blocks); Weights is
// LlamaWeights, const or not.
template <typename Weights>
auto to_quantize(Weights& w, DType block) {
  using T = std::remove_pointer_t<decltype(&w.lm_head)>;
  std::vector<Target<T>> out;
  const auto add = [&](T* t) {
    if (const std::optional<DType> target = ops::load_quantization_target(*t, block))
      out.push_back({t, *target});
  };
  for (auto& layer : w.layers) {
    for (auto* t : layer.linears()) {
      if (t != &layer.moe.router) add(t);
    }
  }
  if (w.lm_head.data != w.embed_tokens.data) add(&w.lm_head);
  return out;
}

int64_t converted_bytes(const Tensor& t, DType dtype) {
  return static_cast<int64_t>(*dtype_bytes(dtype, static_cast<uint64_t>(t.numel())));
}

constexpr int64_t kAlign = 64;

int64_t aligned(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Writes each of `targets` as its dtype (with `encode`: convert_weight or quantize_weight) into
// `arena`, allocated here as one huge-page buffer (nothing when there are no targets), the matrices
// spread over `pool`, and repoints them there; `done` is called with each source afterwards. Each
// matrix's bytes are followed by row_floats floats a row (LLM.int8's absmax), which `encode`
// finds right after them (at dst + aligned(its bytes)).
void reencode_into_arena(const std::vector<Target<Tensor>>& targets, Buffer& arena,
                         ThreadPool& pool,
                         const std::function<Tensor(const Tensor&, DType, void*)>& encode,
                         const std::function<void(const Tensor& source)>& done,
                         int64_t row_floats = 0) {
  if (targets.empty()) return;
  std::vector<int64_t> offsets;  // of each matrix in the arena
  int64_t total = 0;
  for (const Target<Tensor>& t : targets) {
    offsets.push_back(total);
    total += aligned(converted_bytes(*t.tensor, t.dtype)) +
             aligned(row_floats * t.tensor->dim(0) * static_cast<int64_t>(sizeof(float)));
  }
  arena = Buffer::of_bytes(total, Buffer::Pages::kHuge);
  auto* base = static_cast<uint8_t*>(arena.view().data);
  pool.parallel_for(static_cast<int64_t>(targets.size()), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Target<Tensor>& t = targets[static_cast<size_t>(i)];
      const Tensor source = *t.tensor;
      *t.tensor = encode(source, t.dtype, base + offsets[static_cast<size_t>(i)]);
      if (done) done(source);
    }
  });
}

}  // namespace

WeightsSummary summarize_weights(const LlamaWeights& weights, std::optional<DType> dtype,
                                 std::optional<DType> quantize) {
  WeightsSummary s;
  std::set<std::string_view> stored;
  std::map<const void*, DType> quantized;  // data -> its block type
  if (quantize) {
    for (const Target<const Tensor>& t : to_quantize(weights, *quantize))
      quantized.emplace(t.tensor->data, t.dtype);
  }
  for (const Tensor* t : matrices(weights)) {
    ++s.num_matrices;
    stored.insert(dtype_name(t->dtype));
    if (is_quantized(t->dtype)) ++s.num_quantized;
    if (quantized.contains(t->data)) {
      ++s.num_converted;
      s.bytes += converted_bytes(*t, quantized.at(t->data));
    } else if (changes(*t, dtype)) {
      ++s.num_converted;
      s.bytes += converted_bytes(*t, *dtype);
    } else {
      s.bytes += t->dim(0) * t->row_bytes();
    }
  }
  for (std::string_view name : stored) {
    if (!s.stored_dtypes.empty()) s.stored_dtypes += ", ";
    s.stored_dtypes += name;
  }
  s.bytes += fp32_vector_bytes(weights);
  return s;
}

std::optional<DType> load_quantization_dtype(std::string_view flag) {
  if (flag == "q8_0") return DType::kQ8_0;
  if (flag == "q4_0") return DType::kQ4_0;
  if (flag == "q4_1") return DType::kQ4_1;
  if (flag == "q5_0") return DType::kQ5_0;
  if (flag == "q5_1") return DType::kQ5_1;
  if (flag == "q4_k") return DType::kQ4_K;
  if (flag == "q5_k") return DType::kQ5_K;
  if (flag == "q6_k") return DType::kQ6_K;
  if (flag == "bitsandbytes-nf4") return DType::kNF4;
  if (flag == "bitsandbytes-fp4") return DType::kFP4;
  if (flag == "eetq" || flag == "bitsandbytes") return DType::kQ8_0;
  if (flag == "fp8") return DType::kF8_E4M3;
  return std::nullopt;
}

ops::RowQuantizer load_row_quantizer(std::string_view flag) {
  if (flag == "eetq") return ops::RowQuantizer::kEetq;
  if (flag == "bitsandbytes") return ops::RowQuantizer::kLlmInt8;
  if (flag == "fp8") return ops::RowQuantizer::kFp8Tensor;
  return ops::RowQuantizer::kBlockType;
}

int64_t quantize_float_weights(LlamaWeights& w, DType block, ops::RowQuantizer quantizer,
                               Buffer& arena, ThreadPool& pool,
                               const std::function<void(const Tensor& source)>& quantized,
                               std::deque<Fp8Scales>* fp8_scales) {
  const std::vector<Target<Tensor>> targets = to_quantize(w, block);
  const bool fp8 = quantizer == ops::RowQuantizer::kFp8Tensor;
  LM_CHECK(!fp8 || fp8_scales != nullptr);
  // The floats written after each matrix: LLM.int8's absmax a row, FP8's one scale.
  const auto scales_of = [](const Tensor& t, DType dtype, void* dst) {
    return reinterpret_cast<float*>(static_cast<uint8_t*>(dst) +
                                    aligned(converted_bytes(t, dtype)));
  };
  reencode_into_arena(
      targets, arena, pool,
      [&](const Tensor& t, DType dtype, void* dst) {
        float* scales = nullptr;
        if (quantizer == ops::RowQuantizer::kLlmInt8 || fp8) scales = scales_of(t, dtype, dst);
        return ops::quantize_weight(t, dtype, dst, quantizer, scales);
      },
      quantized, quantizer == ops::RowQuantizer::kLlmInt8 || fp8 ? 1 : 0);
  if (fp8) {
    // One scale a tensor, applied in fp32 (as TGI's FP8 kernels apply it).
    for (const Target<Tensor>& t : targets) {
      Fp8Scales& s = fp8_scales->emplace_back();
      s.grid = {*scales_of(*t.tensor, t.dtype, t.tensor->data)};
      s.block_rows = t.tensor->dim(0);
      s.block_cols = t.tensor->dim(1);
      s.grid_cols = 1;
      t.tensor->fp8_scales = &s;
    }
  }
  return static_cast<int64_t>(targets.size());
}

void convert_float_weights(LlamaWeights& w, DType dtype, Buffer& arena, ThreadPool& pool,
                           const std::function<void(const Tensor& source)>& converted) {
  const bool tied = w.lm_head.data == w.embed_tokens.data;
  std::vector<Target<Tensor>> to_convert;
  for (Tensor* t : matrices(w))
    if (changes(*t, dtype)) to_convert.push_back({t, dtype});
  reencode_into_arena(to_convert, arena, pool, ops::convert_weight, converted);
  if (tied) w.lm_head = w.embed_tokens;
}

}  // namespace lm
