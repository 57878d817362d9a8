#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>

#include "base/utf8.h"
#include "tokenizer/tokenizer_parts.h"

namespace lm {

Tokenizer::Tokenizer(std::unique_ptr<TokenizerParts> parts) : parts_(std::move(parts)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_parts(std::unique_ptr<TokenizerParts> parts) {
  if (!parts->model) return Error{"the tokenizer has no model"};
  constexpr int64_t kMaxVocab = int64_t{1} << 24;
  int64_t size = 0;
  for (const auto& [token, id] : parts->model->vocab()) {
    if (id < 0 || id >= kMaxVocab) {
      return Error{"token '" + token + "' has the id " + std::to_string(id) +
                   ", outside [0, 2^24)"};
    }
    size = std::max<int64_t>(size, id + 1);
  }
  for (const AddedToken& token : parts->added_tokens) {
    if (token.id < 0 || token.id >= kMaxVocab) {
      return Error{"added token '" + token.content + "' has the id " + std::to_string(token.id) +
                   ", outside [0, 2^24)"};
    }
    size = std::max<int64_t>(size, token.id + 1);
  }
  parts->id_to_token.assign(size, "");
  parts->special.assign(size, false);
  for (const auto& [token, id] : parts->model->vocab()) parts->id_to_token[id] = token;
  for (const AddedToken& token : parts->added_tokens) {
    parts->id_to_token[token.id] = token.content;
    parts->special[token.id] = token.special;
    parts->added_by_content.emplace(token.content, token.id);
  }
  for (const auto* id : {&parts->bos_id, &parts->eos_id}) {
    if (*id && (**id < 0 || **id >= size)) {
      return Error{"the special token id " + std::to_string(**id) + " is outside the vocabulary"};
    }
  }
  for (const auto* list : {&parts->prefix_ids, &parts->suffix_ids}) {
    for (int32_t id : *list) {
      if (id < 0 || id >= size) {
        return Error{"the post-processor adds the id " + std::to_string(id) +
                     ", which is outside the vocabulary"};
      }
    }
  }
  parts->byte_fallback.assign(size, false);
  if (parts->decoder && parts->decoder->has_byte_fallback()) {
    for (int64_t id = 0; id < size; ++id) {
      const std::string& t = parts->id_to_token[id];
      parts->byte_fallback[id] = t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
                                 std::isxdigit(static_cast<unsigned char>(t[3])) &&
                                 std::isxdigit(static_cast<unsigned char>(t[4]));
    }
  }
  parts->raw_matcher = std::make_unique<AddedTokenMatcher>(parts->added_tokens, false);
  parts->normalized_matcher = std::make_unique<AddedTokenMatcher>(parts->added_tokens, true);
  auto tokenizer = std::unique_ptr<Tokenizer>(new Tokenizer(std::move(parts)));
  tokenizer->probe_dummy_prefix();
  return tokenizer;
}

void Tokenizer::probe_dummy_prefix() {
  // The bytes `text` encodes to after its first `skip` ids.
  auto encoded_bytes = [&](const std::string& text, size_t skip) {
    std::string bytes;
    const std::vector<int32_t> ids = encode(text, /*add_special_tokens=*/false);
    for (size_t i = skip; i < ids.size(); ++i) bytes += token_bytes(ids[i]);
    return bytes;
  };
  TokenizerParts::DummyPrefix& dummy = parts_->dummy_prefix;
  dummy.at_origin = encoded_bytes("a", 0) == " a";
  dummy.before_space = encoded_bytes(" a", 0) == "  a";
  for (const AddedToken& token : parts_->added_tokens) {
    if (token.lstrip || token.rstrip || token.content.empty()) continue;
    dummy.after_added_token = encoded_bytes(token.content + "a", 1) == " a";
    break;
  }
}

void Tokenizer::encode_plain(std::string_view segment, bool at_origin, bool parse_special,
                             std::vector<int32_t>& ids) const {
  std::string text(segment);
  if (parts_->normalizer) parts_->normalizer->normalize(text);
  std::vector<TextSegment> normalized_segments;
  if (parts_->normalized_matcher->empty()) {
    normalized_segments.push_back({text, -1});
  } else {
    parts_->normalized_matcher->split(text, normalized_segments);
  }
  for (const TextSegment& seg : normalized_segments) {
    if (seg.id >= 0 && (parse_special || !parts_->special[seg.id])) {
      ids.push_back(seg.id);
      continue;
    }
    std::vector<Piece> pieces;
    pieces.push_back({std::string(seg.text), at_origin && seg.text.data() == text.data()});
    if (parts_->pre_tokenizer) parts_->pre_tokenizer->pre_tokenize(pieces);
    for (const Piece& piece : pieces) parts_->model->tokenize(piece.text, ids);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       bool parse_special_tokens) const {
  const TextRange all{0, text.size()};
  return encode(text, add_special_tokens,
                parse_special_tokens ? std::span<const TextRange>() : std::span(&all, 1));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       std::span<const TextRange> plain_ranges) const {
  std::string valid;
  TextRange all;
  if (!is_valid_utf8(text)) {
    valid = utf8_lossy(text);
    text = valid;
    // Offsets moved: protect the whole text if anything was to be protected.
    if (!plain_ranges.empty()) {
      all = {0, text.size()};
      plain_ranges = std::span(&all, 1);
    }
  }
  auto in_plain_range = [&](std::string_view seg) {
    const size_t b = static_cast<size_t>(seg.data() - text.data()), e = b + seg.size();
    for (const TextRange& r : plain_ranges) {
      if (b < r.end && r.begin < e) return true;
    }
    return false;
  };
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = parts_->prefix_ids;
  std::vector<TextSegment> segments;
  parts_->raw_matcher->split(text, segments);
  // Plain text, and special tokens demoted to text, are merged into runs tokenized as one text.
  const char* run_begin = nullptr;
  const char* run_end = nullptr;
  bool run_protected = false;
  auto flush_run = [&] {
    if (run_begin == nullptr) return;
    encode_plain(std::string_view(run_begin, static_cast<size_t>(run_end - run_begin)),
                 run_begin == text.data(), !run_protected, ids);
    run_begin = run_end = nullptr;
    run_protected = false;
  };
  for (const TextSegment& seg : segments) {
    const bool demoted = seg.id >= 0 && parts_->special[seg.id] && in_plain_range(seg.text);
    if (seg.id >= 0 && !demoted) {
      flush_run();
      ids.push_back(seg.id);
      continue;
    }
    if (run_begin == nullptr) run_begin = seg.text.data();
    run_end = seg.text.data() + seg.text.size();
    run_protected = run_protected || demoted || in_plain_range(seg.text);
  }
  flush_run();
  if (add_special_tokens)
    ids.insert(ids.end(), parts_->suffix_ids.begin(), parts_->suffix_ids.end());
  return ids;
}

namespace {

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// [begin, end) widened to the UTF-8 characters it touches.
Tokenizer::TextRange whole_characters(std::string_view text, Tokenizer::TextRange r) {
  while (r.begin > 0 && r.begin < text.size() && is_continuation_byte(text[r.begin])) --r.begin;
  while (r.end < text.size() && is_continuation_byte(text[r.end])) ++r.end;
  return r;
}

}  // namespace

std::vector<Tokenizer::TextRange> Tokenizer::offsets(std::string_view text,
                                                     std::span<const int32_t> ids,
                                                     bool add_special_tokens) const {
  const size_t num_prefix = add_special_tokens ? parts_->prefix_ids.size() : 0;
  const size_t num_suffix = add_special_tokens ? parts_->suffix_ids.size() : 0;
  std::vector<TextRange> out(ids.size());
  if (ids.size() < num_prefix + num_suffix) return out;
  // The added tokens encode matched in the text (with the whitespace they strip), in order.
  std::vector<TextSegment> added;
  parts_->raw_matcher->split(text, added);
  std::erase_if(added, [](const TextSegment& seg) { return seg.id < 0; });
  auto range_of = [&](const TextSegment& seg) {
    const auto begin = static_cast<size_t>(seg.text.data() - text.data());
    return TextRange{begin, begin + seg.text.size()};
  };
  size_t next_added = 0;
  const TokenizerParts::DummyPrefix& dummy_prefix = parts_->dummy_prefix;
  auto fits = [&](size_t at, std::string_view bytes) { return text.substr(at).starts_with(bytes); };
  size_t cursor = 0;
  bool at_origin = true, after_added = false;
  for (size_t i = num_prefix; i < ids.size() - num_suffix; ++i) {
    const int32_t id = ids[i];
    // The nearest added token not behind the cursor (ones behind it were text: a chat's user
    // content, where special tokens are not recognized).
    while (next_added < added.size() && range_of(added[next_added]).begin < cursor) ++next_added;
    if (next_added < added.size() && added[next_added].id == id) {
      out[i] = range_of(added[next_added++]);
      cursor = out[i].end;
      at_origin = false;
      after_added = true;
      continue;
    }
    const std::string bytes = token_bytes(id);
    std::string_view own(bytes);
    // A run's first token may carry the dummy space: where the probes say encode puts one, or
    // wherever only its absence lets the bytes fit (a scheme the probes did not tell apart).
    const bool expected =
        (at_origin ? dummy_prefix.at_origin : after_added && dummy_prefix.after_added_token) &&
        (dummy_prefix.before_space || !fits(cursor, " "));
    at_origin = after_added = false;
    bool dummy =
        own.starts_with(' ') && fits(cursor, own.substr(1)) && (expected || !fits(cursor, own));
    if (dummy) own.remove_prefix(1);
    if (!fits(cursor, own)) {
      out[i] = {cursor, cursor};  // a normalizer rewrote the text here
      continue;
    }
    TextRange r = whole_characters(text, {cursor, cursor + own.size()});
    if (dummy && cursor < text.size())
      r.end = std::max(r.end, whole_characters(text, {cursor, cursor + 1}).end);
    out[i] = r;
    cursor += own.size();
  }
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    if (skip_special_tokens && parts_->special[id]) continue;
    tokens.push_back(parts_->id_to_token[id]);
  }
  if (!parts_->decoder) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) joined += ' ';
      joined += tokens[i];
    }
    return joined;
  }
  parts_->decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& token : tokens) out += token;
  return out;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(parts_->id_to_token.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return parts_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return parts_->eos_id; }

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && parts_->special[id];
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  return parts_->id_to_token[id];
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const std::string& text = parts_->id_to_token[id];
  if (!parts_->decoder) return text;
  return parts_->decoder->token_bytes(text);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = parts_->added_by_content.find(std::string(token));
      it != parts_->added_by_content.end()) {
    return it->second;
  }
  return parts_->model->token_to_id(token);
}

const std::string& Tokenizer::chat_template() const { return parts_->chat_template; }
const std::string& Tokenizer::tool_use_template() const { return parts_->tool_use_template; }

bool Tokenizer::is_byte_fallback_token(int32_t id) const {
  return id >= 0 && id < vocab_size() && parts_->byte_fallback[id];
}

}  // namespace lm
