// The one admission step (see admission.h).
#include "server/admission/admission.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "base/check.h"

namespace lm {
namespace {

constexpr const char* kValidation = "err=\"validation\"";
constexpr const char* kTemplate = "err=\"template\"";  // TGI's label for chat template errors

AdmissionFailure failure(ApiError error, const char* label = kValidation) {
  return AdmissionFailure{std::move(error), label};
}

// Validates, tokenizes (unless `ids` are given: the chat template's) and length-checks one prompt.
std::variant<AdmittedPrompt, ApiError> admit_prompt(ServerState& state, std::string text,
                                                    std::optional<std::vector<int32_t>> ids,
                                                    const AdmissionRequest& request) {
  auto valid_or = validate_parameters({std::move(text), request.parameters, request.streaming},
                                      state.settings.limits, request.streaming);
  if (auto* error = std::get_if<ApiError>(&valid_or)) return std::move(*error);
  AdmittedPrompt prompt;
  prompt.valid = std::move(std::get<ValidGenerateRequest>(valid_or));
  prompt.ids = ids ? std::move(*ids)
                   : state.tokenizer->encode(prompt.valid.inputs, /*add_special_tokens=*/true);
  if (auto error = validate_lengths(prompt.valid, prompt.ids.size(), state.settings.limits))
    return *error;
  if (prompt.ids.size() > prompt.valid.input_length)  // truncate: keep the last tokens
    prompt.ids.erase(prompt.ids.begin(), prompt.ids.end() - prompt.valid.input_length);
  if (prompt.valid.grammar_spec) {
    if (state.grammar_compiler == nullptr) return validation_error("grammar is not supported");
    const auto started = std::chrono::steady_clock::now();
    bool cache_hit = false;
    auto grammar_or = state.grammar_compiler->compile(*prompt.valid.grammar_spec, &cache_hit);
    state.metrics.observe(
        "lm_grammar_compile_duration_seconds",
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
        cache_hit ? "cache=\"hit\"" : "cache=\"miss\"");
    // NOTE: TGI passes regexes through unchecked (a bad one fails the generation, 424); an
    // invalid schema or regex fails here instead, before a permit's work is spent on it.
    if (!grammar_or.ok())
      return validation_error("grammar is not valid: " + grammar_or.error().message);
    prompt.grammar = std::move(*grammar_or);
  }
  return prompt;
}

// The engine's max_new_tokens for a prompt of `num_prompt_tokens`: the whole request, never past
// max_total_tokens.
int64_t clamped_max_new_tokens(const ValidGenerateRequest& valid, size_t num_prompt_tokens,
                               size_t max_total_tokens) {
  // TGI produces long generations in 1024-token pieces it re-submits silently until the
  // request's max_new_tokens or max_total_tokens is reached; the engine has no piece limit, so
  // the whole request runs as one sequence bounded the same way.
  const size_t room = max_total_tokens - std::min(max_total_tokens, num_prompt_tokens);
  const uint32_t wanted = std::max(valid.max_total_new_tokens, valid.max_new_tokens);
  return static_cast<int64_t>(std::min<size_t>(wanted, std::max<size_t>(room, 1)));
}

// The prompt's generations: the first keeps the request's seed, the others draw theirs from it
// (as TGI does for best_of), so a seeded request is reproducible.
void add_generations(Admission& admission, size_t prompt_idx, uint64_t num_choices,
                     const AdmissionRequest& request, const ServerSettings& settings) {
  const AdmittedPrompt& prompt = admission.prompts[prompt_idx];
  EngineRequest base;
  base.prompt_ids = prompt.ids;
  base.sampling = sampling_params_of(prompt.valid, request.presence_penalty);
  base.sampling.logit_bias = request.logit_bias;
  base.max_new_tokens =
      clamped_max_new_tokens(prompt.valid, prompt.ids.size(), settings.limits.max_total_tokens);
  // TGI bypasses the prefix cache for requests that ask for prompt logprobs, and computes them
  // only with --enable-prefill-logprobs (else details.prefill stays []).
  base.use_prefix_cache = !prompt.valid.decoder_input_details && !request.prompt_logprobs;
  base.prompt_logprobs = (prompt.valid.decoder_input_details && settings.enable_prefill_logprobs) ||
                         request.prompt_logprobs;
  if (request.prompt_logprobs)
    base.prompt_top_n_tokens = static_cast<int32_t>(prompt.valid.top_n_tokens);
  base.grammar = prompt.grammar;  // shared; each generation gets its own matcher
  std::mt19937_64 seeds(prompt.valid.seed);
  for (uint64_t choice = 0; choice < num_choices; ++choice) {
    AdmittedGeneration generation{prompt_idx, choice, base, std::nullopt};
    if (choice > 0) generation.engine_request.sampling.seed = seeds();
    if (generation.engine_request.sampling.is_random())
      generation.reported_seed = generation.engine_request.sampling.seed;
    admission.generations.push_back(std::move(generation));
  }
}

}  // namespace

std::variant<Admission, AdmissionFailure> admit(ServerState& state, AdmissionRequest request) {
  if (auto error =
          validate_before_permit(request.parameters, state.settings.limits, request.streaming)) {
    return failure(*error);
  }
  for (const auto& [id, bias] : request.logit_bias) {
    if (id >= state.tokenizer->vocab_size()) {
      return failure(validation_error("`logit_bias` token id " + std::to_string(id) +
                                      " is not in the vocabulary (size " +
                                      std::to_string(state.tokenizer->vocab_size()) + ")"));
    }
  }
  // Each prompt's ids when they are given (else its text is tokenized).
  std::vector<std::optional<std::vector<int32_t>>> given_ids(request.prompts.size());
  // A chat request is one prompt, the template's rendering, with the template's own ids.
  if (request.messages) {
    LM_CHECK(request.prompts.empty());
    const ChatTemplateContext context{state.chat_template.get(), state.bos_token, state.eos_token,
                                      state.tool_use_template.get()};
    auto prompt_or = render_chat_prompt(context, *state.tokenizer, *request.messages,
                                        request.chat_tools ? &*request.chat_tools : nullptr);
    if (auto* error = std::get_if<ApiError>(&prompt_or)) return failure(*error, kTemplate);
    ChatPrompt& chat = std::get<ChatPrompt>(prompt_or);
    request.prompts = {std::move(chat.text)};
    given_ids = {std::move(chat.ids)};
  }
  // Token-id prompts (completions) run as given; their text is what they decode to.
  for (std::vector<int32_t>& ids : request.prompt_ids) {
    for (int32_t id : ids) {
      if (id >= state.tokenizer->vocab_size()) {
        return failure(validation_error("`prompt` token id " + std::to_string(id) +
                                        " is not in the vocabulary (size " +
                                        std::to_string(state.tokenizer->vocab_size()) + ")"));
      }
    }
    request.prompts.push_back(state.tokenizer->decode(ids, /*skip_special_tokens=*/false));
    given_ids.push_back(std::move(ids));
  }
  // best_of 0 behaves as 1 (TGI validates best_of only when > 1).
  const uint64_t num_choices =
      request.n * std::max<uint64_t>(request.parameters.best_of.value_or(1), 1);
  auto permit_or = ConcurrencyPermit::try_acquire(
      state, static_cast<int64_t>(request.prompts.size() * num_choices));
  if (!permit_or) return failure(overloaded_error(), "err=\"overloaded\"");

  Admission admission;
  admission.permit = std::make_shared<ConcurrencyPermit>(std::move(*permit_or));
  for (size_t i = 0; i < request.prompts.size(); ++i) {
    auto prompt_or =
        admit_prompt(state, std::move(request.prompts[i]), std::move(given_ids[i]), request);
    if (auto* error = std::get_if<ApiError>(&prompt_or)) return failure(std::move(*error));
    admission.prompts.push_back(std::move(std::get<AdmittedPrompt>(prompt_or)));
  }
  for (size_t i = 0; i < admission.prompts.size(); ++i) {
    const AdmittedPrompt& prompt = admission.prompts[i];
    // NOTE: once per validated prompt, as TGI records them at validation: OpenAI's n choices of
    // one prompt are one validation. (TGI validates each best_of candidate again; we do not.)
    state.metrics.observe("tgi_request_input_length", static_cast<double>(prompt.ids.size()));
    state.metrics.observe("tgi_request_max_new_tokens", prompt.valid.max_new_tokens);
    add_generations(admission, i, num_choices, request, state.settings);
  }
  return admission;
}

void release_permit_on_hang_up(const Admission& admission, ResponseStream& response) {
  response.on_close([permit = std::weak_ptr<ConcurrencyPermit>(admission.permit)] {
    if (auto held = permit.lock()) held->release();
  });
}

void submit_all(
    ServerState& state, Admission& admission,
    const std::function<std::shared_ptr<TokenSink>(const AdmittedGeneration&)>& make_sink) {
  for (AdmittedGeneration& generation : admission.generations) {
    std::shared_ptr<TokenSink> sink = make_sink(generation);
    if (Status s = state.engine->submit(std::move(generation.engine_request), sink); !s.ok())
      sink->on_error(s.error().message);
  }
}

}  // namespace lm
