// Informational route bodies (see info_response.h), written in serde's field order.
#include "server/tgi/info_response.h"

#include "server/wire/json_text.h"

namespace lm {
namespace {

void append_key(std::string& out, const char* key) {
  if (out.size() > 1) out.push_back(',');
  append_json_string(out, key);
  out.push_back(':');
}

void append_optional(std::string& out, const char* key, const std::optional<std::string>& v) {
  append_key(out, key);
  if (v) {
    append_json_string(out, *v);
  } else {
    out += "null";
  }
}

void append_number(std::string& out, const char* key, size_t v) {
  append_key(out, key);
  out += std::to_string(v);
}

}  // namespace

InfoBody info_body_of(const ServerSettings& s) {
  InfoBody info;
  info.model_id = s.model_id;
  info.model_sha = s.model_sha;
  info.model_pipeline_tag = s.model_pipeline_tag;
  info.max_concurrent_requests = static_cast<size_t>(s.max_concurrent_requests);
  info.max_best_of = s.limits.max_best_of;
  info.max_stop_sequences = s.limits.max_stop_sequences;
  info.max_input_tokens = s.limits.max_input_tokens;
  info.max_total_tokens = s.limits.max_total_tokens;
  info.validation_workers = s.validation_workers;
  info.max_client_batch_size = s.max_client_batch_size;
  return info;
}

std::string info_json(const InfoBody& info) {
  std::string out = "{";
  append_key(out, "model_id");
  append_json_string(out, info.model_id);
  append_optional(out, "model_sha", info.model_sha);
  append_optional(out, "model_pipeline_tag", info.model_pipeline_tag);
  append_number(out, "max_concurrent_requests", info.max_concurrent_requests);
  append_number(out, "max_best_of", info.max_best_of);
  append_number(out, "max_stop_sequences", info.max_stop_sequences);
  append_number(out, "max_input_tokens", info.max_input_tokens);
  append_number(out, "max_total_tokens", info.max_total_tokens);
  append_number(out, "validation_workers", info.validation_workers);
  append_number(out, "max_client_batch_size", info.max_client_batch_size);
  append_key(out, "router");
  append_json_string(out, info.router);
  append_key(out, "version");
  append_json_string(out, info.version);
  append_optional(out, "sha", info.sha);
  append_optional(out, "docker_label", info.docker_label);
  return out + "}";
}

std::string tokenize_response_json(const std::vector<TokenizeEntry>& tokens) {
  std::string out = "[";
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) out.push_back(',');
    out += "{\"id\":" + std::to_string(tokens[i].id) + ",\"text\":";
    append_json_string(out, tokens[i].text);
    out += ",\"start\":" + std::to_string(tokens[i].start) +
           ",\"stop\":" + std::to_string(tokens[i].stop) + "}";
  }
  return out + "]";
}

std::string models_response_json(const std::string& model_id) {
  std::string out = "{\"object\":\"list\",\"data\":[{\"id\":";
  append_json_string(out, model_id);
  out += ",\"object\":\"model\",\"created\":0,\"owned_by\":";
  append_json_string(out, model_id);
  return out + "}]}";
}

}  // namespace lm
