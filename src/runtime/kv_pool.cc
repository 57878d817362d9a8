#include "runtime/kv_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "base/check.h"

namespace lm {

KvPool::KvPool(const ModelConfig& config, int64_t num_blocks, int64_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size) {
  LM_CHECK(num_blocks >= 2 && block_size >= 1);  // block 0 is reserved
  const Shape shape{num_blocks, block_size, config.num_key_value_heads, config.head_dim};
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    keys_.emplace_back(shape);
    values_.emplace_back(shape);
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
         static_cast<int64_t>(sizeof(float));
}

int64_t KvPool::bytes_per_token(const ModelConfig& config) {
  return config.num_hidden_layers * 2 * config.num_key_value_heads * config.head_dim *
         static_cast<int64_t>(sizeof(float));
}

}  // namespace lm
