#include "server/tracing/otlp_http_sender.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace lm {
namespace {

TEST(OtlpTracesUrl, AppendsTheTracesPathOnce) {
  EXPECT_EQ(otlp_traces_url("http://otel:4318"), "http://otel:4318/v1/traces");
  EXPECT_EQ(otlp_traces_url("http://otel:4318/"), "http://otel:4318/v1/traces");
  EXPECT_EQ(otlp_traces_url("http://otel:4318/v1/traces"), "http://otel:4318/v1/traces");
  EXPECT_EQ(otlp_traces_url("http://otel:4318/v1/traces/"), "http://otel:4318/v1/traces");
  EXPECT_EQ(otlp_traces_url("https://collector.example/otlp"),
            "https://collector.example/otlp/v1/traces");
}

TEST(UrlPort, ReadsThePortOfAnyUrlShape) {
  EXPECT_EQ(url_port("http://otel:4317"), 4317);
  EXPECT_EQ(url_port("http://otel:4317/v1/traces"), 4317);
  EXPECT_EQ(url_port("otel:4318"), 4318);
  EXPECT_EQ(url_port("http://user:pw@otel:4317"), 4317);
  EXPECT_EQ(url_port("http://[::1]:4317/x"), 4317);
  EXPECT_EQ(url_port("http://otel"), std::nullopt);
  EXPECT_EQ(url_port("http://[::1]/x"), std::nullopt);
  EXPECT_EQ(url_port("http://otel:/x"), std::nullopt);
  EXPECT_EQ(url_port("http://otel:99999"), std::nullopt);
  EXPECT_EQ(url_port("http://otel:43x7"), std::nullopt);
}

TEST(OtlpHttpSender, AnUnreachableCollectorIsAnError) {
  // A port that was free a moment ago: nothing listens there.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(fd);
  const std::string url =
      "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port)) + "/v1/traces";
  OtlpHttpSender sender(url);
  Status sent = sender.send("{}");
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.error().message.find("POST " + url), std::string::npos) << sent.error().message;
}

}  // namespace
}  // namespace lm
