// The tokenizer as a GGUF file stores it (tokenizer.ggml.* metadata), as plain data.
// read_gguf_vocab (gguf_vocab_reader.h) fills it from a GGUF file's metadata;
// Tokenizer::from_gguf_vocab builds a tokenizer from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lm {

struct GgufVocab {
  std::string model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SPM), "gemma4"
  std::string pre;    // tokenizer.ggml.pre: pre-tokenizer name ("llama-bpe", "smollm", ...)
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens
  std::vector<float> scores;         // tokenizer.ggml.scores (SPM merge priorities), may be empty
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control,
                                     // 4 user-defined, 5 unused, 6 byte; may be empty
  std::vector<std::string> merges;   // tokenizer.ggml.merges ("a b"): gpt2 and gemma4
  std::optional<int32_t> bos_id, eos_id, eot_id, unk_id, pad_id;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string chat_template;  // tokenizer.chat_template, empty when absent
  // tokenizer.chat_template.tool_use: the named template llama.cpp's converter writes from a
  // tokenizer_config.json list (empty when absent).
  std::string tool_use_template;
};

}  // namespace lm
