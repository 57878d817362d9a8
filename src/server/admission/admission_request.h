// What a route hands to admission: its request mapped onto TGI's generation parameters, with
// the prompts (or chat messages) and the few settings that are not parameters. Plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/admission/chat_prompt.h"
#include "server/admission/generate_parameters.h"

namespace lm {

struct AdmissionRequest {
  // The prompts, each validated and tokenized (with special tokens) on its own; or, when
  // `messages` is set, the one prompt rendered from them with the model's chat template.
  std::vector<std::string> prompts;
  // Prompts given as token ids (completions), after `prompts`: each runs as exactly those tokens,
  // its text (validation, echo) what they decode to with special tokens kept.
  std::vector<std::vector<int32_t>> prompt_ids;
  std::optional<std::vector<ChatMessage>> messages;
  std::optional<ChatToolPrompt> chat_tools;  // chat with tools: what the template gets
  GenerateParameters parameters;
  bool streaming = false;
  uint64_t n = 1;                 // OpenAI's choices per prompt (TGI's best_of multiplies it)
  float presence_penalty = 0.0f;  // OpenAI's presence penalty (TGI's routes have none)
  // OpenAI's logit_bias, ids parsed (range of the values checked by the route); admission checks
  // the ids against the vocabulary.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // OpenAI completions' echo with logprobs: each prompt token's logprob and its
  // parameters.top_n_tokens best alternatives (the route checked --enable-prefill-logprobs).
  bool prompt_logprobs = false;
};

}  // namespace lm
