// TGI's /generate-shaped request bodies: parsing with axum/serde's rejections (400/422
// text/plain) into a ParsedGenerateRequest. Validation is admission's (admission/validation.h).
#pragma once

#include <string_view>
#include <variant>

#include "server/admission/admission_request.h"
#include "server/admission/generate_parameters.h"
#include "server/wire/body_rejection.h"

namespace lm {

// The parameters TGI uses when the `parameters` key is absent: sampling on (since v1.4.0).
GenerateParameters default_generate_parameters();

enum class GenerateBody {
  kGenerate,  // GenerateRequest: /generate, /generate_stream, /tokenize
  kCompat,    // CompatGenerateRequest: POST / and /invocations, with `stream`
};

// Trailing bytes after the JSON value are ignored, as axum 0.7 does.
std::variant<ParsedGenerateRequest, BodyRejection> parse_generate_request(std::string_view body,
                                                                          GenerateBody shape);

// The request as admission takes it: one prompt, its parameters, whether it streams.
AdmissionRequest generate_admission_request(ParsedGenerateRequest request, bool streaming);

}  // namespace lm
