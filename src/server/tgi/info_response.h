// Bodies of TGI's informational routes: GET /info (v3 shape), POST /tokenize, GET /v1/models.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/state/server_settings.h"
#include "server/text/token_offsets.h"

namespace lm {

// The TGI router version we answer as (/info, the OpenAPI document, OpenAI fingerprints).
inline constexpr std::string_view kRouterVersion = "3.3.6-dev0";

// GET /info, keys in TGI's order (spec §1.11; dtype/device fields were removed in v2.4.1). The
// server fills it from its settings (info_body_of); the defaults here are only the router's own.
struct InfoBody {
  std::string model_id;
  std::optional<std::string> model_sha;
  std::optional<std::string> model_pipeline_tag;
  size_t max_concurrent_requests = 0;
  size_t max_best_of = 0;
  size_t max_stop_sequences = 0;
  size_t max_input_tokens = 0;
  size_t max_total_tokens = 0;
  size_t validation_workers = 0;
  size_t max_client_batch_size = 0;
  std::string router = "text-generation-router";
  std::string version = std::string(kRouterVersion);
  std::optional<std::string> sha;
  std::optional<std::string> docker_label;
};
// The body from the server's settings, with the router's own name and version.
InfoBody info_body_of(const ServerSettings& settings);
std::string info_json(const InfoBody& info);

std::string tokenize_response_json(const std::vector<TokenizeEntry>& tokens);

// GET /v1/models: one entry, owned_by = id, created 0.
std::string models_response_json(const std::string& model_id);

}  // namespace lm
