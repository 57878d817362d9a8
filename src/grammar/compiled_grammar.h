// A grammar compiled against one vocabulary: immutable, shared by every sequence that is
// constrained by it (each has its own GrammarMatcher). Opaque outside grammar/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace lm {

class CompiledGrammar {
 public:
  struct Impl;  // XGrammar's CompiledGrammar (grammar/ internal)
  explicit CompiledGrammar(std::unique_ptr<const Impl> impl);
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  int32_t vocab_size() const;
  size_t memory_bytes() const;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<const Impl> impl_;
};

}  // namespace lm
