#include "hub/hub_errors.h"

#include <gtest/gtest.h>

namespace lm::hub {
namespace {

std::string message(long status, std::string code, bool has_token = false,
                    std::string server_message = "") {
  HttpResponse r;
  r.status = status;
  if (!code.empty()) r.headers["x-error-code"] = code;
  if (!server_message.empty()) r.headers["x-error-message"] = server_message;
  HubRequestContext c{"https://huggingface.co",
                      "org/name",
                      "main",
                      "model.safetensors",
                      "https://huggingface.co/org/name/resolve/main/model.safetensors",
                      has_token};
  return hub_http_error(r, c).message;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(HubErrors, UnauthorizedSaysToSetTheToken) {
  const std::string m = message(401, "RepoNotFound");
  EXPECT_TRUE(has(m, "401")) << m;
  EXPECT_TRUE(has(m, "HF_TOKEN")) << m;
  EXPECT_TRUE(has(m, "no token was sent")) << m;
  const std::string wrong = message(401, "", true, "Invalid credentials in Authorization header");
  EXPECT_TRUE(has(wrong, "HF_TOKEN is wrong or expired")) << wrong;
}

TEST(HubErrors, GatedSaysToAcceptTheLicence) {
  for (const std::string& m : {message(403, "GatedRepo", true), message(401, "GatedRepo")}) {
    EXPECT_TRUE(has(m, "gated")) << m;
    EXPECT_TRUE(has(m, "accept the licence on the model page https://huggingface.co/org/name"))
        << m;
    EXPECT_TRUE(has(m, "HF_TOKEN")) << m;
  }
}

TEST(HubErrors, NotFoundByErrorCode) {
  EXPECT_TRUE(has(message(404, "RepoNotFound"), "Repository org/name not found"));
  EXPECT_TRUE(has(message(404, "RevisionNotFound"), "Revision 'main' not found in org/name"));
  EXPECT_TRUE(has(message(404, "EntryNotFound"), "File model.safetensors not found in org/name"));
  const std::string other = message(500, "", false, "Internal Error");
  EXPECT_TRUE(has(other, "500")) << other;
  EXPECT_TRUE(has(other, "Internal Error")) << other;
}

TEST(HubErrors, RetryableStatuses) {
  EXPECT_TRUE(is_retryable_status(500));
  EXPECT_TRUE(is_retryable_status(503));
  EXPECT_TRUE(is_retryable_status(429));
  EXPECT_FALSE(is_retryable_status(404));
  EXPECT_FALSE(is_retryable_status(401));
}

}  // namespace
}  // namespace lm::hub
