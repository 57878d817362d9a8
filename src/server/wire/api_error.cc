// TGI's error table (spec §2.2): every error_type the router emits and its HTTP status.
#include "server/wire/api_error.h"

#include <array>
#include <utility>

#include "server/wire/json_text.h"

namespace lm {
namespace {

// NOTE: the one error -> status table. Types with spaces are TGI's own spelling.
constexpr std::array<std::pair<std::string_view, int>, 16> kStatusByType = {{
    {"validation", 422},
    {"overloaded", 429},
    {"generation", 424},
    {"incomplete_generation", 500},
    {"incomplete_generation_stream", 500},
    {"template_error", 422},
    {"tool_error", 422},
    {"stream_serialization_error", 500},
    {"missing_template_variable", 422},
    {"healthcheck", 503},
    {"suffix not supported", 422},
    {"batch size exceeded", 422},
    {"Input validation error", 422},  // /vertex with no instances
    {"Incomplete generation", 500},   // /vertex when an instance fails
    {"no details", 500},
    {"headers", 500},
}};

}  // namespace

int api_error_status(std::string_view error_type) {
  for (const auto& [type, status] : kStatusByType) {
    if (type == error_type) return status;
  }
  return 500;
}

ApiError make_api_error(std::string error_type, std::string message) {
  const int status = api_error_status(error_type);
  return ApiError{status, std::move(message), std::move(error_type)};
}

std::string api_error_json(const ApiError& error) {
  std::string out = "{\"error\":";
  append_json_string(out, error.error);
  out += ",\"error_type\":";
  append_json_string(out, error.error_type);
  out += "}";
  return out;
}

ApiError validation_error(std::string_view detail) {
  return make_api_error("validation", "Input validation error: " + std::string(detail));
}

ApiError tokenizer_error(std::string_view detail) {
  return validation_error("tokenizer error " + std::string(detail));
}

ApiError generation_error(std::string_view client_error) {
  return make_api_error("generation",
                        "Request failed during generation: " + std::string(client_error));
}

ApiError overloaded_error() { return make_api_error("overloaded", "Model is overloaded"); }

ApiError incomplete_generation_error() {
  return make_api_error("incomplete_generation", "Incomplete generation");
}

ApiError incomplete_generation_stream_error() {
  return make_api_error("incomplete_generation_stream", "Incomplete generation stream");
}

ApiError stream_serialization_error() {
  return make_api_error("stream_serialization_error", "Stream event serialization error");
}

ApiError unhealthy_error() { return make_api_error("healthcheck", "unhealthy"); }

// NOTE: 503, not the table's 429 for "overloaded": the server (not the model) is full, and a load
// balancer retries a 503 elsewhere; the type stays "overloaded" so TGI's clients raise their
// OverloadedError.
ApiError connection_limit_error() {
  return ApiError{503, "Too many open connections", "overloaded"};
}

ApiError template_error(std::string_view detail) {
  return make_api_error("template_error", "Template error: " + std::string(detail));
}

ApiError tool_error(std::string_view detail) {
  return make_api_error("tool_error", "Tool error: " + std::string(detail));
}

ApiError missing_template_variable_error(std::string_view name) {
  return make_api_error("missing_template_variable",
                        "Missing template vatiable: " + std::string(name));
}

ApiError suffix_not_supported_error() {
  return make_api_error("suffix not supported",
                        "Suffix is not supported and can be achieved by preprocessing the prompt.");
}

ApiError batch_size_exceeded_error(size_t max_client_batch_size) {
  return make_api_error("batch size exceeded",
                        "Number of prompts exceeds the maximum allowed batch size of " +
                            std::to_string(max_client_batch_size));
}

}  // namespace lm
