#include "grammar/grammar_vocab.h"

#include <algorithm>

#include "grammar/xgrammar_types.h"

namespace lm {
namespace {

std::vector<std::string> vocab_bytes(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    // NOTE: XGrammar treats "" as a special token, which no grammar ever allows.
    if (!tokenizer.is_special(id)) bytes[static_cast<size_t>(id)] = tokenizer.token_bytes(id);
  }
  return bytes;
}

}  // namespace

GrammarVocab::GrammarVocab(const Tokenizer& tokenizer, int32_t model_vocab_size,
                           std::vector<int32_t> stop_ids) {
  std::vector<std::string> bytes = vocab_bytes(tokenizer);
  const int32_t vocab_size = std::max(model_vocab_size, tokenizer.vocab_size());
  std::erase_if(stop_ids, [&](int32_t id) { return id < 0 || id >= vocab_size; });
  // Already decoded, so RAW: XGrammar uses the bytes as they are.
  xgrammar::TokenizerInfo info(bytes, xgrammar::VocabType::RAW, vocab_size, stop_ids,
                               /*add_prefix_space=*/false);
  impl_ = std::make_unique<Impl>(Impl{std::move(bytes), std::move(stop_ids), std::move(info)});
}

GrammarVocab::~GrammarVocab() = default;

int32_t GrammarVocab::vocab_size() const { return impl_->info.GetVocabSize(); }
const std::vector<int32_t>& GrammarVocab::stop_ids() const { return impl_->stop_ids; }

const std::string& GrammarVocab::token_bytes(int32_t id) const {
  static const std::string kNone;
  if (id < 0 || static_cast<size_t>(id) >= impl_->token_bytes.size()) return kNone;
  return impl_->token_bytes[static_cast<size_t>(id)];
}

}  // namespace lm
