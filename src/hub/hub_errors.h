// The Hub's refusals as messages a user can act on: 401 (token missing or wrong: set HF_TOKEN),
// 403 / GatedRepo (accept the licence on the model page), 404 by the Hub's X-Error-Code
// (RepoNotFound, RevisionNotFound, EntryNotFound), anything else with the Hub's own message.
#pragma once

#include <string>

#include "base/result.h"
#include "hub/http_client.h"

namespace lm::hub {

struct HubRequestContext {
  std::string endpoint;
  std::string repo_id;
  std::string revision;
  std::string file;  // empty for the model info request
  std::string url;
  bool has_token = false;
};

Error hub_http_error(const HttpResponse& response, const HubRequestContext& context);

// 429 and 5xx are worth another try; other statuses are answers.
bool is_retryable_status(long status);

}  // namespace lm::hub
