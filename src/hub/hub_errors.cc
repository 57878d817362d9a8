#include "hub/hub_errors.h"

#include <fmt/format.h>

namespace lm::hub {

bool is_retryable_status(long status) { return status == 429 || status >= 500; }

Error hub_http_error(const HttpResponse& response, const HubRequestContext& c) {
  const std::string code = response.header("x-error-code").value_or("");
  const std::string server_message = response.header("x-error-message").value_or("");
  const long status = response.status;
  const std::string token_hint =
      c.has_token ? "the token in HF_TOKEN cannot read it: check the token"
                  : "no token was sent: set HF_TOKEN to a token that can read it";
  if (code == "GatedRepo" || status == 403) {
    return Error{fmt::format(
        "Cannot access gated repo {} ({} {}): accept the licence on the model page {}/{} while "
        "logged in, then set HF_TOKEN to an access token of that account ({}).",
        c.repo_id, status, code.empty() ? "Forbidden" : code, c.endpoint, c.repo_id,
        c.has_token ? "the token sent has no access yet" : "no token was sent")};
  }
  if (status == 401) {
    if (server_message == "Invalid credentials in Authorization header") {
      return Error{fmt::format(
          "The Hub refused the token for {} (401: invalid credentials): HF_TOKEN is wrong or "
          "expired; set HF_TOKEN to a valid access token.",
          c.repo_id)};
    }
    return Error{fmt::format(
        "Cannot access {} (401 Unauthorized): the repository does not exist or is private, and "
        "{}. Check --model-id, and set HF_TOKEN for a private repository.",
        c.repo_id, token_hint)};
  }
  if (status == 404) {
    if (code == "RevisionNotFound") {
      return Error{fmt::format(
          "Revision '{}' not found in {} (404 RevisionNotFound): check --revision (a branch, tag "
          "or commit sha).",
          c.revision, c.repo_id)};
    }
    if (code == "EntryNotFound") {
      return Error{fmt::format("File {} not found in {} at revision {} (404 EntryNotFound).",
                               c.file, c.repo_id, c.revision)};
    }
    if (code == "RepoNotFound" || c.file.empty()) {
      return Error{fmt::format(
          "Repository {} not found on {} (404 RepoNotFound): check --model-id (a local folder, "
          "a .gguf file or a Hub id org/name); a private repository also needs HF_TOKEN.",
          c.repo_id, c.endpoint)};
    }
  }
  std::string detail = server_message;
  if (detail.empty()) detail = response.body.substr(0, 300);
  return Error{fmt::format("The Hub answered {} for {}{}{}", status, c.url,
                           code.empty() ? "" : " (" + code + ")",
                           detail.empty() ? "" : ": " + detail)};
}

}  // namespace lm::hub
