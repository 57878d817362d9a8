// Generate-route bodies and headers (see generate_response.h). Keys are written in TGI's struct
// field order (serde serializes in declaration order); skip_serializing_if rules are noted.
#include "server/tgi/generate_response.h"

#include "server/wire/json_text.h"

namespace lm {
namespace {

void append_u64(std::string& out, uint64_t v) { out += std::to_string(v); }

void append_token(std::string& out, const ResponseToken& t) {
  out += "{\"id\":";
  append_u64(out, t.id);
  out += ",\"text\":";
  append_json_string(out, t.text);
  out += ",\"logprob\":" + json_f32(t.logprob);
  out += t.special ? ",\"special\":true}" : ",\"special\":false}";
}

void append_tokens(std::string& out, const std::vector<ResponseToken>& tokens) {
  out.push_back('[');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i) out.push_back(',');
    append_token(out, tokens[i]);
  }
  out.push_back(']');
}

void append_seed(std::string& out, const std::optional<uint64_t>& seed) {
  out += ",\"seed\":";
  if (seed) {
    append_u64(out, *seed);
  } else {
    out += "null";
  }
}

// finish_reason .. tokens: the fields Details and BestOfSequence share.
void append_sequence_core(std::string& out, const GeneratedSequence& s) {
  out += "\"finish_reason\":";
  append_json_string(out, s.finish_reason);
  out += ",\"generated_tokens\":";
  append_u64(out, s.generated_tokens);
  append_seed(out, s.seed);
  out += ",\"prefill\":[";
  for (size_t i = 0; i < s.prefill.size(); ++i) {
    if (i) out.push_back(',');
    out += "{\"id\":";
    append_u64(out, s.prefill[i].id);
    out += ",\"text\":";
    append_json_string(out, s.prefill[i].text);
    out += ",\"logprob\":" + json_f32(s.prefill[i].logprob) + "}";
  }
  out += "],\"tokens\":";
  append_tokens(out, s.tokens);
}

void append_top_tokens(std::string& out, const std::vector<std::vector<ResponseToken>>& top) {
  if (top.empty()) return;  // skip_serializing_if = "Vec::is_empty"
  out += ",\"top_tokens\":[";
  for (size_t i = 0; i < top.size(); ++i) {
    if (i) out.push_back(',');
    append_tokens(out, top[i]);
  }
  out.push_back(']');
}

void append_best_of_sequence(std::string& out, const GeneratedSequence& s) {
  out += "{\"generated_text\":";
  append_json_string(out, s.generated_text);
  out.push_back(',');
  append_sequence_core(out, s);
  append_top_tokens(out, s.top_tokens);
  out.push_back('}');
}

void append_generate_response(std::string& out, const GenerateResponseBody& body) {
  out += "{\"generated_text\":";
  append_json_string(out, body.result.generated_text);
  if (body.include_details) {  // `details` is skipped when None
    out += ",\"details\":{";
    append_sequence_core(out, body.result);
    if (body.best_of_sequences) {  // skipped when None
      out += ",\"best_of_sequences\":[";
      for (size_t i = 0; i < body.best_of_sequences->size(); ++i) {
        if (i) out.push_back(',');
        append_best_of_sequence(out, (*body.best_of_sequences)[i]);
      }
      out.push_back(']');
    }
    append_top_tokens(out, body.result.top_tokens);
    out.push_back('}');
  }
  out.push_back('}');
}

// Rust's Duration::as_millis (truncating).
std::string millis(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

}  // namespace

std::string generate_response_json(const GenerateResponseBody& body) {
  std::string out;
  append_generate_response(out, body);
  return out;
}

std::string compat_generate_response_json(const GenerateResponseBody& body) {
  std::string out = "[";
  append_generate_response(out, body);
  return out + "]";
}

std::string stream_event_sse(const StreamTokenEvent& event) {
  std::string out = "data:{\"index\":";
  append_u64(out, event.index);
  out += ",\"token\":";
  append_token(out, event.token);
  if (!event.top_tokens.empty()) {
    out += ",\"top_tokens\":";
    append_tokens(out, event.top_tokens);
  }
  out += ",\"generated_text\":";
  if (event.generated_text) {
    append_json_string(out, *event.generated_text);
  } else {
    out += "null";
  }
  out += ",\"details\":";
  if (event.details) {
    out += "{\"finish_reason\":";
    append_json_string(out, event.details->finish_reason);
    out += ",\"generated_tokens\":";
    append_u64(out, event.details->generated_tokens);
    append_seed(out, event.details->seed);
    out += ",\"input_length\":";
    append_u64(out, event.details->input_length);
    out += "}";
  } else {
    out += "null";
  }
  return out + "}\n\n";
}

std::string stream_error_sse(const ApiError& error) {
  return "data:" + api_error_json(error) + "\n\n";
}

size_t count_characters(std::string_view text) {
  size_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

HeaderList generate_response_headers(std::string_view compute_type, size_t compute_characters,
                                     const GenerateTimings& timings, uint32_t prompt_tokens,
                                     uint32_t generated_tokens) {
  // Duration::as_secs_f64 then f64 Display: "0.351829417", "2", never an exponent.
  const double total_seconds = static_cast<double>(timings.total.count() / 1'000'000'000) +
                               static_cast<double>(timings.total.count() % 1'000'000'000) / 1e9;
  // Duration / u32 truncates to whole nanoseconds; TGI never divides by 0 (>= 1 token).
  const std::chrono::nanoseconds per_token =
      generated_tokens ? timings.inference / generated_tokens : std::chrono::nanoseconds(0);
  return {
      {"content-type", "application/json"},
      {"x-compute-type", std::string(compute_type)},
      {"x-compute-time", rust_f64_display(total_seconds)},
      {"x-compute-characters", std::to_string(compute_characters)},
      {"x-total-time", millis(timings.total)},
      {"x-validation-time", millis(timings.validation)},
      {"x-queue-time", millis(timings.queue)},
      {"x-inference-time", millis(timings.inference)},
      {"x-time-per-token", millis(per_token)},
      {"x-prompt-tokens", std::to_string(prompt_tokens)},
      {"x-generated-tokens", std::to_string(generated_tokens)},
  };
}

HeaderList stream_response_headers(std::string_view compute_type, size_t compute_characters) {
  return {
      {"content-type", "text/event-stream"},
      {"cache-control", "no-cache"},
      {"x-compute-type", std::string(compute_type)},
      {"x-compute-characters", std::to_string(compute_characters)},
      {"x-accel-buffering", "no"},
  };
}

}  // namespace lm
