// What every route handler shares: the tokenizer, the engine, metrics, the settings of the HTTP
// surface and the concurrency permits. Built once at start by the launcher; handlers only read it
// (counters are atomic).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/grammar_compiler.h"
#include "server/metrics/metrics.h"
#include "server/state/server_settings.h"
#include "server/transport/sse_keepalive.h"
#include "tokenizer/tokenizer.h"

namespace lm {

class ChatTemplate;
class SpanExporter;
class WorkQueue;

struct ServerState {
  const Tokenizer* tokenizer = nullptr;
  Engine* engine = nullptr;
  Metrics metrics;
  ServerSettings settings;
  std::string compute_type = "cpu";
  std::atomic<int64_t> requests_in_flight{0};  // concurrency permits taken
  std::optional<std::string> api_key;
  std::vector<std::string> cors_allow_origin;  // empty: any origin
  std::atomic<bool> healthy{true};
  SseKeepAlive keepalive;  // ":\n\n" on streams idle for 15 s
  // The chat template (null: chat requests fail with template_error) and its bos/eos strings.
  std::shared_ptr<const ChatTemplate> chat_template;
  // The named "tool_use" template for requests with tools (null: chat_template serves them).
  std::shared_ptr<const ChatTemplate> tool_use_template;
  std::string bos_token;
  std::string eos_token;
  // Where request spans go (server/tracing); null without --otlp-endpoint: nothing is traced.
  SpanExporter* span_exporter = nullptr;
  // Compiles request grammars (null: grammars are refused, as with --disable-grammar-support).
  GrammarCompiler* grammar_compiler = nullptr;
  // Where generation requests are admitted (`--validation-workers` threads); null: on the I/O
  // thread that received them (tests).
  WorkQueue* validation_workers = nullptr;
};

// TGI's concurrency permit: taken before a generation starts (else 429), released just before
// its response's last bytes are queued, when its client hangs up, or when it is dropped, so a
// client that waits for one answer before it sends the next never meets its own permit, and one
// that gives up frees its place at once (as TGI's does when the hung-up handler is dropped).
// Move-only; release() may race the destructor and itself on other threads: the units go back
// once.
class ConcurrencyPermit {
 public:
  static std::optional<ConcurrencyPermit> try_acquire(ServerState& state, int64_t count = 1);
  ConcurrencyPermit(ConcurrencyPermit&& other) noexcept
      : state_(other.state_.exchange(nullptr)), count_(other.count_) {}
  ConcurrencyPermit& operator=(ConcurrencyPermit&&) = delete;
  ConcurrencyPermit(const ConcurrencyPermit&) = delete;
  ~ConcurrencyPermit() { release(); }

  void release() {
    if (ServerState* state = state_.exchange(nullptr)) state->requests_in_flight -= count_;
  }

 private:
  ConcurrencyPermit(ServerState* state, int64_t count) : state_(state), count_(count) {}
  std::atomic<ServerState*> state_;
  int64_t count_;
};

inline std::optional<ConcurrencyPermit> ConcurrencyPermit::try_acquire(ServerState& state,
                                                                       int64_t count) {
  int64_t current = state.requests_in_flight.load();
  do {
    if (current + count > state.settings.max_concurrent_requests) return std::nullopt;
  } while (!state.requests_in_flight.compare_exchange_weak(current, current + count));
  return ConcurrencyPermit(&state, count);
}

}  // namespace lm
