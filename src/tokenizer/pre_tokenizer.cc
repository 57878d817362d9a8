#include "tokenizer/pre_tokenizer.h"

#include <unicode/uchar.h>

#include "base/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"

namespace lm {

void split_by_matches(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<Piece>& out) {
  // Spans covering the whole text, each flagged as delimiter (a match, or a gap when inverted).
  struct Span {
    size_t begin, end;
    bool delimiter;
  };
  std::vector<Span> spans;
  size_t pos = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > pos) spans.push_back({pos, begin, invert});
    spans.push_back({begin, end, !invert});
    pos = end;
  }
  if (pos < piece.text.size()) spans.push_back({pos, piece.text.size(), invert});

  std::vector<std::pair<size_t, size_t>> ranges;
  bool pending_next = false;  // kMergedWithNext: the last range waits for the following span
  for (const Span& span : spans) {
    switch (behavior) {
      case SplitBehavior::kRemoved:
        if (!span.delimiter) ranges.emplace_back(span.begin, span.end);
        break;
      case SplitBehavior::kIsolated:
        ranges.emplace_back(span.begin, span.end);
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (span.delimiter && !ranges.empty() && ranges.back().second == span.begin) {
          ranges.back().second = span.end;
        } else {
          ranges.emplace_back(span.begin, span.end);
        }
        break;
      case SplitBehavior::kMergedWithNext:
        if (pending_next) {
          ranges.back().second = span.end;
        } else {
          ranges.emplace_back(span.begin, span.end);
        }
        pending_next = span.delimiter;
        break;
      case SplitBehavior::kContiguous:
        if (span.delimiter && !ranges.empty() && pending_next &&
            ranges.back().second == span.begin) {
          ranges.back().second = span.end;
        } else {
          ranges.emplace_back(span.begin, span.end);
        }
        pending_next = span.delimiter;
        break;
    }
  }
  bool first = true;
  for (const auto& [begin, end] : ranges) {
    if (end <= begin) continue;
    out.push_back({piece.text.substr(begin, end - begin), piece.at_origin && first && begin == 0});
    first = false;
  }
}

void SplitPreTokenizer::pre_tokenize(std::vector<Piece>& pieces) const {
  std::vector<Piece> out;
  for (const Piece& piece : pieces) {
    std::vector<std::pair<size_t, size_t>> matches;
    if (regex_) {
      matches = regex_->find_all(piece.text);
    } else if (!literal_.empty()) {
      for (size_t pos = piece.text.find(literal_); pos != std::string::npos;
           pos = piece.text.find(literal_, pos + literal_.size())) {
        matches.emplace_back(pos, pos + literal_.size());
      }
    }
    split_by_matches(piece, matches, behavior_, invert_, out);
  }
  pieces = std::move(out);
}

void ByteLevelPreTokenizer::pre_tokenize(std::vector<Piece>& pieces) const {
  std::vector<Piece> out;
  for (Piece& piece : pieces) {
    if (add_prefix_space_ && !piece.text.empty() && piece.text[0] != ' ') {
      piece.text.insert(0, " ");
    }
    if (regex_) {
      split_by_matches(piece, regex_->find_all(piece.text), SplitBehavior::kIsolated, false, out);
    } else if (!piece.text.empty()) {
      out.push_back(std::move(piece));
    }
  }
  for (Piece& piece : out) piece.text = bytes_to_unicode_string(piece.text);
  pieces = std::move(out);
}

void DigitsPreTokenizer::pre_tokenize(std::vector<Piece>& pieces) const {
  std::vector<Piece> out;
  for (const Piece& piece : pieces) {
    std::vector<std::pair<size_t, size_t>> matches;
    for (size_t pos = 0; pos < piece.text.size();) {
      const size_t begin = pos;
      const char32_t cp = utf8_next(piece.text, pos);
      // Rust's char::is_numeric: general categories Nd, Nl, No.
      if ((U_GET_GC_MASK(static_cast<UChar32>(cp)) & U_GC_N_MASK) == 0) continue;
      if (!individual_ && !matches.empty() && matches.back().second == begin) {
        matches.back().second = pos;
      } else {
        matches.emplace_back(begin, pos);
      }
    }
    split_by_matches(piece, matches, SplitBehavior::kIsolated, false, out);
  }
  pieces = std::move(out);
}

void MetaspacePreTokenizer::pre_tokenize(std::vector<Piece>& pieces) const {
  std::vector<Piece> out;
  for (Piece& piece : pieces) {
    piece.text = replace_all(piece.text, " ", replacement_);
    const bool starts = piece.text.compare(0, replacement_.size(), replacement_) == 0;
    if (!starts &&
        (prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && piece.at_origin))) {
      piece.text.insert(0, replacement_);
    }
    if (!split_) {
      if (!piece.text.empty()) out.push_back(std::move(piece));
      continue;
    }
    std::vector<std::pair<size_t, size_t>> matches;
    for (size_t pos = piece.text.find(replacement_); pos != std::string::npos;
         pos = piece.text.find(replacement_, pos + replacement_.size())) {
      matches.emplace_back(pos, pos + replacement_.size());
    }
    split_by_matches(piece, matches, SplitBehavior::kMergedWithNext, false, out);
  }
  pieces = std::move(out);
}

}  // namespace lm
