// One HTTP request per input through the real route table and handlers (make_router), as the
// transport hands them over, without a socket: every route, admission (validation, the default
// model's chat template, its tokenizer), the engine (its scheduler and thread) with a fake
// executor standing in for the model, and the TGI/OpenAI response and SSE writers. The input is
//   METHOD SP PATH LF (NAME ":" VALUE LF)* LF BODY
// parsed here leniently (the transport's own parsing is Beast's, behind the socket). Oracles: every
// request gets exactly one complete answer (a response, or a stream that finishes) within 10 s,
// with a status in 100..599; nothing is written outside a stream.
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "loader/gguf_file.h"
#include "server/router.h"
#include "server/state/server_state.h"
#include "server/state/tgi_metrics.h"
#include "template/chat_template.h"
#include "tokenizer/gguf_vocab_reader.h"
#include "tokenizer/tokenizer.h"

namespace {

// Stands in for the model: deterministic tokens inside the vocabulary (the EOS now and then), the
// top_n alternatives and prompt logprobs a request asks for. Only the engine thread calls it.
class FakeExecutor : public lm::Executor {
 public:
  FakeExecutor(int32_t vocab_size, int32_t eos_id) : vocab_size_(vocab_size), eos_id_(eos_id) {}

  lm::Status check_request(const lm::EngineRequest& request) const override {
    for (int32_t id : request.prompt_ids) {
      if (id < 0 || id >= vocab_size_) return lm::Error{"token id outside the vocabulary"};
    }
    return {};
  }

  lm::Result<std::vector<lm::SampleResult>> execute(const lm::ScheduledBatch& batch) override {
    std::vector<lm::SampleResult> out;
    for (const lm::ScheduledSequence& entry : batch.sequences) {
      if (!entry.samples) continue;
      const lm::EngineRequest& request = entry.sequence->request;
      const int64_t position = entry.first_position + entry.num_tokens;
      lm::SampleResult token;
      token.id = position % 11 == 10
                     ? eos_id_
                     : static_cast<int32_t>((position * 7919 + entry.seq_id * 31) % vocab_size_);
      token.logprob = -0.25f;
      for (int32_t k = 0; k < request.sampling.top_n_tokens; ++k) {
        token.top_tokens.push_back({(token.id + k) % vocab_size_, -0.25f - static_cast<float>(k)});
      }
      if (request.prompt_logprobs && first_samples_.insert(entry.seq_id).second) {
        const size_t n = request.prompt_ids.size();
        for (size_t i = 1; i < n; ++i) {
          token.prompt_logprobs.push_back(-1.0f);
          if (request.prompt_top_n_tokens > 0) {
            std::vector<lm::TokenLogprob> alternatives;
            for (int32_t k = 0; k < request.prompt_top_n_tokens; ++k)
              alternatives.push_back({(request.prompt_ids[i] + k) % vocab_size_, -1.0f - k});
            token.prompt_top_tokens.push_back(std::move(alternatives));
          }
        }
      }
      out.push_back(std::move(token));
    }
    return out;
  }

  void release(int64_t seq_id) override { first_samples_.erase(seq_id); }

 private:
  const int32_t vocab_size_;
  const int32_t eos_id_;
  std::set<int64_t> first_samples_;
};

// Records one request's answer and checks the calls form one complete answer.
class RecordingResponse : public lm::ResponseStream {
 public:
  void respond(lm::HttpResponse response) override {
    std::lock_guard lock(mutex_);
    if (phase_ != Phase::kIdle || response.status < 100 || response.status > 599) bad("respond");
    phase_ = Phase::kDone;
    done_.notify_all();
  }
  void start_stream(int status, std::vector<std::pair<std::string, std::string>>) override {
    std::lock_guard lock(mutex_);
    if (phase_ != Phase::kIdle || status < 100 || status > 599) bad("start_stream");
    phase_ = Phase::kStreaming;
  }
  void write(std::string) override {
    std::lock_guard lock(mutex_);
    if (phase_ != Phase::kStreaming) bad("write");
  }
  void finish() override {
    std::lock_guard lock(mutex_);
    if (phase_ != Phase::kStreaming) bad("finish");
    phase_ = Phase::kDone;
    done_.notify_all();
  }
  bool closed() const override { return false; }
  void on_close(std::function<void()>) override {}

  bool wait_done(std::chrono::seconds timeout) {
    std::unique_lock lock(mutex_);
    return done_.wait_for(lock, timeout, [&] { return phase_ == Phase::kDone; });
  }

 private:
  enum class Phase { kIdle, kStreaming, kDone };
  [[noreturn]] static void bad(const char* call) {
    std::fprintf(stderr, "http_router_fuzz: %s out of order\n", call);
    std::abort();
  }
  std::mutex mutex_;
  std::condition_variable done_;
  Phase phase_ = Phase::kIdle;
};

// The default model's tokenizer and chat template, an engine over the fake executor, and the
// state the router serves, built once.
struct Server {
  Server() {
    const std::string path = std::string(LM_REPO_ROOT) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    auto gguf = lm::GgufFile::open(path);
    if (!gguf.ok()) die(gguf.error().message);
    auto vocab = lm::read_gguf_vocab(*gguf);
    if (!vocab.ok()) die(vocab.error().message);
    auto tok = lm::Tokenizer::from_gguf_vocab(*vocab);
    if (!tok.ok()) die(tok.error().message);
    tokenizer = std::move(tok).value();
    auto tmpl = lm::ChatTemplate::compile(vocab->chat_template);
    if (!tmpl.ok()) die(tmpl.error().message);
    lm::EngineConfig config;
    config.max_batch_total_tokens = 512;
    config.max_batch_prefill_tokens = 256;
    const int32_t eos = tokenizer->eos_id().value_or(0);
    config.eos_token_ids = {eos};
    engine = std::make_unique<lm::Engine>(
        config, std::make_unique<FakeExecutor>(tokenizer->vocab_size(), eos));
    state.tokenizer = tokenizer.get();
    state.engine = engine.get();
    state.settings.limits.max_input_tokens = 48;
    state.settings.limits.max_total_tokens = 64;
    lm::register_tgi_metrics(state.metrics, 48, 64);  // as the launcher does
    state.settings.model_id = "HuggingFaceTB/SmolLM2-135M-Instruct";
    state.chat_template = std::make_shared<lm::ChatTemplate>(std::move(tmpl).value());
    state.bos_token = std::string(tokenizer->token_text(tokenizer->bos_id().value_or(0)));
    state.eos_token = std::string(tokenizer->token_text(eos));
    router = lm::make_router(state);
  }
  [[noreturn]] static void die(const std::string& message) {
    std::fprintf(stderr, "http_router_fuzz: %s (run scripts/fetch_models.sh)\n", message.c_str());
    std::abort();
  }

  std::unique_ptr<lm::Tokenizer> tokenizer;
  std::unique_ptr<lm::Engine> engine;
  lm::ServerState state;
  lm::HttpHandler router;
};

Server& server() {
  static Server* s = new Server();  // never destroyed: the engine thread outlives every input
  return *s;
}

lm::HttpRequest parse_request(std::string_view text) {
  lm::HttpRequest request;
  auto next_line = [&]() {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };
  const std::string_view first = next_line();
  const size_t space = first.find(' ');
  request.method = std::string(first.substr(0, space));
  request.target = space == std::string_view::npos ? "/" : std::string(first.substr(space + 1));
  request.path = request.target.substr(0, request.target.find('?'));
  while (!text.empty()) {
    const std::string_view line = next_line();
    if (line.empty()) break;
    const size_t colon = line.find(':');
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string_view value =
        colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    auto [it, fresh] = request.headers.emplace(name, std::string(value));
    if (!fresh) it->second += ", " + std::string(value);
  }
  request.body = std::string(text);
  request.received = std::chrono::steady_clock::now();
  return request;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lm::HttpRequest request =
      parse_request(std::string_view(reinterpret_cast<const char*>(data), size));
  auto response = std::make_shared<RecordingResponse>();
  server().router(std::move(request), response);
  if (!response->wait_done(std::chrono::seconds(10))) {
    std::fprintf(stderr, "http_router_fuzz: no complete answer within 10 s\n");
    std::abort();
  }
  return 0;
}
