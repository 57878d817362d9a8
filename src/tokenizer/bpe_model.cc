#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "base/utf8.h"

namespace lm {

Result<BpeModel> BpeModel::create(std::unordered_map<std::string, int32_t> vocab,
                                  const std::vector<std::pair<std::string, std::string>>& merges,
                                  BpeOptions options) {
  BpeModel model;
  model.vocab_ = std::move(vocab);
  model.options_ = std::move(options);
  if (model.options_.unk_token) {
    auto it = model.vocab_.find(*model.options_.unk_token);
    if (it == model.vocab_.end()) {
      return Error{"the BPE unk_token '" + *model.options_.unk_token +
                   "' is not in the vocabulary"};
    }
    model.unk_id_ = it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = model.vocab_.find(name);
    model.byte_ids_[b] = it == model.vocab_.end() ? -1 : it->second;
  }
  model.merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    auto l = model.vocab_.find(left);
    auto r = model.vocab_.find(right);
    auto merged = model.vocab_.find(left + right);
    for (const auto* missing : {&left, &right}) {
      if (model.vocab_.find(*missing) == model.vocab_.end()) {
        return Error{"BPE merge #" + std::to_string(rank) + " ('" + left + "' '" + right +
                     "') uses the token '" + *missing + "', which is not in the vocabulary"};
      }
    }
    if (merged == model.vocab_.end()) {
      return Error{"BPE merge #" + std::to_string(rank) + " ('" + left + "' '" + right +
                   "') makes '" + left + right + "', which is not in the vocabulary"};
    }
    // Like HF (a HashMap collected in order), a pair listed twice keeps its last rank.
    model.merges_.insert_or_assign(pair_key(l->second, r->second),
                                   Merge{static_cast<int32_t>(rank), merged->second});
  }
  return model;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& ids) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    auto it = vocab_.find(std::string(piece));
    if (it != vocab_.end()) {
      ids.push_back(it->second);
      return;
    }
  }

  // Initial symbols: one per character, byte tokens for unknown characters when byte_fallback,
  // else the unknown token (consecutive ones fused when fuse_unk).
  struct Symbol {
    int32_t id;
    int prev, next;
    size_t len;  // 0 once merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  auto add = [&](int32_t id, size_t len) {
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, len});
  };
  bool last_was_unk = false;
  std::string ch;
  for (size_t pos = 0; pos < piece.size();) {
    const size_t n = utf8_valid_len(piece, pos);
    const size_t len = n == 0 ? 1 : n;
    ch.assign(piece.substr(pos, len));
    pos += len;
    if (auto it = vocab_.find(ch); it != vocab_.end()) {
      add(it->second, len);
      last_was_unk = false;
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (unsigned char c : ch) all = all && byte_ids_[c] >= 0;
      if (all) {
        for (unsigned char c : ch) add(byte_ids_[c], 1);
        last_was_unk = false;
        continue;
      }
    }
    if (!unk_id_) continue;  // HF drops characters it cannot represent when there is no unk
    if (options_.fuse_unk && last_was_unk) {
      symbols.back().len += len;
    } else {
      add(*unk_id_, len);
    }
    last_was_unk = true;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Candidate {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator<(const Candidate& o) const {  // max-heap order: lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* m = find_merge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({m->rank, static_cast<int>(i), m->new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& current = symbols[top.pos];
    if (current.len == 0 || current.next < 0) continue;
    const int next_pos = current.next;
    const Symbol right = symbols[next_pos];
    const Merge* m = find_merge(current.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale entry
    current.id = top.new_id;
    current.len += right.len;
    current.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (current.prev >= 0) {
      if (const Merge* pm = find_merge(symbols[current.prev].id, current.id)) {
        queue.push({pm->rank, current.prev, pm->new_id});
      }
    }
    if (current.next >= 0) {
      if (const Merge* nm = find_merge(current.id, symbols[current.next].id)) {
        queue.push({nm->rank, top.pos, nm->new_id});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.len != 0) ids.push_back(s.id);
  }
}

}  // namespace lm
