// Reads the tokenizer.ggml.* metadata of a GGUF file into plain GgufVocab data. The tokenizer
// owns these keys and the loader owns the file format, so the reader takes any metadata source
// with GgufFile's accessors (the GgufMetadata concept) and the tokenizer never includes loader/.
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "tokenizer/gguf_vocab.h"

namespace lm {

// What the reader asks of a GGUF file's key-value metadata (loader's GgufFile has it): each
// getter gives nothing for a missing key and an Error for a key of another type.
template <typename T>
concept GgufMetadata = requires(const T& metadata, const std::string& key) {
  { metadata.path() } -> std::convertible_to<std::string>;
  { metadata.get_string(key) } -> std::same_as<Result<std::optional<std::string>>>;
  { metadata.get_int(key) } -> std::same_as<Result<std::optional<int64_t>>>;
  { metadata.get_bool(key) } -> std::same_as<Result<std::optional<bool>>>;
  { metadata.get_string_array(key) } -> std::same_as<Result<std::vector<std::string>>>;
  { metadata.get_number_array(key) } -> std::same_as<Result<std::vector<double>>>;
};

namespace gguf_vocab_detail {

template <GgufMetadata M>
Status read_optional_id(const M& gguf, const std::string& key, int64_t vocab_size,
                        std::optional<int32_t>* out) {
  LM_ASSIGN_OR_RETURN(auto id, gguf.get_int(key));
  if (!id) return {};
  if (*id < 0 || *id >= vocab_size) {
    return Error{std::string(gguf.path()) + ": " + key + " = " + std::to_string(*id) +
                 " is outside the vocabulary of " + std::to_string(vocab_size) + " tokens"};
  }
  *out = static_cast<int32_t>(*id);
  return {};
}

template <GgufMetadata M>
Result<std::vector<double>> read_per_token(const M& gguf, const std::string& key, int64_t n) {
  LM_ASSIGN_OR_RETURN(auto values, gguf.get_number_array(key));
  if (!values.empty() && static_cast<int64_t>(values.size()) != n) {
    return Error{std::string(gguf.path()) + ": " + key + " has " + std::to_string(values.size()) +
                 " entries for " + std::to_string(n) + " tokens"};
  }
  return values;
}

}  // namespace gguf_vocab_detail

template <GgufMetadata M>
Result<GgufVocab> read_gguf_vocab(const M& gguf) {
  using gguf_vocab_detail::read_optional_id;
  using gguf_vocab_detail::read_per_token;
  const std::string path(gguf.path());
  GgufVocab vocab;
  LM_ASSIGN_OR_RETURN(auto model, gguf.get_string("tokenizer.ggml.model"));
  if (!model) return Error{path + ": no tokenizer (tokenizer.ggml.model is missing)"};
  vocab.model = *model;
  LM_ASSIGN_OR_RETURN(auto pre, gguf.get_string("tokenizer.ggml.pre"));
  vocab.pre = pre.value_or("default");
  LM_ASSIGN_OR_RETURN(vocab.tokens, gguf.get_string_array("tokenizer.ggml.tokens"));
  if (vocab.tokens.empty()) return Error{path + ": tokenizer.ggml.tokens is missing or empty"};
  const auto n = static_cast<int64_t>(vocab.tokens.size());

  LM_ASSIGN_OR_RETURN(auto scores, read_per_token(gguf, "tokenizer.ggml.scores", n));
  vocab.scores.assign(scores.begin(), scores.end());
  LM_ASSIGN_OR_RETURN(auto types, read_per_token(gguf, "tokenizer.ggml.token_type", n));
  for (double t : types) {
    // Stored as int32; a fraction, NaN or a value past 32 bits is no type (and casting it would
    // be undefined behaviour).
    if (!(t >= -2147483648.0 && t <= 2147483647.0) || t != std::trunc(t)) {
      return Error{path + ": tokenizer.ggml.token_type holds " + std::to_string(t) +
                   ", which is not a token type"};
    }
    vocab.token_types.push_back(static_cast<int32_t>(t));
  }
  LM_ASSIGN_OR_RETURN(vocab.merges, gguf.get_string_array("tokenizer.ggml.merges"));

  LM_RETURN_IF_ERROR(read_optional_id(gguf, "tokenizer.ggml.bos_token_id", n, &vocab.bos_id));
  LM_RETURN_IF_ERROR(read_optional_id(gguf, "tokenizer.ggml.eos_token_id", n, &vocab.eos_id));
  LM_RETURN_IF_ERROR(read_optional_id(gguf, "tokenizer.ggml.eot_token_id", n, &vocab.eot_id));
  LM_RETURN_IF_ERROR(read_optional_id(gguf, "tokenizer.ggml.unknown_token_id", n, &vocab.unk_id));
  LM_RETURN_IF_ERROR(read_optional_id(gguf, "tokenizer.ggml.padding_token_id", n, &vocab.pad_id));
  LM_ASSIGN_OR_RETURN(vocab.add_bos, gguf.get_bool("tokenizer.ggml.add_bos_token"));
  LM_ASSIGN_OR_RETURN(vocab.add_eos, gguf.get_bool("tokenizer.ggml.add_eos_token"));
  LM_ASSIGN_OR_RETURN(vocab.add_space_prefix, gguf.get_bool("tokenizer.ggml.add_space_prefix"));
  LM_ASSIGN_OR_RETURN(auto tmpl, gguf.get_string("tokenizer.chat_template"));
  vocab.chat_template = tmpl.value_or("");
  LM_ASSIGN_OR_RETURN(auto tool_use, gguf.get_string("tokenizer.chat_template.tool_use"));
  vocab.tool_use_template = tool_use.value_or("");
  return vocab;
}

}  // namespace lm
