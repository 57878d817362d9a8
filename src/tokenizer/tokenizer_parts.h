// The pieces a Tokenizer is assembled from; filled by the tokenizer.json and GGUF loaders.
// Internal to the tokenizer library.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace lm {

struct TokenizerParts {
  std::unique_ptr<Normalizer> normalizer;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null
  std::optional<BpeModel> model;
  std::unique_ptr<Decoder> decoder;  // null: tokens are joined with ' ' (HF's default)
  std::vector<AddedToken> added_tokens;
  std::vector<int32_t> prefix_ids, suffix_ids;  // post-processor, when add_special_tokens
  std::optional<int32_t> bos_id, eos_id;
  std::string chat_template;
  std::string tool_use_template;  // tokenizer_config's named "tool_use" template, "" when none

  // Filled by Tokenizer from the above.
  std::unique_ptr<AddedTokenMatcher> raw_matcher, normalized_matcher;
  std::vector<std::string> id_to_token;
  std::vector<bool> special;
  std::vector<bool> byte_fallback;  // <0xXX> tokens of a ByteFallback decoder
  std::unordered_map<std::string, int32_t> added_by_content;
  // Where encoding puts a space the text does not have before a run of plain text (SentencePiece's
  // dummy "▁": Prepend, Metaspace, ByteLevel's add_prefix_space), as probes at load found it: at
  // the text's start, after an added token, and even before a run that starts with a space.
  struct DummyPrefix {
    bool at_origin = false;
    bool after_added_token = false;
    bool before_space = false;
  } dummy_prefix;
};

}  // namespace lm
