#include "server/tracing/trace_ids.h"

#include <gtest/gtest.h>

#include <set>

namespace lm {
namespace {

constexpr const char* kTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(Traceparent, ParsesTheW3cExample) {
  auto parent = parse_traceparent(kTraceparent);
  ASSERT_TRUE(parent.has_value());
  EXPECT_EQ(to_hex(parent->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(to_hex(parent->parent_span_id), "00f067aa0ba902b7");
  EXPECT_EQ(parent->trace_id.bytes[0], 0x4b);
  EXPECT_EQ(parent->parent_span_id.bytes[7], 0xb7);
  EXPECT_EQ(parent->flags, 0x01);
  // Surrounding whitespace is not part of a header's value.
  EXPECT_TRUE(parse_traceparent(std::string(" \t") + kTraceparent + " ").has_value());
  EXPECT_EQ(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->flags, 0);
}

TEST(Traceparent, RejectsVersionFfAndAllZeroIds) {
  EXPECT_FALSE(parse_traceparent("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
  EXPECT_FALSE(parse_traceparent("00-00000000000000000000000000000000-00f067aa0ba902b7-01"));
  EXPECT_FALSE(parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"));
}

TEST(Traceparent, IgnoresMalformedValues) {
  for (const char* bad : {
           "", "00", "garbage",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",         // no flags
           "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",       // short trace id
           "00-4bf92f3577b34da6a3ce929d0e0e47366-00f067aa0ba902b7-01",     // long trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",       // short span id
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",      // uppercase
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",      // not hex
           "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",      // version not hex
           "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",      // separators
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",     // v00 has 4 fields
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-abc",  // v00 has 4 fields
           "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",     // no '-' after flags
       }) {
    EXPECT_FALSE(parse_traceparent(bad).has_value()) << bad;
  }
}

TEST(Traceparent, LaterVersionsMayAppendFields) {
  auto parent = parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz");
  ASSERT_TRUE(parent.has_value());
  EXPECT_EQ(to_hex(parent->trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_TRUE(parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"));
}

TEST(TraceIds, RandomIdsAreValidAndDistinct) {
  std::set<std::string> traces;
  std::set<std::string> spans;
  for (int i = 0; i < 1000; ++i) {
    TraceId trace = random_trace_id();
    SpanId span = random_span_id();
    ASSERT_TRUE(trace.valid());
    ASSERT_TRUE(span.valid());
    traces.insert(to_hex(trace));
    spans.insert(to_hex(span));
  }
  EXPECT_EQ(traces.size(), 1000u);
  EXPECT_EQ(spans.size(), 1000u);
  // Every byte is random, not just the first few.
  const std::string hex = to_hex(random_trace_id());
  EXPECT_EQ(hex.size(), 32u);
  EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_FALSE(TraceId{}.valid());
  EXPECT_FALSE(SpanId{}.valid());
}

}  // namespace
}  // namespace lm
