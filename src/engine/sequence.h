// Sequence: one request's progress inside the engine. Its two counters drive scheduling: a step
// computes some of the tokens in [num_computed_tokens, num_tokens()), so prefill, chunked prefill
// and decode are one rule. Owned by the Scheduler; the engine thread is its only user.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "engine/engine_request.h"
#include "engine/finish_reason.h"
#include "engine/token_sink.h"

namespace lm {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

// Speculative decoding over one request: proposals verified, and of them those accepted (tokens
// a step gave beyond its first, which needed no forward of their own).
struct RequestSpeculation {
  int64_t num_proposed = 0;
  int64_t num_accepted = 0;
};

struct Sequence {
  Sequence(int64_t seq_id, EngineRequest req, std::shared_ptr<TokenSink> token_sink)
      : id(seq_id),
        request(std::move(req)),
        sink(std::move(token_sink)),
        token_ids(request.prompt_ids),
        num_prompt_tokens(static_cast<int64_t>(request.prompt_ids.size())) {}

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_generated_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Token slots the sequence may ever need: what TGI's max_batch_total_tokens budget counts.
  int64_t max_tokens() const { return num_prompt_tokens + request.max_new_tokens; }
  bool is_prefilling() const { return num_computed_tokens < num_prompt_tokens; }
  // More than the newest token left to compute: a prompt, or a preempted sequence's prompt and
  // generated tokens being recomputed. Such steps spend the prefill budget.
  bool needs_prefill() const { return num_tokens() - num_computed_tokens > 1 || is_prefilling(); }
  // A prompt_logprobs request before its first token: each computed prompt position needs its
  // row of logits (the scheduler bounds its chunks, the executor computes and gathers the rows).
  bool wants_prompt_logits() const {
    return request.prompt_logprobs && num_generated_tokens() == 0;
  }

  int64_t id;
  EngineRequest request;
  std::shared_ptr<TokenSink> sink;  // opaque to the scheduler; only the Engine calls it
  std::vector<int32_t> token_ids;   // prompt, then generated tokens
  int64_t num_prompt_tokens;
  int64_t num_computed_tokens = 0;  // tokens whose K/V the executor holds
  // Physical KV blocks for positions [0, block_table.size() * block_size); empty while waiting.
  std::vector<int32_t> block_table;
  // Leading block_table entries released because they lie wholly before the window of every
  // position still to compute (EngineConfig::kv_window_tokens); they hold kPlaceholderBlock.
  int64_t num_released_blocks = 0;
  // Prefix-cache keys of the leading full computed blocks (a hash chain), for the next one's.
  std::vector<uint64_t> block_hashes;
  SequenceStatus status = SequenceStatus::kWaiting;
  std::optional<FinishReason> finish_reason;
  // Speculation: the most proposals it makes a step (the scheduler adapts it to its acceptance;
  // the config's speculate bounds it).
  int64_t proposal_limit = std::numeric_limits<int64_t>::max();
  RequestSpeculation speculation;  // over its life so far
};

}  // namespace lm
