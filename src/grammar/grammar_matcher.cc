#include "grammar/grammar_matcher.h"

#include <algorithm>

#include "base/check.h"
#include "grammar/xgrammar_types.h"

namespace lm {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
  LM_CHECK(grammar_ != nullptr);
  matcher_ = std::make_unique<xgrammar::GrammarMatcher>(grammar_->impl().compiled);
}

GrammarMatcher::~GrammarMatcher() = default;

bool GrammarMatcher::fill_next_token_bitmask(std::span<int32_t> bitmask) {
  LM_CHECK(static_cast<int32_t>(bitmask.size()) == grammar_bitmask_words(vocab_size()));
  if (matcher_->IsTerminated()) {  // XGrammar refuses a mask after the stop token
    std::fill(bitmask.begin(), bitmask.end(), 0);
    for (int32_t id : matcher_->GetStopTokenIds()) {
      bitmask[static_cast<size_t>(id / 32)] |= static_cast<int32_t>(1u << (id % 32));
    }
    return true;
  }
  int64_t shape[1] = {static_cast<int64_t>(bitmask.size())};
  DLTensor tensor{};
  tensor.data = bitmask.data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  return matcher_->FillNextTokenBitmask(&tensor);
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (id < 0 || id >= vocab_size() || matcher_->IsTerminated()) return false;
  return matcher_->AcceptToken(id);
}

bool GrammarMatcher::can_terminate() const {
  return matcher_->IsTerminated() || matcher_->IsCompleted();
}

bool GrammarMatcher::is_terminated() const { return matcher_->IsTerminated(); }

void GrammarMatcher::rollback(int32_t num_tokens) { matcher_->Rollback(num_tokens); }

void GrammarMatcher::reset() { matcher_->Reset(); }

}  // namespace lm
