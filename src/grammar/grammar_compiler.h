// Compiles grammar specs against one vocabulary, keeping the most recently used compiled grammars
// in a bounded LRU cache keyed by (kind, text): a schema sent again costs a lookup, not a compile.
// Thread-safe (admission compiles on the validation workers); a failure is an Error with XGrammar's
// message, never a partly built grammar.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <utility>

#include "base/result.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_spec.h"
#include "grammar/grammar_vocab.h"

namespace xgrammar {
class GrammarCompiler;
}

namespace lm {

class GrammarCompiler {
 public:
  // `vocab` must outlive the compiler. max_threads: XGrammar's workers for one compile.
  explicit GrammarCompiler(const GrammarVocab& vocab, size_t max_cached = 32, int max_threads = 2);
  ~GrammarCompiler();
  GrammarCompiler(const GrammarCompiler&) = delete;
  GrammarCompiler& operator=(const GrammarCompiler&) = delete;

  // `cache_hit`, when given, says whether the grammar came from the cache.
  Result<std::shared_ptr<const CompiledGrammar>> compile(const GrammarSpec& spec,
                                                         bool* cache_hit = nullptr);

  size_t num_cached() const;
  const GrammarVocab& vocab() const { return vocab_; }

 private:
  Result<std::shared_ptr<const CompiledGrammar>> compile_uncached(const GrammarSpec& spec);

  const GrammarVocab& vocab_;
  const size_t max_cached_;
  std::unique_ptr<xgrammar::GrammarCompiler> compiler_;
  mutable std::mutex mutex_;
  // Most recently used first. A handful of entries, so a linear lookup is enough.
  std::list<std::pair<GrammarSpec, std::shared_ptr<const CompiledGrammar>>> cache_;
};

}  // namespace lm
