// The router hands every route that admits requests (tokenization, templates, grammars) to the
// validation workers and answers the cheap ones on the I/O thread that received them.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "../tokenizer/tiny_vocab.h"
#include "base/work_queue.h"
#include "server/router.h"
#include "server/state/server_state.h"

namespace lm {
namespace {

// Records the thread and status of the one answer.
class RecordingResponse : public ResponseStream {
 public:
  void respond(HttpResponse response) override {
    answered_.set_value({std::this_thread::get_id(), response.status});
  }
  void start_stream(int, std::vector<std::pair<std::string, std::string>>) override {}
  void write(std::string) override {}
  void finish() override {}
  bool closed() const override { return client_gone.load(); }
  void on_close(std::function<void()>) override {}

  struct Answer {
    std::thread::id thread;
    int status;
  };
  // The answer, or status -1 when none came within 10 s (a failure, never a hang).
  Answer wait() {
    if (answer_.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return {{}, -1};
    return answer_.get();
  }
  bool answered_within(std::chrono::milliseconds ms) {
    return answer_.wait_for(ms) == std::future_status::ready;
  }
  std::atomic<bool> client_gone{false};

 private:
  std::promise<Answer> answered_;
  std::future<Answer> answer_ = answered_.get_future();
};

// Holds a work queue's only thread until released (also when the test fails early).
class Gate {
 public:
  // Returns once the task holds the thread (so nothing of it is left in the queue).
  explicit Gate(WorkQueue& workers) {
    std::promise<void> holding;
    auto held = holding.get_future();
    workers.post([gate = opened_.get_future().share(), &holding] {
      holding.set_value();
      gate.wait();
    });
    held.wait();
  }
  ~Gate() { open(); }
  void open() {
    if (!open_) opened_.set_value();
    open_ = true;
  }

 private:
  std::promise<void> opened_;
  bool open_ = false;
};

HttpRequest post_json(const std::string& path, const std::string& body) {
  HttpRequest r;
  r.method = "POST";
  r.target = r.path = path;
  r.headers["content-type"] = "application/json";
  r.body = body;
  return r;
}

class RouterDispatch : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing_tok::load(testing_tok::bpe_json({"a", "b"}, {}));
    state_.tokenizer = tokenizer_.get();
  }
  std::unique_ptr<Tokenizer> tokenizer_;
  ServerState state_;
};

TEST_F(RouterDispatch, TokenizeRunsOnAValidationWorker) {
  WorkQueue workers(1);
  state_.validation_workers = &workers;
  HttpHandler router = make_router(state_);
  auto response = std::make_shared<RecordingResponse>();
  router(post_json("/tokenize", R"({"inputs": "ab"})"), response);
  const RecordingResponse::Answer answer = response->wait();
  EXPECT_EQ(answer.status, 200);
  EXPECT_NE(answer.thread, std::this_thread::get_id());
}

TEST_F(RouterDispatch, InfoIsAnsweredOnTheReceivingThread) {
  WorkQueue workers(1);
  state_.validation_workers = &workers;
  HttpHandler router = make_router(state_);
  auto response = std::make_shared<RecordingResponse>();
  HttpRequest info;
  info.method = "GET";
  info.target = info.path = "/info";
  router(info, response);
  const RecordingResponse::Answer answer = response->wait();
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(answer.thread, std::this_thread::get_id());
}

TEST_F(RouterDispatch, WithoutWorkersEverythingRunsInline) {
  HttpHandler router = make_router(state_);
  auto response = std::make_shared<RecordingResponse>();
  router(post_json("/tokenize", R"({"inputs": "ab"})"), response);
  EXPECT_EQ(response->wait().thread, std::this_thread::get_id());
}

TEST_F(RouterDispatch, ABusyWorkerDoesNotDelayCheapRoutes) {
  // The only worker is held by a slow admission; /info is still answered at once.
  WorkQueue workers(1);
  state_.validation_workers = &workers;
  Gate gate(workers);
  HttpHandler router = make_router(state_);
  auto tokenize = std::make_shared<RecordingResponse>();
  router(post_json("/tokenize", R"({"inputs": "ab"})"), tokenize);
  auto info = std::make_shared<RecordingResponse>();
  HttpRequest get_info;
  get_info.method = "GET";
  get_info.target = get_info.path = "/info";
  router(get_info, info);
  EXPECT_EQ(info->wait().status, 200);
  gate.open();
  EXPECT_EQ(tokenize->wait().status, 200);
}

TEST_F(RouterDispatch, MoreQueuedThanPermitsIs429) {
  WorkQueue workers(1);
  state_.validation_workers = &workers;
  state_.settings.max_concurrent_requests = 1;
  Gate gate(workers);
  HttpHandler router = make_router(state_);
  auto queued = std::make_shared<RecordingResponse>();
  router(post_json("/tokenize", R"({"inputs": "ab"})"), queued);
  auto refused = std::make_shared<RecordingResponse>();
  router(post_json("/tokenize", R"({"inputs": "ab"})"), refused);
  EXPECT_EQ(refused->wait().status, 429);
  gate.open();
  EXPECT_EQ(queued->wait().status, 200);
}

TEST_F(RouterDispatch, ARequestWhoseClientLeftWhileQueuedIsSkipped) {
  WorkQueue workers(1);
  state_.validation_workers = &workers;
  Gate gate(workers);
  HttpHandler router = make_router(state_);
  auto gone = std::make_shared<RecordingResponse>();
  router(post_json("/tokenize", R"({"inputs": "ab"})"), gone);
  gone->client_gone = true;
  gate.open();
  workers.stop();  // runs what was queued
  EXPECT_FALSE(gone->answered_within(std::chrono::milliseconds(0)));
}

}  // namespace
}  // namespace lm
