// The sampler with a grammar's mask (as ModelExecutor drives it: fill the matcher's mask, sample,
// accept): the mask comes after the penalties and before the warpers (TGI's order), forces the
// choice whatever the logits say and keeps EOS out until the grammar may end. A hand-built
// 5-token vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "../tokenizer/tiny_vocab.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_matcher.h"
#include "grammar/grammar_vocab.h"
#include "runtime/logits_processors.h"
#include "runtime/sampler.h"

namespace lm {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kA = 0, kB = 1, kOne = 2, kTwo = 3, kEos = 4;

class SamplerGrammar : public testing::Test {
 protected:
  void SetUp() override {
    testing_tok::Json j = testing_tok::bpe_json({"a", "b", "1", "2", "</s>"}, {});
    j["added_tokens"] = {testing_tok::added(kEos, "</s>", /*special=*/true)};
    tokenizer_ = testing_tok::load(j);
    ASSERT_NE(tokenizer_, nullptr);
    // Logits 8 wide: 3 ids past the tokenizer's vocabulary.
    vocab_ = std::make_unique<GrammarVocab>(*tokenizer_, 8, std::vector<int32_t>{kEos});
    compiler_ = std::make_unique<GrammarCompiler>(*vocab_);
  }
  std::shared_ptr<const CompiledGrammar> compile(const char* regex) {
    auto grammar = compiler_->compile({GrammarKind::kRegex, regex});
    EXPECT_TRUE(grammar.ok()) << grammar.error().message;
    return grammar.ok() ? *grammar : nullptr;
  }
  // One constrained step: the matcher's mask into the sampler, the choice into the matcher.
  static SampleResult step(Sampler& sampler, GrammarMatcher& matcher, std::vector<float>& logits) {
    std::vector<int32_t> mask(static_cast<size_t>(grammar_bitmask_words(matcher.vocab_size())));
    if (!matcher.fill_next_token_bitmask(mask)) mask.clear();
    SampleResult r = sampler.sample(logits, mask);
    sampler.observe(r.id);
    EXPECT_TRUE(matcher.accept_token(r.id));
    return r;
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<GrammarVocab> vocab_;
  std::unique_ptr<GrammarCompiler> compiler_;
};

TEST(ApplyTokenBitmask, DisallowedAndOutOfMaskIdsBecomeMinusInf) {
  std::vector<float> scores(40, 1.0f);
  // Word 0 allows ids 1 and 31; word 1 allows id 33; ids 64.. are past the mask.
  const std::vector<int32_t> bitmask = {static_cast<int32_t>((1u << 1) | (1u << 31)), 1 << 1};
  apply_token_bitmask(std::span<float>(scores).first(36), bitmask);
  for (size_t i = 0; i < 36; ++i) {
    EXPECT_EQ(scores[i], (i == 1 || i == 31 || i == 33) ? 1.0f : -kInf) << i;
  }
  EXPECT_EQ(scores[36], 1.0f);  // outside the span
  std::vector<float> wide(70, 2.0f);
  apply_token_bitmask(wide, std::vector<int32_t>{-1, -1});  // every id of the mask allowed
  EXPECT_EQ(wide[63], 2.0f);
  EXPECT_EQ(wide[64], -kInf);  // past the mask's end
}

TEST_F(SamplerGrammar, MaskForcesTheChoiceAndEosWaitsForTheEnd) {
  Sampler sampler(SamplingParams{}, {});
  GrammarMatcher matcher(compile("[12]+"));
  // The model prefers a, b and EOS; the grammar allows only digits.
  std::vector<float> logits = {9.0f, 8.0f, 1.0f, 2.0f, 10.0f, 11.0f, 12.0f, 13.0f};
  SampleResult r = step(sampler, matcher, logits);
  EXPECT_EQ(r.id, kTwo);
  EXPECT_EQ(logits[kA], -kInf);
  EXPECT_EQ(logits[kEos], -kInf);  // nothing matched yet: EOS masked
  EXPECT_EQ(logits[7], -kInf);     // past the tokenizer's vocabulary
  EXPECT_NEAR(r.logprob, 2.0f - std::log(std::exp(1.0f) + std::exp(2.0f)), 1e-5);
  logits = {9.0f, 8.0f, 1.0f, 2.0f, 10.0f, 11.0f, 12.0f, 13.0f};
  r = step(sampler, matcher, logits);
  EXPECT_EQ(r.id, kEos);  // "2" matches: EOS is allowed now and wins
  EXPECT_EQ(logits[kA], -kInf);
  EXPECT_TRUE(matcher.is_terminated());
  // Without the mask the same logits pick id 7, which no tokenizer token has.
  logits = {9.0f, 8.0f, 1.0f, 2.0f, 10.0f, 11.0f, 12.0f, 13.0f};
  EXPECT_EQ(sampler.sample(logits).id, 7);
}

TEST_F(SamplerGrammar, CompleteGrammarLeavesOnlyEos) {
  Sampler sampler(SamplingParams{}, {});
  GrammarMatcher matcher(compile("ab"));
  for (int32_t want : {kA, kB, kEos}) {
    std::vector<float> logits = {0.0f, 0.0f, 5.0f, 5.0f, -3.0f, 0.0f, 0.0f, 0.0f};
    const SampleResult r = step(sampler, matcher, logits);
    EXPECT_EQ(r.id, want);
    EXPECT_EQ(r.logprob, 0.0f);  // the one allowed token
  }
}

TEST_F(SamplerGrammar, MaskComesBeforeTopKAndTemperature) {
  SamplingParams params;
  params.top_k = 1;
  params.temperature = 0.5f;
  params.do_sample = true;
  params.seed = 7;
  // Top-k 1 before the mask would keep only "a", which the grammar refuses: every score would
  // be -inf. After the mask it keeps the best digit.
  Sampler sampler(params, {});
  GrammarMatcher matcher(compile("[12]"));
  std::vector<float> logits = {9.0f, 0.0f, 1.0f, 3.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const SampleResult r = step(sampler, matcher, logits);
  EXPECT_EQ(r.id, kTwo);
  EXPECT_EQ(logits[kTwo], 6.0f);  // divided by the temperature
  EXPECT_EQ(logits[kOne], -kInf);
}

TEST_F(SamplerGrammar, RepetitionPenaltyComesBeforeTheMask) {
  SamplingParams params;
  params.repetition_penalty = 4.0f;
  // The prompt holds "2", so its logit is divided by 4 before the mask picks among the digits.
  Sampler sampler(params, std::vector<int32_t>{kTwo});
  GrammarMatcher matcher(compile("[12]"));
  std::vector<float> logits = {9.0f, 0.0f, 1.0f, 3.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(step(sampler, matcher, logits).id, kOne);
}

}  // namespace
}  // namespace lm
