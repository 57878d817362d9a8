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
  // Most prompt + max_new_tokens summed over the running sequences; a request that does not fit
  // waits at the head of the queue.
  int64_t max_batch_total_tokens = 16384;
  // A generated id in this list finishes its sequence (unless the request ignores EOS).
  std::vector<int32_t> eos_token_ids;
};

}  // namespace lm
