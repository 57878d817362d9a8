#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "base/check.h"
#include "grammar/xgrammar_types.h"

namespace lm {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar)
    : grammar_(std::move(grammar)) {
  LM_CHECK(grammar_ != nullptr);
  matcher_ = std::make_unique<xgrammar::GrammarMatcher>(grammar_->impl().compiled);
}

GrammarMatcher::~GrammarMatcher() = default;

namespace {

void allow_only(std::span<int32_t> bitmask, const std::vector<int>& ids) {
  std::fill(bitmask.begin(), bitmask.end(), 0);
  for (int id : ids) bitmask[static_cast<size_t>(id / 32)] |= static_cast<int32_t>(1u << (id % 32));
}

}  // namespace

bool GrammarMatcher::fill_next_token_bitmask(std::span<int32_t> bitmask) {
  LM_CHECK(static_cast<int32_t>(bitmask.size()) == grammar_bitmask_words(vocab_size()));
  // XGrammar refuses a mask after the stop token: only a stop id may follow.
  if (matcher_->IsTerminated()) {
    allow_only(bitmask, matcher_->GetStopTokenIds());
    return true;
  }
  int64_t shape[1] = {static_cast<int64_t>(bitmask.size())};
  DLTensor tensor{};
  tensor.data = bitmask.data();
  tensor.device = DLDevice{kDLCPU, 0};
  tensor.ndim = 1;
  tensor.dtype = xgrammar::GetBitmaskDLType();
  tensor.shape = shape;
  try {
    return matcher_->FillNextTokenBitmask(&tensor);
  } catch (const std::exception&) {
    // NOTE: fail closed. This runs on the engine thread, which must not die of one request:
    // XGrammar's internal checks throw, and then the generation ends at a stop id.
    allow_only(bitmask, matcher_->GetStopTokenIds());
    return true;
  }
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (id < 0 || id >= vocab_size() || matcher_->IsTerminated()) return false;
  try {
    return matcher_->AcceptToken(id);
  } catch (const std::exception&) {
    return false;
  }
}

bool GrammarMatcher::can_terminate() const {
  return matcher_->IsTerminated() || matcher_->IsCompleted();
}

bool GrammarMatcher::is_terminated() const { return matcher_->IsTerminated(); }

void GrammarMatcher::rollback(int32_t num_tokens) { matcher_->Rollback(num_tokens); }

void GrammarMatcher::reset() { matcher_->Reset(); }

}  // namespace lm
