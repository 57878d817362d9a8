// ToolCallsStream: a streamed answer split into its calls' deltas as OpenAI streams parallel
// calls (index, then name once, then arguments), and TGI's single call unchanged.
#include "server/openai/tool_calls_stream.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

namespace lm {
namespace {

struct Rebuilt {
  std::map<uint32_t, std::string> names;
  std::map<uint32_t, std::string> arguments;
  std::vector<uint32_t> order;  // the call of each delta
  size_t num_final = 0;
};

// What a client accumulating deltas by index rebuilds from `text` cut into `piece`-byte pushes.
Rebuilt rebuild(const std::string& text, size_t piece, bool allow_array = true) {
  ToolCallsStream s(allow_array);
  Rebuilt out;
  auto take = [&](const ToolCallsStream::Delta& d) {
    if (d.name) {
      EXPECT_EQ(out.names.count(d.call_idx), 0u) << "a second name for call " << d.call_idx;
      EXPECT_EQ(d.call_idx, out.names.size()) << "calls start in order";
      out.names[d.call_idx] = *d.name;
    } else {
      EXPECT_EQ(out.names.count(d.call_idx), 1u) << "arguments before the name";
    }
    out.arguments[d.call_idx] += d.arguments;
    out.order.push_back(d.call_idx);
  };
  for (size_t at = 0; at < text.size(); at += piece) {
    for (const auto& d : s.push(text.substr(at, piece))) take(d);
  }
  const auto last = s.finish();
  out.num_final = last.size();
  for (const auto& d : last) take(d);
  return out;
}

const std::string kTwoCalls =
    R"([{"function": {"_name": "get_weather", "city": "R}o\"me", "at": {"h": [1, 2]}}}, )"
    R"({"function": {"_name": "ping"}}])";

TEST(ToolCallsStream, ArrayCallsRebuildWhateverThePieces) {
  for (size_t piece : {1u, 2u, 3u, 7u, 1000u}) {
    const Rebuilt r = rebuild(kTwoCalls, piece);
    ASSERT_EQ(r.names.size(), 2u) << piece;
    EXPECT_EQ(r.names.at(0), "get_weather");
    EXPECT_EQ(r.names.at(1), "ping");
    EXPECT_EQ(r.arguments.at(0), R"({"city": "R}o\"me", "at": {"h": [1, 2]}})") << piece;
    EXPECT_EQ(r.arguments.at(1), "{}") << piece;
    EXPECT_TRUE(std::is_sorted(r.order.begin(), r.order.end())) << "calls interleaved";
    // The last call closed before the array did: the finish reason rides an empty delta.
    EXPECT_EQ(r.num_final, 1u);
  }
  // Streamed as generated: call 0's arguments before call 1 starts.
  EXPECT_GT(rebuild(kTwoCalls, 1).order.size(), 10u);
}

TEST(ToolCallsStream, ACallClosesAsSoonAsItsObjectDoes) {
  ToolCallsStream s(true);
  EXPECT_TRUE(s.push(" [").empty());
  auto d = s.push(R"({"function": {"_name": "ping"}})");
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].name, "ping");
  EXPECT_EQ(d[0].arguments, "{");
  EXPECT_EQ(d[1].arguments, "}");
  EXPECT_TRUE(s.push(", ").empty());
  d = s.push(R"({"function": {"_name": "get_weather", "city": "Pa)");
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].call_idx, 1u);
  EXPECT_EQ(d[0].arguments, R"({"city": "Pa)");
  // Cut short (max_tokens): the open call's arguments so far carry the finish.
  d = s.finish();
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].call_idx, 1u);
  EXPECT_EQ(d[0].arguments, "");
  EXPECT_EQ(s.take_content(), "");
  EXPECT_FALSE(s.is_no_tool());
}

TEST(ToolCallsStream, OneObjectIsTgisSingleCall) {
  const std::string one = R"({"function": {"_name": "get_weather", "city": "Rome"}})";
  for (bool allow_array : {false, true}) {
    // The same deltas as ToolCallStream gives, call 0 only, the last one kept even when empty.
    ToolCallStream single;
    ToolCallsStream s(allow_array);
    for (size_t at = 0; at < one.size(); at += 3) {
      const std::string piece = one.substr(at, 3);
      const auto expected = single.push(piece);
      const auto got = s.push(piece);
      ASSERT_EQ(got.size(), expected ? 1u : 0u) << at;
      if (expected) {
        EXPECT_EQ(got[0].call_idx, 0u);
        EXPECT_EQ(got[0].name, expected->name);
        EXPECT_EQ(got[0].arguments, expected->arguments);
      }
    }
    const auto last = s.finish();
    ASSERT_EQ(last.size(), 1u);
    EXPECT_EQ(last[0].arguments, single.finish()->arguments);
    EXPECT_EQ(s.text(), one);
  }
  // Without parallel calls nothing is split (the grammar never gives an array): one call only.
  ToolCallsStream tgi(false);
  for (const auto& d : tgi.push(kTwoCalls)) EXPECT_EQ(d.call_idx, 0u);
  for (const auto& d : tgi.finish()) EXPECT_EQ(d.call_idx, 0u);
}

TEST(ToolCallsStream, NoToolStreamsItsContent) {
  ToolCallsStream s(true);
  std::string content;
  for (const char* piece :
       {"  ", R"({"function": {"_name": "no_tool", )", R"("content": "Hi)", R"( there"}})"}) {
    EXPECT_TRUE(s.push(piece).empty());
    content += s.take_content();
  }
  EXPECT_TRUE(s.is_no_tool());
  EXPECT_EQ(content, "Hi there");
  EXPECT_TRUE(s.finish().empty());
  ToolCallsStream nothing(true);
  EXPECT_TRUE(nothing.push("[").empty());
  EXPECT_TRUE(nothing.finish().empty());  // no call named: the text goes out as content
  EXPECT_EQ(nothing.text(), "[");
}

}  // namespace
}  // namespace lm
