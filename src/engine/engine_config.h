// The engine's batching limits (TGI's launcher flags of the same names) and stopping ids. Plain
// data; the launcher validates it, the Scheduler checks it once.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace lm {

struct EngineConfig {
  // Most sequences running at once; unset = no limit (TGI's default).
  std::optional<int64_t> max_batch_size;
  // Most prompt tokens computed in one step; longer prompts are split into chunks.
  int64_t max_batch_prefill_tokens = 4096;
  // Most prompt + max_new_tokens of one request (TGI's launcher checks max_total_tokens against
  // it). Memory admission itself is by KV blocks below.
  int64_t max_batch_total_tokens = 16384;
  // Tokens per KV cache block.
  int64_t block_size = 16;
  // KV cache blocks, block 0 included (reserved, never handed out). The launcher sets it from
  // the memory it measured; 0 derives it from max_batch_total_tokens (see kv_num_blocks).
  int64_t num_blocks = 0;
  // Reuse the K/V of full blocks whose token prefix an earlier sequence computed (spec §5.5).
  bool prefix_caching = true;
  // The most cached blocks kept resident with no sequence referencing them (ours,
  // --prefix-cache-max-mib): past it the least recently used one is dropped and its memory
  // handed back (Executor::return_blocks), so resident memory follows the working set instead of
  // filling the whole pool with old prefixes. < 0: no limit.
  int64_t max_cached_blocks = -1;
  // The inter-token latency target (ours, --max-step-latency-ms): when a step serves more than
  // one sequence, it takes only the prompt tokens its predicted time (StepCostModel) leaves room
  // for, and a prompt arriving behind a long one is admitted in the next step. 0: prompts take
  // the whole prefill budget in FIFO order (TGI's behaviour).
  int64_t max_step_latency_ms = 0;
  // The smallest prompt chunk a step gives a prefilling sequence under the latency target, so
  // that prompts progress even when the decodes alone fill the target.
  int64_t min_prefill_chunk_tokens = 16;
  // A generated id in this list finishes its sequence (unless the request ignores EOS).
  std::vector<int32_t> eos_token_ids;
  // > 0: no query ever reads a key more than kv_window_tokens - 1 positions behind it (every
  // layer of the model attends through a sliding window of at most this many tokens), so a
  // sequence's blocks wholly before the window of its next position go back to the pool and a
  // sequence needs at most max_blocks_spanned(kv_window_tokens) blocks (kv_window.h) however long
  // it gets. 0: a sequence keeps every block until it ends.
  int64_t kv_window_tokens = 0;
  // TGI's --speculate: a decoding sequence may propose up to this many tokens a step (by prompt
  // lookup, ngram_proposer.h, or the Engine's Proposer); the step's forward verifies them, and the
  // sequence advances by those its own sampling would have chosen plus one. Outputs are the same as
  // without it (see Scheduler::schedule). 0: off. NOTE: the verified rows' RoPE counts the whole
  // step's length, so a model whose RoPE depends on the length (dynamic NTK, LongRoPE) must leave
  // it off.
  int64_t speculate = 0;
  // With speculate > 0: whether a step proposes is decided by measuring (speculation_governor.h:
  // the faster of decoding with and without proposals, per batch size), so speculation never
  // costs more than a probe now and then. Off: every step proposes (exact, timing-independent
  // acceptance counts, as tests want). The server turns it on (--adaptive-speculation).
  bool adaptive_speculation = false;
};

// The block count the engine and the executor agree on: num_blocks, or when unset enough usable
// blocks (beside the reserved one) for max_batch_total_tokens.
inline int64_t kv_num_blocks(const EngineConfig& config) {
  if (config.num_blocks > 0) return config.num_blocks;
  return (config.max_batch_total_tokens + config.block_size - 1) / config.block_size + 1;
}

}  // namespace lm
