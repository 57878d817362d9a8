#include "server/openai/tool_calls_stream.h"

namespace lm {

std::vector<ToolCallsStream::Delta> ToolCallsStream::push(std::string_view text) {
  std::vector<Delta> out;
  text_ += text;
  if (!mode_known_) {
    const size_t first = text_.find_first_not_of(" \t\n\r");
    if (first == std::string::npos) return out;
    mode_known_ = true;
    is_array_ = text_[first] == '[';
    if (is_array_) {
      calls_.clear();
      split(std::string_view(text_).substr(first + 1), out);
    } else {
      add(0, calls_.front().push(text_), out);
    }
    return out;
  }
  if (is_array_) {
    split(text, out);
  } else {
    add(0, calls_.front().push(text), out);
  }
  return out;
}

void ToolCallsStream::split(std::string_view text, std::vector<Delta>& out) {
  // Each call object goes whole to its own ToolCallStream; the array's own ", " and "]" to none.
  size_t piece_start = 0;  // where the open call's text starts in `text`
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!call_open_) {
      if (c == '{') {
        calls_.emplace_back();
        call_open_ = true;
        depth_ = 1;
        piece_start = i;
      }
      continue;
    }
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      // The call closed: the rest of its arguments now, not at the end of the answer.
      const auto call_idx = static_cast<uint32_t>(calls_.size() - 1);
      add(call_idx, calls_.back().push(text.substr(piece_start, i + 1 - piece_start)), out);
      add(call_idx, calls_.back().finish(), out);
      call_open_ = false;
    }
  }
  if (call_open_) {
    add(static_cast<uint32_t>(calls_.size() - 1), calls_.back().push(text.substr(piece_start)),
        out);
  }
}

void ToolCallsStream::add(uint32_t call_idx, const std::optional<ToolCallStream::Delta>& delta,
                          std::vector<Delta>& out) {
  if (!delta || (!delta->name && delta->arguments.empty())) return;
  if (delta->name) last_named_call_idx_ = call_idx;
  out.push_back({call_idx, delta->name, delta->arguments});
}

std::vector<ToolCallsStream::Delta> ToolCallsStream::finish() {
  std::vector<Delta> out;
  if (!is_array_) {
    // Kept even when empty: it carries the finish reason, as TGI's last delta does.
    if (auto delta = calls_.front().finish()) out.push_back({0, delta->name, delta->arguments});
    return out;
  }
  if (call_open_) add(static_cast<uint32_t>(calls_.size() - 1), calls_.back().finish(), out);
  if (out.empty() && last_named_call_idx_) out.push_back({*last_named_call_idx_, {}, ""});
  return out;
}

std::string ToolCallsStream::take_content() {
  return is_array_ ? std::string() : calls_.front().take_content();
}

}  // namespace lm
