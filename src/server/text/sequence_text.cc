#include "server/text/sequence_text.h"

#include <cmath>

namespace lm {

SequenceText::SequenceText(const Tokenizer& tokenizer, std::vector<int32_t> prompt_ids,
                           SequenceTextOptions options)
    : tokenizer_(tokenizer),
      prompt_ids_(std::move(prompt_ids)),
      options_(std::move(options)),
      decoder_(tokenizer_, prompt_ids_, /*skip_special_tokens=*/false),
      stops_(options_.stop) {}

ResponseToken SequenceText::response_token(int32_t id, float logprob, std::string text) const {
  ResponseToken t;
  t.id = static_cast<uint32_t>(id);
  t.text = std::move(text);
  t.logprob = logprob;
  t.special = tokenizer_.is_special(id);
  return t;
}

SequenceText::Step SequenceText::add(const TokenEvent& event) {
  Step step;
  const SampleResult& sample = event.token;
  if (!sample.prompt_logprobs.empty()) add_prefill(sample.prompt_logprobs);
  generated_ids_.push_back(sample.id);
  std::string text = decoder_.push(sample.id);
  const bool stop_matched = stops_.feed(text).has_value();
  step.token = response_token(sample.id, sample.logprob, std::move(text));
  for (const TokenLogprob& alt : sample.top_tokens) {
    const int32_t ids[] = {alt.id};
    step.top_tokens.push_back(response_token(alt.id, alt.logprob, tokenizer_.decode(ids, false)));
  }
  tokens_.push_back(step.token);
  if (!step.top_tokens.empty()) top_tokens_.push_back(step.top_tokens);
  if (event.finish_reason) {
    step.finish_reason = event.finish_reason;
  } else if (stop_matched) {
    step.finish_reason = FinishReason::kStopSequence;
  }
  return step;
}

GeneratedSequence SequenceText::result(FinishReason reason, std::optional<uint64_t> seed) const {
  GeneratedSequence s;
  s.generated_text = tokenizer_.decode(generated_ids_, /*skip_special_tokens=*/true);
  if (options_.return_full_text) s.generated_text = options_.inputs + s.generated_text;
  s.finish_reason = finish_reason_name(reason);
  s.generated_tokens = num_generated();
  s.seed = seed;
  s.prefill = prefill_;
  s.tokens = tokens_;
  s.top_tokens = top_tokens_;
  return s;
}

void SequenceText::add_prefill(const std::vector<float>& logprobs) {
  // TGI's prefill tokens: each prompt token decoded alone (special tokens kept); the first has no
  // logprob (null).
  prefill_.clear();
  for (size_t i = 0; i < prompt_ids_.size(); ++i) {
    const int32_t ids[] = {prompt_ids_[i]};
    ResponsePrefillToken& t = prefill_.emplace_back();
    t.id = static_cast<uint32_t>(prompt_ids_[i]);
    t.text = tokenizer_.decode(ids, /*skip_special_tokens=*/false);
    if (i > 0 && i - 1 < logprobs.size()) t.logprob = logprobs[i - 1];
  }
}

double SequenceText::mean_logprob() const {
  if (tokens_.empty()) return -INFINITY;
  double sum = 0;
  for (const auto& t : tokens_) sum += t.logprob;
  return sum / static_cast<double>(tokens_.size());
}

}  // namespace lm
