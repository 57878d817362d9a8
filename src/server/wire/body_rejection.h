// Rejections by the JSON extractor, before any TGI code looks at a request: axum/serde's
// text/plain bodies (400 malformed JSON, 415, 422 wrong shape), shared by every route family.
#pragma once

#include <string>
#include <string_view>

namespace lm {

// A rejection by the JSON extractor: text/plain, not ApiError JSON.
struct BodyRejection {
  int status = 400;  // 400 malformed JSON, 422 wrong shape
  std::string
      body;  // "Failed to parse the request body as JSON: ..." / "Failed to deserialize ..."
};
inline constexpr std::string_view kTextPlain = "text/plain; charset=utf-8";
// axum's other extractor rejections, for the route layer.
inline constexpr std::string_view kMissingJsonContentType =
    "Expected request with `Content-Type: application/json`";  // 415
// /invocations when the body is none of generate/chat/completions (422 text/plain).
inline constexpr std::string_view kSagemakerNoMatch =
    "Failed to deserialize the JSON body into the target type: data did not match any variant "
    "of untagged enum SagemakerRequest";

}  // namespace lm
