#include "server/openai/completion_logprobs.h"

#include <algorithm>

#include "base/utf8.h"
#include "tokenizer/stream_decoder.h"

namespace lm {

std::vector<TokenAlternative> alternatives_with_token(const ResponseToken& token,
                                                      const std::vector<ResponseToken>& top) {
  std::vector<TokenAlternative> out;
  for (const ResponseToken& alt : top) out.push_back({alt.text, alt.logprob});
  const bool listed = std::any_of(top.begin(), top.end(),
                                  [&](const ResponseToken& alt) { return alt.id == token.id; });
  if (!listed) out.push_back({token.text, token.logprob});
  return out;
}

std::vector<size_t> piece_offsets(std::string_view text, const std::vector<std::string>& pieces,
                                  const std::vector<bool>& special) {
  std::vector<size_t> out;
  size_t cursor = 0;        // bytes of `text` already covered
  size_t cursor_chars = 0;  // the same in characters
  for (size_t i = 0; i < pieces.size(); ++i) {
    const std::string& piece = pieces[i];
    size_t at = std::string_view::npos;
    if (!piece.empty()) {
      at = special[i] ? (text.substr(cursor).starts_with(piece) ? cursor : std::string_view::npos)
                      : text.find(piece, cursor);
    }
    if (at == std::string_view::npos) {
      out.push_back(cursor_chars);
      continue;
    }
    const size_t start_chars = cursor_chars + utf8_length(text.substr(cursor, at - cursor));
    out.push_back(start_chars);
    cursor = at + piece.size();
    cursor_chars = start_chars + utf8_length(piece);
  }
  return out;
}

CompletionLogprobs echo_logprobs(const Tokenizer& tokenizer, std::string_view prompt_text,
                                 std::span<const int32_t> prompt_ids,
                                 const SampleResult& first_token) {
  CompletionLogprobs out;
  std::vector<bool> special;
  StreamDecoder decoder(tokenizer);
  for (int32_t id : prompt_ids) {
    out.tokens.push_back(decoder.push(id));
    special.push_back(tokenizer.is_special(id));
  }
  if (!out.tokens.empty()) out.tokens.back() += decoder.flush();
  out.text_offset = piece_offsets(prompt_text, out.tokens, special);
  // Entry i >= 1 is scored at position i - 1; nothing scores the first token.
  const std::vector<float>& logprobs = first_token.prompt_logprobs;
  const std::vector<std::vector<TokenLogprob>>& top = first_token.prompt_top_tokens;
  for (size_t i = 0; i < prompt_ids.size(); ++i) {
    if (i == 0 || i - 1 >= logprobs.size()) {
      out.token_logprobs.push_back(std::nullopt);
      out.top_logprobs.push_back(std::nullopt);
      continue;
    }
    ResponseToken token;
    token.id = static_cast<uint32_t>(prompt_ids[i]);
    token.text = out.tokens[i];
    token.logprob = logprobs[i - 1];
    std::vector<ResponseToken> alternatives;
    if (i - 1 < top.size()) {
      for (const TokenLogprob& alt : top[i - 1]) {
        const int32_t ids[] = {alt.id};
        alternatives.push_back({static_cast<uint32_t>(alt.id),
                                tokenizer.decode(ids, /*skip_special_tokens=*/false), alt.logprob,
                                tokenizer.is_special(alt.id)});
      }
    }
    out.token_logprobs.push_back(token.logprob);
    out.top_logprobs.push_back(alternatives_with_token(token, alternatives));
  }
  return out;
}

void append_token_logprobs(CompletionLogprobs& out, const ResponseToken& token,
                           const std::vector<ResponseToken>& top, size_t text_offset) {
  out.tokens.push_back(token.text);
  out.token_logprobs.push_back(token.logprob);
  out.top_logprobs.push_back(alternatives_with_token(token, top));
  out.text_offset.push_back(text_offset);
}

void append_logprobs(CompletionLogprobs& out, const CompletionLogprobs& more) {
  out.tokens.insert(out.tokens.end(), more.tokens.begin(), more.tokens.end());
  out.token_logprobs.insert(out.token_logprobs.end(), more.token_logprobs.begin(),
                            more.token_logprobs.end());
  out.top_logprobs.insert(out.top_logprobs.end(), more.top_logprobs.begin(),
                          more.top_logprobs.end());
  out.text_offset.insert(out.text_offset.end(), more.text_offset.begin(), more.text_offset.end());
}

}  // namespace lm
