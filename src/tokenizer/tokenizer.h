// lm::Tokenizer: text <-> token ids for HF tokenizer.json BPE files (byte-level and
// SentencePiece-style) and for the same vocabularies read from GGUF metadata, with the same ids
// as HF `tokenizers`. Immutable after loading; all const methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "tokenizer/gguf_vocab.h"

namespace lm {

struct TokenizerParts;  // the pipeline (tokenizer_parts.h)

class Tokenizer {
 public:
  // tokenizer_config_json_path may be "" or name a missing file; it supplies bos/eos tokens and
  // the chat template.
  static Result<std::unique_ptr<Tokenizer>> from_tokenizer_json(
      const std::string& tokenizer_json_path, const std::string& tokenizer_config_json_path);
  // Same as from_tokenizer_json, from the file contents (config_json may be empty).
  static Result<std::unique_ptr<Tokenizer>> from_json_strings(std::string_view tokenizer_json,
                                                              std::string_view config_json);
  static Result<std::unique_ptr<Tokenizer>> from_gguf_vocab(const GgufVocab& vocab);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // add_special_tokens: the post-processor's BOS/EOS, as HF does. Added tokens written in the text
  // are recognized; special ones only when parse_special_tokens (false: their text is tokenized as
  // plain text, HF's split_special_tokens). Invalid UTF-8 in text is read as U+FFFD.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true,
                              bool parse_special_tokens = true) const;
  // A byte range [begin, end) of the text given to encode.
  struct TextRange {
    size_t begin = 0;
    size_t end = 0;
  };
  // As encode, but special tokens are recognized only outside `plain_ranges`: inside them their
  // text is ordinary text (user content inside a rendered chat prompt cannot forge a turn).
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens,
                              std::span<const TextRange> plain_ranges) const;
  // HF tokenizers' offsets (in bytes, as its Rust library gives them) of `ids`, which encode(text,
  // add_special_tokens, ...) returned: added tokens written in the text span what encode matched
  // (stripped whitespace included); other tokens' bytes are located one after another and
  // widened to whole UTF-8 characters (byte-level tokens holding parts of one character all span
  // it, so neighbours may overlap); a dummy-prefix space (SentencePiece's "▁", where the load-time
  // probes found encode puts one) spans the character it was put before; the post-processor's
  // tokens (BOS/EOS) {0, 0}. A token whose bytes are not the text's there (a normalizer rewrote
  // it) gets an empty range where the previous one ended.
  std::vector<TextRange> offsets(std::string_view text, std::span<const int32_t> ids,
                                 bool add_special_tokens) const;
  // Ids outside the vocabulary are skipped.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  bool is_special(int32_t id) const;
  // The vocabulary spelling of a token ("" for ids outside the vocabulary).
  std::string_view token_text(int32_t id) const;
  // The raw bytes a token adds to generated text in the middle of a decode (byte-level tokens
  // mapped back to bytes, "▁" as a space, a <0xXX> token as its one byte; no UTF-8 repair):
  // what constrained decoding matches grammars against. "" for ids outside the vocabulary.
  std::string token_bytes(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string& chat_template() const;
  const std::string& tool_use_template() const;  // for requests with tools; "" when none
  // A <0xXX> token that the decoder turns into a raw byte (SentencePiece byte fallback). Runs of
  // them decode as one byte string, so a later byte can change the text of earlier ones.
  bool is_byte_fallback_token(int32_t id) const;

 private:
  explicit Tokenizer(std::unique_ptr<TokenizerParts> parts);
  static Result<std::unique_ptr<Tokenizer>> from_parts(std::unique_ptr<TokenizerParts> parts);
  void encode_plain(std::string_view segment, bool at_origin, bool parse_special,
                    std::vector<int32_t>& ids) const;
  // Fills parts_->dummy_prefix by encoding a few probes.
  void probe_dummy_prefix();

  std::unique_ptr<TokenizerParts> parts_;
};

}  // namespace lm
