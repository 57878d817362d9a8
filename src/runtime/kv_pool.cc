#include "runtime/kv_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "base/check.h"

namespace lm {

namespace {

bool is_kv_cache_dtype(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16 ||
         dtype == DType::kF8_E4M3 || dtype == DType::kF8_E5M2;
}

}  // namespace

std::optional<DType> parse_kv_cache_dtype(std::string_view name) {
  if (name == "fp8_e4m3fn" || name == "fp8" || name == "fp8_e4m3") return DType::kF8_E4M3;
  if (name == "fp8_e5m2") return DType::kF8_E5M2;
  if (name == "fp16" || name == "float16") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "fp32" || name == "float32") return DType::kF32;
  return std::nullopt;
}

DType default_kv_cache_dtype(bool int8_activation_dots) {
  return int8_activation_dots ? DType::kF16 : DType::kF32;
}

DType resolve_kv_cache_dtype(const std::optional<std::string>& name, bool int8_activations,
                             bool quantized_weights) {
  if (name) return parse_kv_cache_dtype(*name).value();
  return default_kv_cache_dtype(int8_activations && quantized_weights);
}

std::string_view kv_cache_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return "fp16";
    case DType::kBF16:
      return "bf16";
    case DType::kF8_E4M3:
      return "fp8_e4m3fn";
    case DType::kF8_E5M2:
      return "fp8_e5m2";
    default:
      return "fp32";
  }
}

KvPool::KvPool(const ModelConfig& config, int64_t num_blocks, int64_t block_size, DType dtype)
    : num_blocks_(num_blocks), block_size_(block_size), dtype_(dtype) {
  LM_CHECK(num_blocks >= 2 && block_size >= 1);  // block 0 is reserved
  LM_CHECK(is_kv_cache_dtype(dtype));
  const Shape shape{num_blocks, block_size, config.num_key_value_heads, config.head_dim};
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    keys_.emplace_back(shape, dtype);
    values_.emplace_back(shape, dtype);
    view_.k.push_back(keys_.back().view());
    view_.v.push_back(values_.back().view());
  }
}

void KvPool::return_pages(const std::vector<int32_t>& block_ids) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto block_bytes =
      static_cast<uintptr_t>(bytes_per_block() / 2 / static_cast<int64_t>(keys_.size()));
  // Runs of consecutive ids, so that blocks smaller than a page still free the pages they cover
  // together.
  std::vector<int32_t> ids = block_ids;
  std::ranges::sort(ids);
  std::vector<std::pair<uintptr_t, uintptr_t>> runs;  // byte offsets [begin, end)
  for (int32_t id : ids) {
    LM_CHECK(id >= 1 && id < num_blocks_);
    const uintptr_t begin = static_cast<uintptr_t>(id) * block_bytes;
    if (!runs.empty() && runs.back().second == begin) {
      runs.back().second += block_bytes;
    } else {
      runs.emplace_back(begin, begin + block_bytes);
    }
  }
  for (std::vector<Buffer>* buffers : {&keys_, &values_}) {
    for (Buffer& buffer : *buffers) {
      const auto base = reinterpret_cast<uintptr_t>(buffer.f32());
      for (auto [begin, end] : runs) {
        // Only whole pages: a page shared with a neighbouring block keeps its bytes.
        const uintptr_t first = (base + begin + page - 1) / page * page;
        const uintptr_t last = (base + end) / page * page;
        // NOTE: advice on private anonymous memory; a failure only leaves the pages resident.
        if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
      }
    }
  }
}

int64_t KvPool::bytes_per_block() const {
  if (keys_.empty()) return 0;
  const Shape& shape = keys_.front().shape();
  return 2 * static_cast<int64_t>(keys_.size()) * block_size_ * shape[2] * shape[3] *
         dtype_info(dtype_).block_bytes;
}

int64_t KvPool::bytes_per_token(const ModelConfig& config, DType dtype) {
  return config.num_hidden_layers * 2 * config.num_key_value_heads * config.head_dim *
         dtype_info(dtype).block_bytes;
}

}  // namespace lm
