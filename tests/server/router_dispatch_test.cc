// The router hands every route that admits requests (tokenization, templates, grammars) to the
// validation workers and answers the cheap ones on the I/O thread that received them.
#include <gtest/gtest.h>

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
  bool closed() const override { return false; }
  void on_close(std::function<void()>) override {}

  struct Answer {
    std::thread::id thread;
    int status;
  };
  Answer wait() {
    auto future = answered_.get_future();
    EXPECT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    return future.get();
  }

 private:
  std::promise<Answer> answered_;
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
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  workers.post([gate] { gate.wait(); });
  HttpHandler router = make_router(state_);
  auto tokenize = std::make_shared<RecordingResponse>();
  router(post_json("/tokenize", R"({"inputs": "ab"})"), tokenize);
  auto info = std::make_shared<RecordingResponse>();
  HttpRequest get_info;
  get_info.method = "GET";
  get_info.target = get_info.path = "/info";
  router(get_info, info);
  EXPECT_EQ(info->wait().status, 200);
  release.set_value();
  EXPECT_EQ(tokenize->wait().status, 200);
}

}  // namespace
}  // namespace lm
