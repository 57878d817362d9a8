#include "server/openai/openai_response.h"

#include "server/wire/json_text.h"

namespace lm {
namespace {

void append_meta(std::string& out, std::string_view object, const OpenAiMeta& meta) {
  out += "{\"object\":";
  append_json_string(out, object);
  out += ",\"id\":\"\",\"created\":" + std::to_string(meta.created) + ",\"model\":";
  append_json_string(out, meta.model);
  out += ",\"system_fingerprint\":";
  append_json_string(out, meta.system_fingerprint);
}

void append_usage(std::string& out, const OpenAiUsage& usage) {
  out += "{\"prompt_tokens\":" + std::to_string(usage.prompt_tokens) +
         ",\"completion_tokens\":" + std::to_string(usage.completion_tokens) +
         ",\"total_tokens\":" + std::to_string(usage.prompt_tokens + usage.completion_tokens) + "}";
}

void append_chat_logprob(std::string& out, const ChatTokenLogprob& lp) {
  out += "{\"token\":";
  append_json_string(out, lp.token);
  out += ",\"logprob\":" + json_f32(lp.logprob) + ",\"top_logprobs\":[";
  for (size_t i = 0; i < lp.top_logprobs.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"token\":";
    append_json_string(out, lp.top_logprobs[i].token);
    out += ",\"logprob\":" + json_f32(lp.top_logprobs[i].logprob) + "}";
  }
  out += "]}";
}

void append_completion_logprobs(std::string& out, const std::optional<CompletionLogprobs>& lp) {
  if (!lp) {
    out += "null";
    return;
  }
  out += "{\"tokens\":[";
  for (size_t i = 0; i < lp->tokens.size(); ++i) {
    if (i > 0) out += ',';
    append_json_string(out, lp->tokens[i]);
  }
  out += "],\"token_logprobs\":[";
  for (size_t i = 0; i < lp->token_logprobs.size(); ++i) {
    if (i > 0) out += ',';
    out += lp->token_logprobs[i] ? json_f32(*lp->token_logprobs[i]) : "null";
  }
  out += "],\"top_logprobs\":[";
  for (size_t i = 0; i < lp->top_logprobs.size(); ++i) {
    if (i > 0) out += ',';
    if (!lp->top_logprobs[i]) {
      out += "null";
      continue;
    }
    out += '{';
    const std::vector<TokenAlternative>& top = *lp->top_logprobs[i];
    for (size_t j = 0; j < top.size(); ++j) {
      if (j > 0) out += ',';
      append_json_string(out, top[j].token);
      out += ':' + json_f32(top[j].logprob);
    }
    out += '}';
  }
  out += "],\"text_offset\":[";
  for (size_t i = 0; i < lp->text_offset.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(lp->text_offset[i]);
  }
  out += "]}";
}

void append_completion_choice(std::string& out, const CompletionChoice& c) {
  out += "{\"index\":" + std::to_string(c.index) + ",\"text\":";
  append_json_string(out, c.text);
  out += ",\"logprobs\":";
  append_completion_logprobs(out, c.logprobs);
  out += ",\"finish_reason\":";
  append_json_string(out, c.finish_reason);
  out += '}';
}

}  // namespace

const char* chat_finish_reason(FinishReason reason) {
  return reason == FinishReason::kEosToken ? "stop" : finish_reason_name(reason);
}

std::string chat_completion_json(const OpenAiMeta& meta, const std::vector<ChatChoice>& choices,
                                 const OpenAiUsage& usage) {
  std::string out;
  append_meta(out, "chat.completion", meta);
  out += ",\"choices\":[";
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChatChoice& c = choices[i];
    if (i > 0) out += ',';
    out += "{\"index\":" + std::to_string(c.index) +
           ",\"message\":{\"role\":\"assistant\",\"content\":";
    if (!c.tool_calls.empty()) {
      out += "null,\"tool_calls\":[";
      for (size_t j = 0; j < c.tool_calls.size(); ++j) {
        const ChatToolCall& call = c.tool_calls[j];
        out += j > 0 ? ",{\"id\":" : "{\"id\":";
        append_json_string(out, call.id);
        out += ",\"type\":\"function\",\"function\":{\"description\":null,\"name\":";
        append_json_string(out, call.name);
        out += ",\"arguments\":";
        append_json_string(out, call.arguments);
        out += "}}";
      }
      out += ']';
    } else {
      append_json_string(out, c.content);
    }
    out += "},\"logprobs\":";
    if (c.logprobs) {
      out += "{\"content\":[";
      for (size_t j = 0; j < c.logprobs->size(); ++j) {
        if (j > 0) out += ',';
        append_chat_logprob(out, (*c.logprobs)[j]);
      }
      out += "]}";
    } else {
      out += "null";
    }
    out += ",\"finish_reason\":";
    append_json_string(out, c.finish_reason);
    out += '}';
  }
  out += "],\"usage\":";
  append_usage(out, usage);
  out += '}';
  return out;
}

std::string chat_chunk_json(const OpenAiMeta& meta, const ChatChunkChoice& choice) {
  std::string out;
  append_meta(out, "chat.completion.chunk", meta);
  out += ",\"choices\":[{\"index\":" + std::to_string(choice.index) +
         ",\"delta\":{\"role\":\"assistant\",\"content\":";
  append_json_string(out, choice.content);
  out += "},\"logprobs\":";
  if (choice.logprob) {
    out += "{\"content\":[";
    append_chat_logprob(out, *choice.logprob);
    out += "]}";
  } else {
    out += "null";
  }
  out += ",\"finish_reason\":";
  if (choice.finish_reason) {
    append_json_string(out, *choice.finish_reason);
  } else {
    out += "null";
  }
  out += "}],\"usage\":null}";
  return out;
}

std::string chat_tool_chunk_json(const OpenAiMeta& meta, uint32_t index,
                                 const ChatToolCallDelta& delta,
                                 const std::optional<std::string>& finish_reason) {
  std::string out;
  append_meta(out, "chat.completion.chunk", meta);
  out += ",\"choices\":[{\"index\":" + std::to_string(index) +
         ",\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":" +
         std::to_string(delta.call_index);
  if (delta.id) {
    out += ",\"id\":";
    append_json_string(out, *delta.id);
    out += ",\"type\":\"function\"";
  }
  out += ",\"function\":{";
  if (delta.name) {
    out += "\"name\":";
    append_json_string(out, *delta.name);
    out += ',';
  }
  out += "\"arguments\":";
  append_json_string(out, delta.arguments);
  out += "}}]},\"logprobs\":null,\"finish_reason\":";
  if (finish_reason) {
    append_json_string(out, *finish_reason);
  } else {
    out += "null";
  }
  out += "}],\"usage\":null}";
  return out;
}

std::string chat_usage_chunk_json(const OpenAiMeta& meta, const OpenAiUsage& usage) {
  std::string out;
  append_meta(out, "chat.completion.chunk", meta);
  out += ",\"choices\":[],\"usage\":";
  append_usage(out, usage);
  out += '}';
  return out;
}

std::string completion_json(const OpenAiMeta& meta, const std::vector<CompletionChoice>& choices,
                            const OpenAiUsage& usage) {
  std::string out;
  append_meta(out, "text_completion", meta);
  out += ",\"choices\":[";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) out += ',';
    append_completion_choice(out, choices[i]);
  }
  out += "],\"usage\":";
  append_usage(out, usage);
  out += '}';
  return out;
}

std::string completion_chunk_json(const OpenAiMeta& meta, const CompletionChoice& choice,
                                  const std::optional<OpenAiUsage>& usage) {
  std::string out;
  if (usage) {
    append_meta(out, "text_completion", meta);
    out += ",\"choices\":[";
    append_completion_choice(out, choice);
    out += "],\"usage\":";
    append_usage(out, *usage);
    out += '}';
    return out;
  }
  // TGI's intermediate chunk order: choices before model and system_fingerprint.
  out += "{\"object\":\"text_completion\",\"id\":\"\",\"created\":" + std::to_string(meta.created) +
         ",\"choices\":[";
  append_completion_choice(out, choice);
  out += "],\"model\":";
  append_json_string(out, meta.model);
  out += ",\"system_fingerprint\":";
  append_json_string(out, meta.system_fingerprint);
  out += '}';
  return out;
}

std::string chat_tokenize_json(const std::vector<TokenizeEntry>& tokens,
                               const std::string& templated_text) {
  std::string out = "{\"tokenize_response\":";
  out += tokenize_response_json(tokens);
  out += ",\"templated_text\":";
  append_json_string(out, templated_text);
  out += '}';
  return out;
}

namespace {

std::string error_object_json(std::string_view message, std::string_view type,
                              std::string_view error_type) {
  std::string out = "{\"error\":{\"message\":";
  append_json_string(out, message);
  out += ",\"type\":";
  append_json_string(out, type);
  out += ",\"param\":null,\"code\":null},\"error_type\":";
  append_json_string(out, error_type);
  out += '}';
  return out;
}

}  // namespace

std::string openai_error_json(const ApiError& error) {
  return error_object_json(error.error, error.error_type, error.error_type);
}

std::string openai_rejection_json(const BodyRejection& rejection) {
  return error_object_json(rejection.body, "invalid_request_error", "invalid_request_error");
}

std::string openai_stream_error_sse(std::string_view message) {
  std::string out = "{\"error\":{\"message\":";
  append_json_string(out, message);
  out += ",\"http_status_code\":422}}";
  return sse_data(out);
}

std::string sse_data(std::string_view json) {
  std::string out = "data:";
  out += json;
  out += "\n\n";
  return out;
}

}  // namespace lm
