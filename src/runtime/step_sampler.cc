#include "runtime/step_sampler.h"

#include <algorithm>
#include <string>

#include "base/check.h"
#include "runtime/logits_processors.h"

namespace lm {

Sampler& StepSampler::sampler_for(const Sequence& seq) {
  std::unique_ptr<Sampler>& sampler = samplers_[seq.id];
  if (!sampler) {
    sampler = std::make_unique<Sampler>(
        seq.request.sampling,
        std::span<const int32_t>(seq.token_ids).first(static_cast<size_t>(seq.num_prompt_tokens)));
  }
  return *sampler;
}

std::future<void> StepSampler::start_grammar_masks(const ScheduledBatch& batch) {
  grammar_rows_.clear();
  for (const ScheduledSequence& entry : batch.sequences) {
    if (!entry.samples) continue;
    const Sequence& seq = *entry.sequence;
    GrammarRow& row = grammar_rows_.emplace_back();
    if (!seq.request.grammar) continue;
    std::unique_ptr<GrammarMatcher>& matcher = matchers_[seq.id];
    if (!matcher) matcher = std::make_unique<GrammarMatcher>(seq.request.grammar);
    row.matcher = matcher.get();
    row.proposed = entry.proposed_ids;
  }
  const bool any = std::any_of(grammar_rows_.begin(), grammar_rows_.end(),
                               [](const GrammarRow& row) { return row.matcher != nullptr; });
  if (!any) return {};
  // Only the helper thread touches grammar_rows_ until the future is waited for.
  return std::async(std::launch::async, [this] {
    for (GrammarRow& row : grammar_rows_) {
      if (row.matcher == nullptr) continue;
      const std::span<const int32_t> proposed = row.proposed;
      const auto words = static_cast<size_t>(grammar_bitmask_words(row.matcher->vocab_size()));
      int32_t num_accepted = 0;
      for (size_t r = 0;; ++r) {
        row.bitmasks.emplace_back(words);
        row.masked.push_back(row.matcher->fill_next_token_bitmask(row.bitmasks.back()));
        // A proposal the grammar refuses can never be sampled here: no row after it is.
        if (r == proposed.size() || !row.matcher->accept_token(proposed[r])) break;
        ++num_accepted;
      }
      if (num_accepted > 0) row.matcher->rollback(num_accepted);
    }
  });
}

std::vector<SampleResult> StepSampler::sample(
    const ScheduledBatch& batch, std::span<const int64_t> num_prompt_rows, std::span<float> logits,
    std::span<const std::optional<TokenLogprob>> device_choices) {
  std::vector<SampleResult> samples;
  const auto vocab = static_cast<size_t>(vocab_size_);
  size_t row = 0;           // logits row
  size_t sample_index = 0;  // sampling entry (grammar_rows_)
  for (size_t e = 0; e < batch.sequences.size(); ++e) {
    const ScheduledSequence& entry = batch.sequences[e];
    const Sequence& seq = *entry.sequence;
    Sampler& sampler = sampler_for(seq);
    if (num_prompt_rows[e] > 0) {
      gather_prompt_logprobs(seq, entry.first_position, num_prompt_rows[e],
                             std::span<const float>(logits).subspan(row * vocab));
      row += static_cast<size_t>(num_prompt_rows[e]);
    }
    if (!entry.samples) continue;  // a prompt chunk or recompute short of the end
    GrammarRow& grammar = grammar_rows_[sample_index++];
    const size_t num_rows = 1 + entry.proposed_ids.size();
    for (size_t r = 0; r < num_rows; ++r) {
      // NOTE: rows are sampled in order, each after the sampler observed the tokens before it
      // (penalties, the seeded draw's sequence), and a row's logits are the bits a lone decode
      // row would get (batch-invariant kernels): every token is the one plain decoding chooses.
      SampleResult token;
      if (!device_choices.empty() && device_choices[row + r]) {
        LM_CHECK(grammar.matcher == nullptr);
        token.id = device_choices[row + r]->id;
        token.logprob = device_choices[row + r]->logprob;
      } else {
        // NOTE: a row after a proposal its grammar refused has no mask; it is sampled only if
        // the row before chose that proposal anyway (every allowed logit -inf), and then
        // unmasked, so the rule the scheduler reads back (a row per matched proposal) holds.
        const bool masked =
            grammar.matcher != nullptr && r < grammar.masked.size() && grammar.masked[r];
        token = sampler.sample(
            logits.subspan((row + r) * vocab, vocab),
            masked ? std::span<const int32_t>(grammar.bitmasks[r]) : std::span<const int32_t>());
      }
      if (r == 0 && seq.wants_prompt_logits()) {
        if (auto gathered = prompt_logprobs_.extract(seq.id)) {
          token.prompt_logprobs = std::move(gathered.mapped().logprobs);
          token.prompt_top_tokens = std::move(gathered.mapped().top_tokens);
        }
      }
      sampler.observe(token.id);
      // Refused only when every allowed logit was -inf; the grammar then stays where it was.
      if (grammar.matcher != nullptr) grammar.matcher->accept_token(token.id);
      const bool accepted = r + 1 < num_rows && token.id == entry.proposed_ids[r];
      samples.push_back(std::move(token));
      if (!accepted) break;  // the rows after a rejected proposal saw a token that is not next
    }
    row += num_rows;
  }
  return samples;
}

void StepSampler::gather_prompt_logprobs(const Sequence& seq, int64_t first_position,
                                         int64_t num_rows, std::span<const float> logits) {
  const auto vocab = static_cast<size_t>(vocab_size_);
  const auto num_entries = static_cast<size_t>(seq.num_prompt_tokens - 1);
  const auto top_n = static_cast<size_t>(seq.request.prompt_top_n_tokens);
  PromptLogprobs& out = prompt_logprobs_[seq.id];
  out.logprobs.resize(num_entries);
  if (top_n > 0) out.top_tokens.resize(num_entries);
  for (int64_t r = 0; r < num_rows; ++r) {
    // The row at position p scores prompt token p + 1 (a recomputed chunk rewrites the same).
    // TGI's prefill logprob: the log-softmax of the raw logits (no processor applies to the
    // prompt).
    const auto p = static_cast<size_t>(first_position + r);
    const std::span<const float> scores = logits.subspan(static_cast<size_t>(r) * vocab, vocab);
    const LogSoftmax norm = log_softmax_of(scores);
    out.logprobs[p] = norm.logprob(scores[static_cast<size_t>(seq.token_ids[p + 1])]);
    if (top_n > 0) out.top_tokens[p] = top_n_logprobs(scores, norm, top_n, top_scratch_);
  }
}

void StepSampler::release(int64_t seq_id) {
  samplers_.erase(seq_id);
  matchers_.erase(seq_id);
  prompt_logprobs_.erase(seq_id);
}

}  // namespace lm
