// Tests of the HTTP response framing helpers (no sockets).
#include "server/transport/http_wire.h"

#include <gtest/gtest.h>

namespace lm::http_wire {
namespace {

TEST(HttpWireTest, ChunkHasHexSizeAndCrlf) {
  EXPECT_EQ(format_chunk("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(format_chunk(std::string(26, 'a')), "1a\r\n" + std::string(26, 'a') + "\r\n");
}

TEST(HttpWireTest, HeadReplacesHandlerFramingHeaders) {
  std::string head = format_response_head(200,
                                          {{"Content-Type", "application/json"},
                                           {"content-length", "5"},
                                           {"Connection", "upgrade"},
                                           {"Transfer-Encoding", "gzip"},
                                           {"X-Evil", "a\r\nSet: b"}},
                                          BodyFraming::kContentLength, 12, /*keep_alive=*/true);
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: ", 0), 0u);
  EXPECT_NE(head.find("\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\n"),
            std::string::npos);
  EXPECT_EQ(head.find("content-length: 5"), std::string::npos);
  EXPECT_EQ(head.find("upgrade"), std::string::npos);
  EXPECT_EQ(head.find("gzip"), std::string::npos);
  EXPECT_EQ(head.find("Evil"), std::string::npos);
}

TEST(HttpWireTest, FramingVariants) {
  std::string chunked = format_response_head(200, {}, BodyFraming::kChunked, 0, true);
  EXPECT_NE(chunked.find("Transfer-Encoding: chunked\r\n"), std::string::npos);
  EXPECT_EQ(chunked.find("Content-Length"), std::string::npos);
  std::string until_close = format_response_head(200, {}, BodyFraming::kUntilClose, 0, false);
  EXPECT_EQ(until_close.find("Content-Length"), std::string::npos);
  EXPECT_NE(until_close.find("Connection: close\r\n\r\n"), std::string::npos);
  std::string no_content = format_response_head(204, {}, BodyFraming::kContentLength, 0, true);
  EXPECT_EQ(no_content.find("Content-Length"), std::string::npos);
  std::string too_large = format_response_head(413, {}, BodyFraming::kContentLength, 3, false);
  EXPECT_EQ(too_large.rfind("HTTP/1.1 413 Payload Too Large\r\n", 0), 0u);
}

TEST(HttpWireTest, DateAndReasonPhrases) {
  EXPECT_EQ(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
  EXPECT_EQ(http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(reason_phrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(reason_phrase(299), "Unknown");
  EXPECT_FALSE(status_has_body(304));
  EXPECT_TRUE(status_has_body(200));
  EXPECT_EQ(to_lower_ascii("X-Compute-Type"), "x-compute-type");
}

}  // namespace
}  // namespace lm::http_wire
