// Helpers shared by the scheduler tests: a batch as comparable tuples and block tables, a prompt
// of consecutive ids, and the scheduler's invariants as an expectation.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <tuple>
#include <vector>

#include "base/result.h"
#include "engine/engine_request.h"
#include "engine/sampled_token.h"
#include "engine/scheduled_batch.h"

namespace lm::testing_helpers {

// One scheduled entry as (seq_id, first_position, num_tokens, samples).
using Entry = std::tuple<int64_t, int64_t, int64_t, bool>;

inline std::vector<Entry> entries(const ScheduledBatch& batch) {
  std::vector<Entry> out;
  for (const ScheduledSequence& s : batch.sequences)
    out.emplace_back(s.seq_id, s.first_position, s.num_tokens, s.samples);
  return out;
}

// The block tables of a batch's entries, in batch order.
inline std::vector<std::vector<int32_t>> tables(const ScheduledBatch& batch) {
  std::vector<std::vector<int32_t>> out;
  for (const ScheduledSequence& s : batch.sequences) out.push_back(s.block_table);
  return out;
}

// A prompt of `prompt_len` ids first_id, first_id + 1, ...
inline EngineRequest request(int64_t prompt_len, int64_t max_new_tokens, int32_t first_id = 100) {
  EngineRequest r;
  for (int64_t i = 0; i < prompt_len; ++i)
    r.prompt_ids.push_back(first_id + static_cast<int32_t>(i));
  r.max_new_tokens = max_new_tokens;
  return r;
}

// The executor's samples of a step: one token id per sampling entry, in batch order.
inline std::vector<SampleResult> samples(std::initializer_list<int32_t> ids) {
  std::vector<SampleResult> out;
  for (int32_t id : ids) {
    SampleResult r;
    r.id = id;
    out.push_back(r);
  }
  return out;
}

}  // namespace lm::testing_helpers

// EXPECT that Scheduler::check_invariants holds, with its message when it does not.
#define EXPECT_INVARIANTS(scheduler)                    \
  do {                                                  \
    Status status = (scheduler).check_invariants();     \
    EXPECT_TRUE(status.ok()) << status.error().message; \
  } while (0)
