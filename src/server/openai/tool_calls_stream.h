// A streamed tool-call answer split into its calls: one call object (TGI's single call, and
// auto's no_tool text), or, in parallel mode, a JSON array of call objects, each read by its own
// ToolCallStream. Out come the deltas OpenAI streams parallel calls with: per call, its position,
// its name on its first delta, then its arguments as they grow.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai/chat_tools.h"

namespace lm {

class ToolCallsStream {
 public:
  struct Delta {
    uint32_t call_idx = 0;            // the call's position in the answer
    std::optional<std::string> name;  // set on the first delta of a call
    std::string arguments;
  };

  // allow_array: parallel mode. Without it the text is one call object, read exactly as
  // ToolCallStream reads it.
  explicit ToolCallsStream(bool allow_array) : mode_known_(!allow_array) {}

  // The deltas this text completes, in order (none while a call's name is still unknown).
  std::vector<Delta> push(std::string_view text);
  // Generation ended: what is left of the open call (its arguments so far when cut short), the
  // last delta to carry the finish reason; when nothing is left, an empty delta of the last call.
  // Empty when no call was named (no_tool, or no call object at all).
  std::vector<Delta> finish();

  // One call object: no_tool's content decoded so far and not yet taken (ToolCallStream).
  std::string take_content();
  bool is_no_tool() const { return !is_array_ && calls_.front().is_no_tool(); }
  const std::string& text() const { return text_; }

 private:
  // Array mode: feeds the new text to the calls it belongs to.
  void split(std::string_view text, std::vector<Delta>& out);
  void add(uint32_t call_idx, const std::optional<ToolCallStream::Delta>& delta,
           std::vector<Delta>& out);

  std::string text_;
  bool mode_known_;  // parallel mode: once the first non-space byte is in ("[": an array)
  bool is_array_ = false;
  std::vector<ToolCallStream> calls_ = std::vector<ToolCallStream>(1);
  // Array mode: where the scan is (inside the array, outside any call: depth 0).
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
  bool call_open_ = false;                       // the last call's object is not closed yet
  std::optional<uint32_t> last_named_call_idx_;  // the last call whose name was sent
};

}  // namespace lm
