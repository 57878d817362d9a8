// The vocabulary as the grammar engine sees it: each token id's raw bytes (from our tokenizer,
// byte-level BPE and SentencePiece-style alike), the model's vocabulary size (the logits width,
// which may exceed the tokenizer's) and the stop ids that end a generation. Immutable once built.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace lm {

class GrammarVocab {
 public:
  // model_vocab_size < tokenizer.vocab_size() is raised to it; ids past the tokenizer's are
  // never allowed by a grammar. stop_ids: the engine's EOS ids, allowed once a grammar may end.
  GrammarVocab(const Tokenizer& tokenizer, int32_t model_vocab_size, std::vector<int32_t> stop_ids);
  ~GrammarVocab();
  GrammarVocab(const GrammarVocab&) = delete;
  GrammarVocab& operator=(const GrammarVocab&) = delete;

  int32_t vocab_size() const;
  const std::vector<int32_t>& stop_ids() const;
  // The bytes a grammar matches for `id`; "" for special tokens (never allowed, except stops).
  const std::string& token_bytes(int32_t id) const;

  struct Impl;  // XGrammar's TokenizerInfo (grammar/ internal)
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace lm
