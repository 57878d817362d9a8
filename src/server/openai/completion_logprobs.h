// The entries of a legacy completion's `logprobs` (OpenAI's shape, as vLLM fills it): with
// `echo`, first the prompt's tokens (the first with a null logprob and null alternatives: nothing
// precedes it), then one per generated token. text_offset counts characters of the choice's text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampled_token.h"
#include "server/openai/openai_response.h"
#include "server/text/generated_sequence.h"
#include "tokenizer/tokenizer.h"

namespace lm {

// A token's alternatives as the map shows them: `top` (best first), then the token itself when it
// is not among them (OpenAI: up to logprobs + 1 entries, the chosen token's always there).
std::vector<TokenAlternative> alternatives_with_token(const ResponseToken& token,
                                                      const std::vector<ResponseToken>& top);

// Where each of a text's token pieces starts in `text`, in characters. Pieces are looked for in
// order, from where the previous one ended: a special token's piece only right there (a BOS the
// tokenizer added is not in the text), any other anywhere after (decoding may drop or change
// characters). A piece not found takes no room: it sits where the previous one ended.
std::vector<size_t> piece_offsets(std::string_view text, const std::vector<std::string>& pieces,
                                  const std::vector<bool>& special);

// The echoed prompt's entries: `prompt_ids`, the tokens of `prompt_text`, scored by the first
// generated token's prompt_logprobs and prompt_top_tokens. Each token's text is what it adds under
// incremental decoding (so they concatenate to the decoded prompt); alternatives are decoded
// alone, as for generated tokens.
CompletionLogprobs echo_logprobs(const Tokenizer& tokenizer, std::string_view prompt_text,
                                 std::span<const int32_t> prompt_ids,
                                 const SampleResult& first_token);

// Appends a generated token's entry at `text_offset` characters of the choice's text.
void append_token_logprobs(CompletionLogprobs& out, const ResponseToken& token,
                           const std::vector<ResponseToken>& top, size_t text_offset);

// Appends `more`'s entries to `out`.
void append_logprobs(CompletionLogprobs& out, const CompletionLogprobs& more);

}  // namespace lm
