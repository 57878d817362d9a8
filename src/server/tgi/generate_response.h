// Bodies of TGI's generate routes, byte for byte as serde_json writes them: the /generate JSON
// (and the compat route's one-element array), /generate_stream SSE events, SSE error events,
// and the x-* response headers. Inputs are plain structs the route layer fills.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/text/generated_sequence.h"
#include "server/wire/api_error.h"

namespace lm {

struct GenerateResponseBody {
  GeneratedSequence result;
  bool include_details = false;  // parameters.details || parameters.decoder_input_details
  std::optional<std::vector<GeneratedSequence>> best_of_sequences;  // best_of > 1 only
};

// POST /generate: {"generated_text":...,"details":{...}}.
std::string generate_response_json(const GenerateResponseBody& body);
// POST / (and /invocations) with stream false: [GenerateResponse].
std::string compat_generate_response_json(const GenerateResponseBody& body);

struct StreamDetailsBody {
  std::string finish_reason;
  uint32_t generated_tokens = 0;
  std::optional<uint64_t> seed;
  uint32_t input_length = 0;
};

struct StreamTokenEvent {
  uint32_t index = 1;  // 1-based position of the token in the response
  ResponseToken token;
  std::vector<ResponseToken> top_tokens;      // omitted when empty
  std::optional<std::string> generated_text;  // last event only
  std::optional<StreamDetailsBody> details;   // last event, when details were requested
};

// `data:{...}\n\n` (no space after the colon, no event/id fields, no [DONE]).
std::string stream_event_sse(const StreamTokenEvent& event);
// `data:{"error":...,"error_type":...}\n\n`; the stream ends after it.
std::string stream_error_sse(const ApiError& error);
// Sent after 15 s without an event.
inline constexpr std::string_view kSseKeepAlive = ":\n\n";

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct GenerateTimings {
  std::chrono::nanoseconds total{0};       // request start -> response
  std::chrono::nanoseconds validation{0};  // request start -> enqueued
  std::chrono::nanoseconds queue{0};       // enqueued -> first batch
  std::chrono::nanoseconds inference{0};   // first batch -> done
};

// x-* headers of a non-stream generate response (spec §1.17), in TGI's order; content-type
// included. compute_characters counts Unicode scalar values of `inputs`.
HeaderList generate_response_headers(std::string_view compute_type, size_t compute_characters,
                                     const GenerateTimings& timings, uint32_t prompt_tokens,
                                     uint32_t generated_tokens);
// Headers of an SSE generate response.
HeaderList stream_response_headers(std::string_view compute_type, size_t compute_characters);
// Unicode scalar values in UTF-8 text (Rust's chars().count()).
size_t count_characters(std::string_view text);

}  // namespace lm
