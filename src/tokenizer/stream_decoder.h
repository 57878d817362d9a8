// Incremental detokenization for streaming, per sequence (TGI's prefix/read offsets): each new
// token re-decodes a short window and emits only the text past what was already emitted, holding
// back text that ends in an incomplete UTF-8 character (U+FFFD) until a later token completes it.
// The concatenation of all outputs plus flush() equals decode(all ids).
// NOTE: with SentencePiece byte fallback, HF decodes a run of <0xXX> tokens as one byte string
// (one U+FFFD per byte if the run is not valid UTF-8 as a whole), so text inside a run is held
// until the run ends; otherwise a later invalid byte would make the stream differ from decode().
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace lm {

class StreamDecoder {
 public:
  // prompt_ids give the decoding context (e.g. a leading space after the prompt) but are never
  // emitted. The tokenizer must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids = {},
                         bool skip_special_tokens = false);

  // The new text this token completes; "" while it is held back.
  std::string push(int32_t id);
  // Whatever is still held back (which may end in U+FFFD); call once the sequence ends.
  std::string flush();

  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::string decode_range(size_t begin, size_t end) const;

  const Tokenizer& tokenizer_;
  bool skip_special_tokens_;
  std::vector<int32_t> ids_;  // prompt + generated
  size_t prefix_offset_ = 0;  // start of the decoding window
  size_t read_offset_ = 0;    // end of the text already emitted
};

}  // namespace lm
