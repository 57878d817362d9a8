// TGI's request bodies as hostile input: the first input byte picks the shape (/generate's
// GenerateRequest or the compat body of POST / and /invocations) and streaming, the rest is the
// body. What parses goes through every validation step that needs no tokenizer or engine
// (before the permit, the parameter rules, the length rules with a token count from the input),
// and a rejection or ApiError must carry a 4xx status and a body.
#include <cstdint>
#include <string_view>
#include <variant>

#include "server/admission/validation.h"
#include "server/tgi/generate_request.h"
#include "server/wire/api_error.h"

namespace {

void check_error(const lm::ApiError& e) {
  if (e.status < 400 || e.status >= 600) __builtin_trap();
  (void)lm::api_error_json(e);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto shape = (flags & 1) ? lm::GenerateBody::kCompat : lm::GenerateBody::kGenerate;
  const bool streaming = flags & 2;
  auto parsed = lm::parse_generate_request(body, shape);
  if (auto* rejection = std::get_if<lm::BodyRejection>(&parsed)) {
    if (rejection->status < 400 || rejection->status >= 500 || rejection->body.empty())
      __builtin_trap();
    return 0;
  }
  lm::ParsedGenerateRequest request = std::get<lm::ParsedGenerateRequest>(std::move(parsed));
  (void)lm::debug_text(request.parameters);
  lm::ValidationLimits limits;
  limits.grammar_support = flags & 4;
  if (auto e = lm::validate_before_permit(request.parameters, limits, streaming)) {
    check_error(*e);
    return 0;
  }
  (void)lm::generate_admission_request(request, streaming);
  auto valid = lm::validate_parameters(std::move(request), limits, streaming);
  if (auto* e = std::get_if<lm::ApiError>(&valid)) {
    check_error(*e);
    return 0;
  }
  auto& ok = std::get<lm::ValidGenerateRequest>(valid);
  // A token count from the input: one per 4 bytes, as a rough tokenizer would give.
  if (auto e = lm::validate_lengths(ok, ok.inputs.size() / 4 + (flags >> 4), limits)) {
    check_error(*e);
    return 0;
  }
  if (ok.input_length > limits.max_input_tokens || ok.max_new_tokens > lm::kMaxNewTokensPerPiece)
    __builtin_trap();
  (void)lm::sampling_params_of(ok);
  return 0;
}
