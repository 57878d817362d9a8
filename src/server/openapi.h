// The OpenAPI 3.0 document served at /api-doc/openapi.json (every route we serve, with the
// statuses and content types we actually send) and the self-contained /docs page.
#pragma once

#include <string>

#include "server/admission/validation.h"

namespace lm {

struct OpenApiOptions {
  ValidationLimits limits;  // numeric bounds in the schemas (stop count, top_n_tokens, ...)
  std::string version = "3.3.6-dev0";
};

// Compact JSON text of the document.
std::string openapi_json(const OpenApiOptions& options);

// /docs: an HTML page without external resources (no CDN) that fetches /api-doc/openapi.json
// and lists the routes, their statuses and the component schemas. Not Swagger UI.
std::string docs_html();

}  // namespace lm
