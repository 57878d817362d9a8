// The OpenAI-compatible request bodies as hostile input: the first input byte picks the route
// (/v1/chat/completions or /v1/completions) and a few limits, the rest is the body. What parses
// is validated and mapped onto TGI's generation parameters and admission request (tools and
// response_format included); /invocations' shape detection reads the same body.
#include <cstdint>
#include <string_view>
#include <variant>

#include "server/openai/openai_request.h"

namespace {

void check_error(const lm::ApiError& e) {
  if (e.status < 400 || e.status >= 600 || e.error.empty()) __builtin_trap();
  (void)lm::api_error_json(e);
}

void check_rejection(const lm::BodyRejection& r) {
  if (r.status < 400 || r.status >= 500 || r.body.empty()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)lm::invocation_shape(body);
  lm::ValidationLimits limits;
  limits.grammar_support = flags & 2;
  const uint64_t max_n = 1 + (flags >> 4);
  if ((flags & 1) == 0) {
    auto parsed = lm::parse_chat_request(body);
    if (auto* r = std::get_if<lm::BodyRejection>(&parsed)) {
      check_rejection(*r);
      return 0;
    }
    lm::ChatRequest request = std::get<lm::ChatRequest>(std::move(parsed));
    if (auto e = lm::validate_chat_request(request, limits, max_n)) {
      check_error(*e);
      return 0;
    }
    (void)lm::chat_generate_parameters(request);
    (void)lm::chat_tool_prompt(request);
    (void)lm::chat_admission_request(std::move(request));
  } else {
    auto parsed = lm::parse_completion_request(body);
    if (auto* r = std::get_if<lm::BodyRejection>(&parsed)) {
      check_rejection(*r);
      return 0;
    }
    lm::CompletionRequest request = std::get<lm::CompletionRequest>(std::move(parsed));
    if (auto e = lm::validate_completion_request(request, limits, max_n, /*max_prompts=*/4,
                                                 /*prompt_logprobs_enabled=*/flags & 4)) {
      check_error(*e);
      return 0;
    }
    (void)lm::completion_generate_parameters(request);
    (void)lm::completion_admission_request(std::move(request));
  }
  return 0;
}
