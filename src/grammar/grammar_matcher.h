// One sequence's position in its grammar: which tokens may come next (a bitmask over the model's
// vocabulary), accepting the chosen token, whether the grammar may or did end. Stop ids are
// allowed only once the grammar may end, so EOS is masked until then. Not thread-safe; one per
// sequence (best_of / n candidates each have their own).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "grammar/compiled_grammar.h"

namespace xgrammar {
class GrammarMatcher;
}

namespace lm {

// 32-bit words a bitmask over `vocab_size` tokens takes.
inline int32_t grammar_bitmask_words(int32_t vocab_size) { return (vocab_size + 31) / 32; }

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  int32_t vocab_size() const { return grammar_->vocab_size(); }

  // Writes the next token's bitmask (bit id % 32 of word id / 32 set: id allowed) into
  // grammar_bitmask_words(vocab_size()) words. Returns false when every token is allowed.
  // After termination only the stop ids are allowed.
  bool fill_next_token_bitmask(std::span<int32_t> bitmask);
  // Advances by `id`; false (state unchanged) when the grammar does not allow it.
  bool accept_token(int32_t id);
  // Whether the text so far is a complete match (a stop id may come next).
  bool can_terminate() const;
  // Whether a stop id was accepted.
  bool is_terminated() const;
  // Undoes the last `num_tokens` accepted tokens.
  void rollback(int32_t num_tokens);
  void reset();

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<xgrammar::GrammarMatcher> matcher_;
};

}  // namespace lm
