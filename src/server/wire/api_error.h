// Request errors as TGI reports them: {"error": ..., "error_type": ...} with an HTTP status.
// The one table mapping an error_type to its status lives in api_error.cc.
#pragma once

#include <string>
#include <string_view>

namespace lm {

struct ApiError {
  int status = 500;
  std::string error;       // human-readable message
  std::string error_type;  // machine type: "validation", "overloaded", ...
};

// The HTTP status TGI answers for an error_type (500 for types it does not know).
int api_error_status(std::string_view error_type);
// An ApiError whose status comes from the table.
ApiError make_api_error(std::string error_type, std::string message);

// {"error":"...","error_type":"..."} (compact, serde field order).
std::string api_error_json(const ApiError& error);

// The errors of TGI's generate routes (spec §2.2).
ApiError validation_error(std::string_view detail);  // 422 "Input validation error: {detail}"
ApiError tokenizer_error(std::string_view detail);   // 422 validation "tokenizer error {detail}"
ApiError generation_error(std::string_view client_error);  // 424 "Request failed during ..."
ApiError overloaded_error();                               // 429 "Model is overloaded"
ApiError incomplete_generation_error();                    // 500, non-stream
ApiError incomplete_generation_stream_error();             // 500, only ever inside SSE
ApiError stream_serialization_error();                     // 500
ApiError unhealthy_error();                                // 503, /health
ApiError connection_limit_error();  // 503 "overloaded", past --max-connections (ours)
// Chat and completions routes.
ApiError template_error(std::string_view detail);                  // 422 "Template error: {detail}"
ApiError tool_error(std::string_view detail);                      // 422 "Tool error: {detail}"
ApiError missing_template_variable_error(std::string_view name);   // 422 (TGI's typo kept)
ApiError suffix_not_supported_error();                             // 422, /v1/completions
ApiError batch_size_exceeded_error(size_t max_client_batch_size);  // 422, /v1/completions

}  // namespace lm
