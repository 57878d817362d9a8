// llama.cpp's own tokenizer vectors (models/vocab/ggml-vocab-<name>.gguf with .inp/.out, from the
// pinned llama-cpp-python sdist; test-tokenizer-0's format: cases separated by
// "\n__ggml_vocab_test__\n", one line of ids per case) through our tokenizer built from the same
// vocab-only GGUF, without special tokens as that test tokenizes. The vocabularies of the
// architectures we serve beside Llama: Qwen2/2.5/3 and Qwen3.5 (byte-level BPE) and Phi-3
// (SentencePiece).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "base/text_file.h"
#include "loader/gguf_file.h"
#include "tokenizer/gguf_vocab_reader.h"
#include "tokenizer/tokenizer.h"

namespace lm {
namespace {

// The last case may lack its separator (gemma-4's .inp ends that way; its .out has a line for it).
std::vector<std::string> split_cases(const std::string& text) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<std::string> cases;
  size_t begin = 0;
  for (size_t at; (at = text.find(separator, begin)) != std::string::npos;
       begin = at + separator.size())
    cases.push_back(text.substr(begin, at - begin));
  if (begin < text.size()) cases.push_back(text.substr(begin));
  return cases;
}

std::vector<std::vector<int32_t>> read_ids(const std::string& text) {
  std::vector<std::vector<int32_t>> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::vector<int32_t> ids;
    for (int32_t id; fields >> id;) ids.push_back(id);
    lines.push_back(std::move(ids));
  }
  return lines;
}

class LlamaCppVocab : public testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocab, EncodesTheTestVectorsAsLlamaCpp) {
  const std::string base = std::string(LM_REPO_ROOT) + "/models/vocab/ggml-vocab-" + GetParam();
  auto file = GgufFile::open(base + ".gguf");
  ASSERT_TRUE(file.ok()) << file.error().message;
  auto vocab = read_gguf_vocab(*file);
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  auto tokenizer = Tokenizer::from_gguf_vocab(*vocab);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().message;
  auto inputs = read_text_file(base + ".gguf.inp", 1 << 20);
  auto outputs = read_text_file(base + ".gguf.out", 1 << 20);
  ASSERT_TRUE(inputs.ok() && outputs.ok());
  const auto cases = split_cases(*inputs);
  const auto expected = read_ids(*outputs);
  ASSERT_GT(cases.size(), 30u);
  ASSERT_EQ(cases.size(), expected.size());
  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<int32_t> got = (*tokenizer)->encode(cases[i], /*add_special_tokens=*/false);
    if (got != expected[i]) {
      ++mismatches;
      ADD_FAILURE() << "case " << i << " '" << cases[i] << "'";
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " cases";
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, LlamaCppVocab,
                         testing::Values("qwen2", "qwen35", "phi-3", "gemma-4", "llama-bpe",
                                         "llama-spm"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace lm
