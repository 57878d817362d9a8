// The grammar tests' vocabularies: a tokenizer read from a GGUF file of the repository (SmolLM2's
// byte-level BPE, Llama-2's SentencePiece) and token ids by their text.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "loader/gguf_file.h"
#include "tokenizer/gguf_vocab_reader.h"
#include "tokenizer/tokenizer.h"

namespace lm {

inline std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& relative_path) {
  auto file = GgufFile::open(std::string(LM_REPO_ROOT) + "/" + relative_path);
  EXPECT_TRUE(file.ok()) << file.error().message;
  if (!file.ok()) return nullptr;
  auto vocab = read_gguf_vocab(*file);
  EXPECT_TRUE(vocab.ok()) << vocab.error().message;
  if (!vocab.ok()) return nullptr;
  auto tokenizer = Tokenizer::from_gguf_vocab(*vocab);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  return tokenizer.ok() ? std::move(tokenizer).value() : nullptr;
}

inline int32_t id_of(const Tokenizer& tokenizer, const std::string& token) {
  auto id = tokenizer.token_to_id(token);
  EXPECT_TRUE(id.has_value()) << token;
  return id.value_or(-1);
}

}  // namespace lm
