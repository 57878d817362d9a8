// Decoders of tokenizer.json (HF `decoders`): turn token strings back into text. Each step
// rewrites the list of token strings (decode_chain); the result is their concatenation.
// ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace and Sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace lm {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
  // Whether <0xXX> tokens are decoded as runs of bytes (a later byte can change earlier text).
  virtual bool has_byte_fallback() const { return false; }
  // The bytes one token adds to a text in the middle of a decode: the per-token rewrite only,
  // without the rules that look at the whole text (first-token strips, lossy UTF-8 joins).
  virtual std::string token_bytes(std::string token) const { return token; }
};

// Maps byte-alphabet characters back to bytes (tokens with other characters pass through as
// their UTF-8 bytes) and joins everything into one lossy UTF-8 string.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
  std::string token_bytes(std::string token) const override;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  void decode_chain(std::vector<std::string>& tokens) const override;
  std::string token_bytes(std::string token) const override;

 private:
  std::string from_, to_;
};

// Runs of <0xXX> tokens become their bytes when those form valid UTF-8, else one U+FFFD per byte.
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
  bool has_byte_fallback() const override { return true; }
  std::string token_bytes(std::string token) const override;
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override;
};

// Removes up to `start` leading and `stop` trailing `content` characters from each token.
// NOTE: token_bytes keeps the token: in SentencePiece pipelines Strip follows Fuse, so it only
// ever strips the whole text's first space, not a token's in the middle of a decode.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override;

 private:
  std::string content_;  // one character
  size_t start_, stop_;
};

// replacement -> ' ', dropping the prefix replacement of the first token unless prepend is off.
class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override;
  std::string token_bytes(std::string token) const override;

 private:
  std::string replacement_;
  bool strip_first_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps)
      : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }
  bool has_byte_fallback() const override {
    for (const auto& step : steps_) {
      if (step->has_byte_fallback()) return true;
    }
    return false;
  }
  std::string token_bytes(std::string token) const override {
    for (const auto& step : steps_) token = step->token_bytes(std::move(token));
    return token;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace lm
