#include "tokenizer/stream_decoder.h"

#include "base/utf8.h"

namespace lm {

// Tokens of prompt context kept in the first window (TGI uses 5).
constexpr size_t kPromptContext = 5;

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, std::span<const int32_t> prompt_ids,
                             bool skip_special_tokens)
    : tokenizer_(tokenizer),
      skip_special_tokens_(skip_special_tokens),
      ids_(prompt_ids.begin(), prompt_ids.end()) {
  read_offset_ = ids_.size();
  prefix_offset_ = ids_.size() > kPromptContext ? ids_.size() - kPromptContext : 0;
  // Start the window at the beginning of a byte-fallback run, never inside one.
  while (prefix_offset_ > 0 && tokenizer_.is_byte_fallback_token(ids_[prefix_offset_]) &&
         tokenizer_.is_byte_fallback_token(ids_[prefix_offset_ - 1])) {
    --prefix_offset_;
  }
}

std::string StreamDecoder::decode_range(size_t begin, size_t end) const {
  return tokenizer_.decode(std::span<const int32_t>(ids_).subspan(begin, end - begin),
                           skip_special_tokens_);
}

std::string StreamDecoder::push(int32_t id) {
  ids_.push_back(id);
  if (tokenizer_.is_byte_fallback_token(id)) return "";  // the run may continue
  const std::string prefix_text = decode_range(prefix_offset_, read_offset_);
  std::string new_text = decode_range(prefix_offset_, ids_.size());
  const bool incomplete = new_text.size() >= kReplacementChar.size() &&
                          new_text.compare(new_text.size() - kReplacementChar.size(),
                                           kReplacementChar.size(), kReplacementChar) == 0;
  if (new_text.size() <= prefix_text.size() || incomplete) return "";
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return new_text.substr(prefix_text.size());
}

std::string StreamDecoder::flush() {
  const std::string prefix_text = decode_range(prefix_offset_, read_offset_);
  const std::string new_text = decode_range(prefix_offset_, ids_.size());
  prefix_offset_ = read_offset_ = ids_.size();
  if (new_text.size() <= prefix_text.size()) return "";
  return new_text.substr(prefix_text.size());
}

}  // namespace lm
