// Paged attention through a sliding window never reads the block table entries wholly before the
// first row's window: the engine leaves placeholders there for blocks it released
// (EngineConfig::kv_window_tokens). Those entries are put on an unreadable page, so a read of
// one kills the test; the result must be the bits of the same call through an ordinary table.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/paged_attention.h"

namespace lm::kernels {
namespace {

// `table` laid out so that its first `num_unreadable` entries end an inaccessible page.
class GuardedTable {
 public:
  GuardedTable(const std::vector<int32_t>& table, int64_t num_unreadable) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    base_ = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(base_, MAP_FAILED);
    auto* second = reinterpret_cast<int32_t*>(static_cast<char*>(base_) + page_);
    data_ = second - num_unreadable;
    std::memcpy(second, table.data() + num_unreadable,
                (table.size() - static_cast<size_t>(num_unreadable)) * sizeof(int32_t));
    EXPECT_EQ(mprotect(base_, page_, PROT_NONE), 0);
  }
  ~GuardedTable() { munmap(base_, 2 * page_); }
  const int32_t* data() const { return data_; }

 private:
  size_t page_ = 0;
  void* base_ = nullptr;
  int32_t* data_ = nullptr;
};

TEST(PagedAttentionWindowTable, EntriesBeforeTheWindowAreNeverRead) {
  ThreadPool pool(2);
  const int64_t num_heads = 4, num_kv_heads = 2, head_dim = 16, block_size = 4, window = 8;
  const int64_t kv_row = num_kv_heads * head_dim;
  // One sequence: a decode at position 100 (reads [93, 100]) or a prompt chunk of 6 at 50
  // (its first row reads [43, 50]).
  struct Step {
    int32_t first_position, num_tokens;
  };
  for (const Step step : {Step{100, 1}, Step{50, 6}}) {
    SCOPED_TRACE("first position " + std::to_string(step.first_position));
    const int64_t num_positions = step.first_position + step.num_tokens;
    const int64_t max_blocks = (num_positions + block_size - 1) / block_size;
    const int64_t num_unread = (step.first_position - window + 1) / block_size;
    std::vector<int32_t> table(static_cast<size_t>(max_blocks));
    for (int64_t i = 0; i < max_blocks; ++i) table[static_cast<size_t>(i)] = 1 + i;
    const int64_t slots = (max_blocks + 1) * block_size;
    const auto k_pool = testing::random_floats(slots * kv_row, 1, -2.0f, 2.0f);
    const auto v_pool = testing::random_floats(slots * kv_row, 2);
    const auto q = testing::random_floats(step.num_tokens * num_heads * head_dim, 3, -2.0f, 2.0f);
    const int32_t query_begins[] = {0, step.num_tokens};
    const int32_t first_positions[] = {step.first_position};
    const AttentionOptions options{.scale = 0.25f, .sliding_window = window};
    for (Isa isa : testing::supported_isas()) {
      std::vector<float> expected(q.size()), got(q.size());
      paged_attention(q.data(), k_pool.data(), v_pool.data(), expected.data(), query_begins,
                      first_positions, table.data(), max_blocks, 1, num_heads, num_kv_heads,
                      head_dim, block_size, options, pool, isa);
      const GuardedTable guarded(table, num_unread);
      paged_attention(q.data(), k_pool.data(), v_pool.data(), got.data(), query_begins,
                      first_positions, guarded.data(), max_blocks, 1, num_heads, num_kv_heads,
                      head_dim, block_size, options, pool, isa);
      EXPECT_EQ(got, expected) << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace lm::kernels
