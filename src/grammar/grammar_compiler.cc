#include "grammar/grammar_compiler.h"

#include <exception>
#include <string>

#include "base/check.h"
#include "grammar/unenforced_keywords.h"
#include "grammar/xgrammar_log_sink.h"
#include "grammar/xgrammar_types.h"

namespace lm {
namespace {

// XGrammar's errors carry a "[time] file:line: " prefix from its logging; clients get the rest.
std::string error_message(const std::exception& e) {
  std::string message = e.what();
  if (!message.empty() && message[0] == '[') {
    if (size_t end = message.find(": ", message.find(']')); end != std::string::npos) {
      message.erase(0, end + 2);
    }
  }
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  return message;
}

}  // namespace

GrammarCompiler::GrammarCompiler(const GrammarVocab& vocab, size_t max_cached, int max_threads)
    : vocab_(vocab), max_cached_(max_cached) {
  LM_CHECK(max_cached_ > 0);
  // XGrammar's own cache is off: ours is the one bound on what compiled grammars keep alive.
  compiler_ = std::make_unique<xgrammar::GrammarCompiler>(vocab.impl().info, max_threads,
                                                          /*cache_enabled=*/false);
}

GrammarCompiler::~GrammarCompiler() = default;

size_t GrammarCompiler::num_cached() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile(const GrammarSpec& spec,
                                                                        bool* cache_hit) {
  if (cache_hit != nullptr) *cache_hit = false;
  {
    std::lock_guard lock(mutex_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if (it->first == spec) {
        cache_.splice(cache_.begin(), cache_, it);
        if (cache_hit != nullptr) *cache_hit = true;
        return it->second;
      }
    }
  }
  // Compiled outside the lock: two requests with the same new grammar may both compile it.
  auto compiled_or = compile_uncached(spec);
  if (!compiled_or.ok()) return compiled_or;
  std::lock_guard lock(mutex_);
  cache_.emplace_front(spec, *compiled_or);
  while (cache_.size() > max_cached_) cache_.pop_back();
  return compiled_or;
}

Result<std::shared_ptr<const CompiledGrammar>> GrammarCompiler::compile_uncached(
    const GrammarSpec& spec) {
  // What XGrammar warns about while compiling is a constraint it would not enforce: refused, so
  // a grammar is enforced whole or not at all (never a silently looser output).
  if (spec.kind == GrammarKind::kJsonSchema) {
    if (auto keyword = find_unenforced_keyword(spec.text)) {
      return Error{"it uses " + *keyword + ", which the grammar engine does not enforce"};
    }
  }
  XGrammarWarningCapture capture;
  try {
    xgrammar::CompiledGrammar compiled = [&] {
      switch (spec.kind) {
        case GrammarKind::kJsonSchema:
          // NOTE: no free whitespace between JSON tokens (", " and ": " only): a small model
          // given any whitespace can pad forever and reach max_new_tokens with no JSON.
          return compiler_->CompileJSONSchema(spec.text, /*any_whitespace=*/false);
        case GrammarKind::kJsonObject:
          return compiler_->CompileJSONSchema(R"({"type": "object"})", /*any_whitespace=*/false,
                                              std::nullopt, std::nullopt, /*strict_mode=*/false);
        case GrammarKind::kRegex:
          return compiler_->CompileRegex(spec.text);
      }
      LM_CHECK(false);
    }();
    if (!capture.warnings().empty()) {
      std::string message = "it cannot be enforced exactly: ";
      for (size_t i = 0; i < capture.warnings().size(); ++i) {
        if (i > 0) message += "; ";
        message += capture.warnings()[i];
      }
      return Error{message};
    }
    return std::make_shared<const CompiledGrammar>(
        std::make_unique<const CompiledGrammar::Impl>(CompiledGrammar::Impl{std::move(compiled)}));
  } catch (const std::exception& e) {
    return Error{error_message(e)};
  }
}

CompiledGrammar::CompiledGrammar(std::unique_ptr<const Impl> impl) : impl_(std::move(impl)) {}
CompiledGrammar::~CompiledGrammar() = default;

int32_t CompiledGrammar::vocab_size() const {
  return impl_->compiled.GetTokenizerInfo().GetVocabSize();
}

size_t CompiledGrammar::memory_bytes() const { return impl_->compiled.MemorySizeBytes(); }

}  // namespace lm
