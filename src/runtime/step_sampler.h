// StepSampler: a step's logits rows turned into tokens, the same for every executor. Owns each
// running sequence's Sampler and, for a constrained one, its GrammarMatcher (created on first
// sight, freed on release), and the prompt logprobs gathered over a prompt_logprobs request's
// chunks. The CPU executor hands it every row's scores; the CUDA executor hands it the rows it
// copied back and the tokens the device chose for the others (device_sampling_route.h).
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sampled_token.h"
#include "engine/scheduled_batch.h"
#include "grammar/grammar_matcher.h"
#include "runtime/sampler.h"

namespace lm {

class StepSampler {
 public:
  explicit StepSampler(int64_t vocab_size) : vocab_size_(vocab_size) {}

  // Starts computing the constrained sampling rows' grammar masks on a helper thread (they need
  // no logits: the matchers hold every token sampled so far); an invalid future when no row is
  // constrained. Wait for it before sample(). An entry with proposals gets a mask for each of its
  // rows: the matcher advances through the proposals the grammar allows (each row's mask is the
  // state after the proposals before it) and is rolled back, so sample() finds it where it was.
  std::future<void> start_grammar_masks(const ScheduledBatch& batch);

  // The step's tokens, as Executor::execute reports them. Logits rows come entry by entry: an
  // entry's num_prompt_rows[e] prompt rows, then (if it samples) its sampling row and one per
  // proposal. `logits` holds the rows' scores ([rows, vocab_size]; processed in place); a row
  // with a value in `device_choices` (empty, or one per row) was chosen on the device (id and
  // logprob) and its scores are not read.
  std::vector<SampleResult> sample(
      const ScheduledBatch& batch, std::span<const int64_t> num_prompt_rows,
      std::span<float> logits, std::span<const std::optional<TokenLogprob>> device_choices = {});

  // The sequence's Sampler, created with its prompt on first sight.
  Sampler& sampler_for(const Sequence& seq);
  void release(int64_t seq_id);
  // Sequences holding a Sampler or a grammar matcher (seen and not yet released).
  int64_t num_sequences() const {
    return static_cast<int64_t>(std::max(samplers_.size(), matchers_.size()));
  }

 private:
  // Records a prompt_logprobs sequence's scores from its `num_rows` prompt rows of `logits`
  // (positions first_position, first_position + 1, ...).
  void gather_prompt_logprobs(const Sequence& seq, int64_t first_position, int64_t num_rows,
                              std::span<const float> logits);
  // One sampling entry's grammar: its matcher (null: unconstrained) and a next-token mask per
  // row it may sample (its first, then after each proposal the grammar allows).
  struct GrammarRow {
    GrammarMatcher* matcher = nullptr;
    std::span<const int32_t> proposed;  // the entry's proposals (the batch outlives the step)
    std::vector<std::vector<int32_t>> bitmasks;
    std::vector<bool> masked;  // per row; false: every token allowed
  };

  int64_t vocab_size_;
  // NOTE: a preempted sequence keeps its Sampler (RNG state, penalty counts) and its grammar
  // matcher (its generated tokens are kept too), so its recompute continues exactly where it
  // left off; only release frees them.
  std::unordered_map<int64_t, std::unique_ptr<Sampler>> samplers_;
  std::unordered_map<int64_t, std::unique_ptr<GrammarMatcher>> matchers_;
  std::vector<GrammarRow> grammar_rows_;  // this step's, by sampling entry
  // Prompt logprobs gathered until the request's first token takes them (index i scores prompt
  // token i + 1), with the alternatives when prompt_top_n_tokens > 0.
  struct PromptLogprobs {
    std::vector<float> logprobs;
    std::vector<std::vector<TokenLogprob>> top_tokens;
  };
  std::unordered_map<int64_t, PromptLogprobs> prompt_logprobs_;
  std::vector<int32_t> top_scratch_;  // top_n_logprobs' heap for prompt rows
};

}  // namespace lm
