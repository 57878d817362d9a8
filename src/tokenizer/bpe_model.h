// The BPE model of tokenizer.json (HF `models::bpe`): a vocabulary, ranked merges, byte fallback
// to <0xXX> tokens, unknown-token fusing and ignore_merges. Tokenizes one pre-tokenized piece by
// repeatedly applying the lowest-ranked merge (leftmost on ties), exactly as HF's Word::merge_all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/result.h"

namespace lm {

struct BpeOptions {
  std::optional<std::string> unk_token;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // vocab: token -> id; merges: (left, right) pairs, best first. Fails when a merge names a token
  // (or produces a concatenation) that is not in the vocabulary.
  static Result<BpeModel> create(std::unordered_map<std::string, int32_t> vocab,
                                 const std::vector<std::pair<std::string, std::string>>& merges,
                                 BpeOptions options);

  // Appends the ids of one piece.
  void tokenize(std::string_view piece, std::vector<int32_t>& ids) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Merge* find_merge(int32_t left, int32_t right) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  int32_t byte_ids_[256];  // <0xXX> token ids for byte fallback, -1 when missing
};

}  // namespace lm
