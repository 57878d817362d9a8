#include "engine/block_manager.h"

#include <algorithm>
#include <string>

#include "base/check.h"

namespace lm {
namespace {

// splitmix64's finalizer: a cheap, well-mixed 64-bit step.
uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, int64_t max_evictable_blocks)
    : block_size_(block_size),
      blocks_(static_cast<size_t>(num_blocks)),
      max_evictable_(max_evictable_blocks < 0 ? num_blocks : max_evictable_blocks) {
  LM_CHECK(block_size >= 1);
  LM_CHECK(num_blocks >= 2);
  for (int64_t id = 1; id < num_blocks; ++id) free_ids_.push_back(static_cast<int32_t>(id));
}

uint64_t BlockManager::hash_block(uint64_t parent_hash, std::span<const int32_t> token_ids) {
  uint64_t h = mix(parent_hash);
  for (int32_t id : token_ids) h = mix(h ^ static_cast<uint32_t>(id));
  return h;
}

const BlockManager::Block& BlockManager::block(int32_t block_id) const {
  LM_CHECK(block_id >= 1 && block_id < num_blocks());
  return blocks_[static_cast<size_t>(block_id)];
}

BlockManager::Block& BlockManager::block(int32_t block_id) {
  LM_CHECK(block_id >= 1 && block_id < num_blocks());
  return blocks_[static_cast<size_t>(block_id)];
}

std::optional<int32_t> BlockManager::lookup(uint64_t hash, uint64_t parent_hash,
                                            std::span<const int32_t> token_ids) const {
  auto it = cached_ids_.find(hash);
  if (it == cached_ids_.end()) return std::nullopt;
  const Block& b = block(it->second);
  if (b.parent_hash != parent_hash || !std::ranges::equal(b.token_ids, token_ids))
    return std::nullopt;  // a hash collision: treat as a miss
  return it->second;
}

void BlockManager::acquire(int32_t block_id) {
  Block& b = block(block_id);
  LM_CHECK(b.hash.has_value());
  if (b.ref_count == 0) evictable_ids_.erase(b.evictable_pos);
  ++b.ref_count;
}

int32_t BlockManager::allocate() {
  LM_CHECK(can_allocate(1));
  int32_t block_id;
  if (!free_ids_.empty()) {
    block_id = free_ids_.front();
    free_ids_.pop_front();
  } else {
    block_id = evictable_ids_.front();
    evictable_ids_.pop_front();
    Block& evicted = block(block_id);
    cached_ids_.erase(*evicted.hash);
    evicted.hash.reset();
    evicted.token_ids.clear();
  }
  Block& b = block(block_id);
  LM_CHECK(b.ref_count == 0);
  b.ref_count = 1;
  // Written again before anything reads it: a pending return would only drop that.
  b.return_pending = false;
  if (!b.resident) ++num_resident_;
  b.resident = true;
  return block_id;
}

void BlockManager::release(int32_t block_id) {
  Block& b = block(block_id);
  LM_CHECK(b.ref_count > 0);
  if (--b.ref_count > 0) return;
  if (b.hash) {
    b.evictable_pos = evictable_ids_.insert(evictable_ids_.end(), block_id);
    if (static_cast<int64_t>(evictable_ids_.size()) > max_evictable_) return_least_recently_used();
  } else {
    free_ids_.push_front(block_id);
  }
}

void BlockManager::return_least_recently_used() {
  const int32_t block_id = evictable_ids_.front();
  evictable_ids_.pop_front();
  Block& b = block(block_id);
  cached_ids_.erase(*b.hash);
  b.hash.reset();
  b.token_ids.clear();
  b.resident = false;
  --num_resident_;
  b.return_pending = true;
  returned_ids_.push_back(block_id);
  free_ids_.push_back(block_id);
}

std::vector<int32_t> BlockManager::take_returned_blocks() {
  std::vector<int32_t> out;
  for (int32_t id : returned_ids_) {
    Block& b = block(id);
    if (!b.return_pending) continue;  // allocated again since
    b.return_pending = false;
    out.push_back(id);
  }
  returned_ids_.clear();
  return out;
}

bool BlockManager::cache(int32_t block_id, uint64_t hash, uint64_t parent_hash,
                         std::span<const int32_t> token_ids) {
  Block& b = block(block_id);
  LM_CHECK(b.ref_count > 0 && !b.hash);
  LM_CHECK(static_cast<int64_t>(token_ids.size()) == block_size_);
  if (!cached_ids_.emplace(hash, block_id).second) return false;
  b.hash = hash;
  b.parent_hash = parent_hash;
  b.token_ids.assign(token_ids.begin(), token_ids.end());
  return true;
}

Status BlockManager::check_invariants() const {
  auto fail = [](const std::string& what, int64_t block_id) -> Status {
    return Error{"block " + std::to_string(block_id) + ": " + what};
  };
  if (blocks_[0].ref_count != 0 || blocks_[0].hash) return fail("the reserved block is in use", 0);
  std::vector<int> num_listed(blocks_.size(), 0);
  for (int32_t id : free_ids_) {
    if (id < 1 || id >= num_blocks()) return fail("a free id out of range", id);
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (b.ref_count != 0 || b.hash) return fail("free but referenced or cached", id);
    ++num_listed[static_cast<size_t>(id)];
  }
  if (static_cast<int64_t>(evictable_ids_.size()) > max_evictable_)
    return fail("more evictable blocks than the budget", 0);
  for (int32_t id : evictable_ids_) {
    if (id < 1 || id >= num_blocks()) return fail("an evictable id out of range", id);
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (b.ref_count != 0 || !b.hash) return fail("evictable but referenced or uncached", id);
    ++num_listed[static_cast<size_t>(id)];
  }
  int64_t num_resident = 0;
  for (int64_t id = 1; id < num_blocks(); ++id) {
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (b.ref_count < 0) return fail("a negative reference count", id);
    num_resident += b.resident ? 1 : 0;
    if ((b.ref_count > 0 || b.hash) && !b.resident)
      return fail("referenced or cached but not resident", id);
    if (b.return_pending && (b.resident || b.ref_count > 0))
      return fail("to be returned but in use", id);
    const int expected = b.ref_count == 0 ? 1 : 0;
    if (num_listed[static_cast<size_t>(id)] != expected)
      return fail(b.ref_count == 0 ? "unreferenced but neither free nor evictable (leaked)"
                                   : "referenced yet listed as free (double free)",
                  id);
    if (b.hash) {
      auto it = cached_ids_.find(*b.hash);
      if (it == cached_ids_.end() || it->second != id) return fail("cached but not mapped", id);
      if (static_cast<int64_t>(b.token_ids.size()) != block_size_)
        return fail("cached but not full", id);
    }
  }
  if (num_resident != num_resident_) return fail("the resident count is off", 0);
  for (const auto& [hash, id] : cached_ids_) {
    if (id < 1 || id >= num_blocks() || blocks_[static_cast<size_t>(id)].hash != hash)
      return fail("mapped but not cached under that hash", id);
  }
  return {};
}

}  // namespace lm
