// BlockManager: owns the KV cache's physical block ids (block 0 reserved, spec §5.5): a free list,
// per-block reference counts, and the prefix cache of full computed blocks, keyed by a hash chain
// and evicted least-recently-used. It also knows which blocks are resident (written since their
// memory was last handed back), so that resident memory follows the working set: freed blocks
// are reused most recently freed first, and unreferenced cached blocks beyond a budget are
// dropped and listed for their memory's owner to return. Plain data; the Scheduler decides which
// sequence holds what.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/result.h"

namespace lm {

class BlockManager {
 public:
  // The hash chain's seed: the parent hash of a sequence's first block.
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;

  // `num_blocks` counts block 0, which is never handed out. `max_evictable_blocks`: the most
  // cached blocks kept with no reference (the prefix cache's resident budget); < 0: no limit.
  BlockManager(int64_t num_blocks, int64_t block_size, int64_t max_evictable_blocks = -1);

  // The key of a full block: its parent's key and its own token ids, so equal keys mean equal
  // prefixes (and equal K/V).
  static uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> token_ids);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t num_usable_blocks() const { return num_blocks() - 1; }
  // Blocks allocate() can hand out: never used, or cached with no reference (evictable).
  int64_t num_free_blocks() const {
    return static_cast<int64_t>(free_ids_.size() + evictable_ids_.size());
  }
  int64_t num_used_blocks() const { return num_usable_blocks() - num_free_blocks(); }
  int64_t num_cached_blocks() const { return static_cast<int64_t>(cached_ids_.size()); }
  // Blocks written since their memory was last returned (or since start).
  int64_t num_resident_blocks() const { return num_resident_; }
  int64_t max_evictable_blocks() const { return max_evictable_; }
  bool can_allocate(int64_t num) const { return num <= num_free_blocks(); }
  int32_t ref_count(int32_t block_id) const { return block(block_id).ref_count; }
  // True for a cached block nobody references: acquiring it takes it out of the free pool.
  bool is_evictable(int32_t block_id) const {
    return block(block_id).ref_count == 0 && block(block_id).hash.has_value();
  }

  // The cached block holding `token_ids` (one full block) after the block keyed `parent_hash`.
  std::optional<int32_t> lookup(uint64_t hash, uint64_t parent_hash,
                                std::span<const int32_t> token_ids) const;
  // One more reference to a cached (possibly evictable) block.
  void acquire(int32_t block_id);
  // A block with one reference: the most recently freed one first (its pages are resident), then
  // one never written or returned (lowest id first), else the least recently released cached
  // one (its cache entry is dropped). can_allocate(1) must hold.
  int32_t allocate();
  // Drops one reference; at zero a cached block becomes evictable (most recently used), any
  // other block free. An evictable block past max_evictable_blocks drops the least recently
  // used one from the cache: it becomes free and is listed for take_returned_blocks.
  void release(int32_t block_id);
  // The blocks dropped from the cache for the budget since the last call and not allocated again
  // since: their memory may be handed back to the OS (the K/V they held is never read again).
  std::vector<int32_t> take_returned_blocks();
  // Registers a referenced, full, computed block under `hash`. Returns false (and leaves the
  // block uncached) when another block already holds that key.
  bool cache(int32_t block_id, uint64_t hash, uint64_t parent_hash,
             std::span<const int32_t> token_ids);

  // Every usable block is exactly one of free, referenced, or cached-evictable; the cache map and
  // the lists agree with the blocks. For tests; names the first violation.
  Status check_invariants() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    std::optional<uint64_t> hash;  // set while the block is in the prefix cache
    uint64_t parent_hash = 0;
    std::vector<int32_t> token_ids;  // what the hash covers, to rule out collisions
    std::list<int32_t>::iterator evictable_pos;
    bool resident = false;        // written since start or since its memory was last returned
    bool return_pending = false;  // listed in returned_ids_
  };

  const Block& block(int32_t block_id) const;
  Block& block(int32_t block_id);
  // Drops the least recently used evictable block from the cache and returns its memory.
  void return_least_recently_used();

  int64_t block_size_;
  std::vector<Block> blocks_;  // indexed by block id; blocks_[0] is the reserved one
  int64_t max_evictable_;
  // No reference, not cached; handed out front first. Freed blocks go to the front (resident,
  // most recently freed first), returned ones to the back (after the never-written ones).
  std::deque<int32_t> free_ids_;
  std::list<int32_t> evictable_ids_;  // no reference, cached; front = least recently used
  std::unordered_map<uint64_t, int32_t> cached_ids_;  // hash -> block
  std::vector<int32_t> returned_ids_;                 // for take_returned_blocks
  int64_t num_resident_ = 0;
};

}  // namespace lm
