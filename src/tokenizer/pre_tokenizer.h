// Pre-tokenizers of tokenizer.json (HF `pre_tokenizers`): cut a normalized segment into the
// pieces the model tokenizes independently. Split (regex/literal, all five behaviors), ByteLevel,
// Digits, Metaspace and Sequence, the ones Llama-family, Qwen2 and SmolLM files use.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace lm {

struct Piece {
  std::string text;
  bool at_origin = false;  // starts at offset 0 of the original input (Metaspace "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Refines pieces in place; empty pieces are dropped.
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Cuts text at the given (sorted, non-overlapping) match ranges with HF's delimiter behaviors.
// A piece keeps at_origin only if it is the first one of an at_origin parent.
void split_by_matches(const Piece& piece, const std::vector<std::pair<size_t, size_t>>& matches,
                      SplitBehavior behavior, bool invert, std::vector<Piece>& out);

class SplitPreTokenizer : public PreTokenizer {
 public:
  // Exactly one of regex / literal is used: the regex when it is non-null.
  SplitPreTokenizer(std::unique_ptr<Regex> regex, std::string literal, SplitBehavior behavior,
                    bool invert)
      : regex_(std::move(regex)),
        literal_(std::move(literal)),
        behavior_(behavior),
        invert_(invert) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override;

 private:
  std::unique_ptr<Regex> regex_;
  std::string literal_;
  SplitBehavior behavior_;
  bool invert_;
};

// Optionally splits with the GPT-2 regex, then spells every byte in the byte alphabet.
class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> gpt2_regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(gpt2_regex)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override;

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;  // null when use_regex is false
};

// Isolates every numeric character (individual_digits) or runs of them.
class DigitsPreTokenizer : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual_digits) : individual_(individual_digits) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override;

 private:
  bool individual_;
};

// SentencePiece spaces: ' ' -> replacement, optional prefix, optional split before each one.
class MetaspacePreTokenizer : public PreTokenizer {
 public:
  enum class Prepend { kAlways, kFirst, kNever };
  MetaspacePreTokenizer(std::string replacement, Prepend prepend, bool split)
      : replacement_(std::move(replacement)), prepend_(prepend), split_(split) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override;

 private:
  std::string replacement_;
  Prepend prepend_;
  bool split_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
      : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& step : steps_) step->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

}  // namespace lm
