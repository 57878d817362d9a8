#include "loader/gguf_vocab_reader.h"

namespace lm {
namespace {

Status read_optional_id(const GgufFile& gguf, const std::string& key, int64_t vocab_size,
                        std::optional<int32_t>* out) {
  LM_ASSIGN_OR_RETURN(auto id, gguf.get_int(key));
  if (!id) return {};
  if (*id < 0 || *id >= vocab_size) {
    return Error{gguf.path() + ": " + key + " = " + std::to_string(*id) +
                 " is outside the vocabulary of " + std::to_string(vocab_size) + " tokens"};
  }
  *out = static_cast<int32_t>(*id);
  return {};
}

}  // namespace

Result<GgufVocab> read_gguf_vocab(const GgufFile& gguf) {
  GgufVocab vocab;
  LM_ASSIGN_OR_RETURN(auto model, gguf.get_string("tokenizer.ggml.model"));
  if (!model) return Error{gguf.path() + ": no tokenizer (tokenizer.ggml.model is missing)"};
  vocab.model = *model;
  LM_ASSIGN_OR_RETURN(auto pre, gguf.get_string("tokenizer.ggml.pre"));
  vocab.pre = pre.value_or("default");
  LM_ASSIGN_OR_RETURN(vocab.tokens, gguf.get_string_array("tokenizer.ggml.tokens"));
  if (vocab.tokens.empty())
    return Error{gguf.path() + ": tokenizer.ggml.tokens is missing or empty"};
  const auto n = static_cast<int64_t>(vocab.tokens.size());

  LM_ASSIGN_OR_RETURN(auto scores, gguf.get_number_array("tokenizer.ggml.scores"));
  if (!scores.empty() && static_cast<int64_t>(scores.size()) != n) {
    return Error{gguf.path() + ": tokenizer.ggml.scores has " + std::to_string(scores.size()) +
                 " entries for " + std::to_string(n) + " tokens"};
  }
  vocab.scores.assign(scores.begin(), scores.end());
  LM_ASSIGN_OR_RETURN(auto types, gguf.get_number_array("tokenizer.ggml.token_type"));
  if (!types.empty() && static_cast<int64_t>(types.size()) != n) {
    return Error{gguf.path() + ": tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                 " entries for " + std::to_string(n) + " tokens"};
  }
  for (double t : types) vocab.token_types.push_back(static_cast<int32_t>(t));
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
  return vocab;
}

}  // namespace lm
