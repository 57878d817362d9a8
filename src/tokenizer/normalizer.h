// Normalizers of tokenizer.json (HF `normalizers`): rewrite a text segment before it is split.
// The ones real Llama-family files use: Prepend, Replace, NFC/NFD/NFKC/NFKD, Lowercase, Strip,
// Sequence.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace lm {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;
};

// Prepends `prefix` to a non-empty text.
class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override;

 private:
  std::string prefix_;
};

// Replaces every occurrence of a literal string, or every match of a regex, by `content`.
class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::string literal, std::unique_ptr<Regex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  void normalize(std::string& text) const override;

 private:
  std::string literal_;           // used when regex_ is null
  std::unique_ptr<Regex> regex_;  // may be null
  std::string content_;
};

// Unicode normalization forms and lowercasing, through ICU.
class UnicodeNormalizer : public Normalizer {
 public:
  enum class Form { kNfc, kNfd, kNfkc, kNfkd, kLowercase };
  explicit UnicodeNormalizer(Form form) : form_(form) {}
  void normalize(std::string& text) const override;

 private:
  Form form_;
};

// Strips Unicode white space on the left and/or right.
class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override;

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
      : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& step : steps_) step->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Replaces every (non-overlapping, left to right) occurrence of `from` by `to`.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);

}  // namespace lm
