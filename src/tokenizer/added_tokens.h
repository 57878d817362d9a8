// Added and special tokens (HF AddedVocabulary): found in the text before normalization
// (normalized=false) or in each normalized segment (normalized=true), leftmost-longest, with the
// lstrip / rstrip / single_word rules, so they are never cut by the model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lm {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool single_word = false;
};

// A piece of text: either an added token (id >= 0) or plain text to tokenize (id == -1).
struct TextSegment {
  std::string_view text;
  int32_t id = -1;
};

class AddedTokenMatcher {
 public:
  // Matches the tokens whose `normalized` flag equals normalized_pass.
  AddedTokenMatcher(const std::vector<AddedToken>& tokens, bool normalized_pass);

  // Cuts text into plain and added-token segments (empty plain segments are dropped).
  void split(std::string_view text, std::vector<TextSegment>& out) const;

  bool empty() const { return tokens_.empty(); }

 private:
  std::vector<AddedToken> tokens_;                  // sorted by content length, longest first
  std::vector<std::vector<size_t>> by_first_byte_;  // 256 lists of indices into tokens_
};

}  // namespace lm
