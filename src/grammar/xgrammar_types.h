// The XGrammar objects behind grammar/'s opaque types. Internal to grammar/: nothing outside it
// includes XGrammar's headers.
#pragma once

#include <xgrammar/xgrammar.h>

#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_vocab.h"

namespace lm {

struct GrammarVocab::Impl {
  std::vector<std::string> token_bytes;  // per tokenizer id; "" = special
  std::vector<int32_t> stop_ids;
  xgrammar::TokenizerInfo info;
};

struct CompiledGrammar::Impl {
  xgrammar::CompiledGrammar compiled;
};

}  // namespace lm
