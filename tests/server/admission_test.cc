// The one admission step, reached through every route's own parser and mapping: the same table
// of limit cases gives the same engine requests, or the same error with the same status, whichever
// route a request comes by. A tokenizer with one token per character makes token counts exact.
#include "server/admission/admission.h"

#include <gtest/gtest.h>

#include <functional>
#include <utility>

#include <nlohmann/json.hpp>

#include "../tokenizer/tiny_vocab.h"
#include "server/openai/openai_request.h"
#include "server/state/tgi_metrics.h"
#include "server/tgi/generate_request.h"
#include "template/chat_template.h"

namespace lm {
namespace {

using Json = nlohmann::json;

enum class Route { kGenerate, kGenerateStream, kCompat, kChat, kCompletion };

std::string route_name(Route route) {
  switch (route) {
    case Route::kGenerate:
      return "/generate";
    case Route::kGenerateStream:
      return "/generate_stream";
    case Route::kCompat:
      return "POST /";
    case Route::kChat:
      return "/v1/chat/completions";
    case Route::kCompletion:
      return "/v1/completions";
  }
  return "?";
}

constexpr Route kRoutes[] = {Route::kGenerate, Route::kGenerateStream, Route::kCompat, Route::kChat,
                             Route::kCompletion};

// What a client asks for, in the names of neither API.
struct Ask {
  size_t prompt_tokens = 101;
  std::optional<uint32_t> max_tokens;
  std::optional<float> temperature;
  std::vector<std::string> stop;
};

// The route's body for `ask`, parsed and mapped by the route's own code.
AdmissionRequest route_request(Route route, const Ask& ask) {
  const std::string prompt(ask.prompt_tokens, 'a');
  Json generation = Json::object();  // the fields both OpenAI routes share
  if (ask.max_tokens) generation["max_tokens"] = *ask.max_tokens;
  if (ask.temperature) generation["temperature"] = *ask.temperature;
  if (!ask.stop.empty()) generation["stop"] = ask.stop;
  if (route == Route::kChat) {
    generation["messages"] = Json::array({{{"role", "user"}, {"content", prompt}}});
    auto chat = parse_chat_request(generation.dump());
    EXPECT_TRUE(std::holds_alternative<ChatRequest>(chat));
    return chat_admission_request(std::get<ChatRequest>(std::move(chat)));
  }
  if (route == Route::kCompletion) {
    generation["prompt"] = prompt;
    auto completion = parse_completion_request(generation.dump());
    EXPECT_TRUE(std::holds_alternative<CompletionRequest>(completion));
    return completion_admission_request(std::get<CompletionRequest>(std::move(completion)));
  }
  Json parameters = Json::object();
  if (ask.max_tokens) parameters["max_new_tokens"] = *ask.max_tokens;
  if (ask.temperature) parameters["temperature"] = *ask.temperature;
  if (!ask.stop.empty()) parameters["stop"] = ask.stop;
  Json body = {{"inputs", prompt}, {"parameters", parameters}};
  if (route == Route::kCompat) body["stream"] = false;
  auto parsed = parse_generate_request(
      body.dump(), route == Route::kCompat ? GenerateBody::kCompat : GenerateBody::kGenerate);
  EXPECT_TRUE(std::holds_alternative<ParsedGenerateRequest>(parsed));
  return generate_admission_request(std::get<ParsedGenerateRequest>(std::move(parsed)),
                                    route == Route::kGenerateStream);
}

class AdmissionTable : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = testing_tok::load(testing_tok::bpe_json({"a"}, {}));
    ASSERT_NE(tokenizer_, nullptr);
    state_.tokenizer = tokenizer_.get();
    state_.settings.limits.max_input_tokens = 1000;
    state_.settings.limits.max_total_tokens = 1200;
    register_tgi_metrics(state_.metrics, 1000, 1200);
    // Renders the user's text as it is, so a chat prompt has as many tokens as the others.
    auto compiled = ChatTemplate::compile("{% for m in messages %}{{ m.content }}{% endfor %}");
    ASSERT_TRUE(compiled.ok());
    state_.chat_template = std::make_shared<const ChatTemplate>(std::move(*compiled));
  }

  std::variant<Admission, AdmissionFailure> admit_by(Route route, const Ask& ask) {
    return admit(state_, route_request(route, ask));
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  ServerState state_;
};

// A case that is admitted: the one engine request's prompt length and max_new_tokens.
struct Admitted {
  Ask ask;
  size_t prompt_tokens;
  int64_t max_new_tokens;
};

TEST_F(AdmissionTable, EveryRouteClampsToMaxTotalTokens) {
  const Admitted cases[] = {
      // 101 + 1150 > 1200: the engine stops at 1099 on every route (/v1/completions did not).
      {{101, 1150, {}, {}}, 101, 1099},
      {{101, 1100, {}, {}}, 101, 1099},
      {{101, 50, {}, {}}, 101, 50},
      {{101, {}, {}, {}}, 101, 1099},  // automatic: whatever fits
      {{1000, 200, {}, {}}, 1000, 200},
      {{1000, {}, {}, {}}, 1000, 200},
      // Only the first 1024-token piece is checked against max_total_tokens (TGI #3016), and
      // the rest never runs past it.
      {{170, 1500, {}, {}}, 170, 1030},
  };
  for (const Admitted& c : cases) {
    for (Route route : kRoutes) {
      SCOPED_TRACE(route_name(route) + " prompt " + std::to_string(c.ask.prompt_tokens) + " max " +
                   std::to_string(c.ask.max_tokens.value_or(0)));
      auto result = admit_by(route, c.ask);
      ASSERT_TRUE(std::holds_alternative<Admission>(result))
          << std::get<AdmissionFailure>(result).error.error;
      const Admission& admission = std::get<Admission>(result);
      ASSERT_EQ(admission.generations.size(), 1u);
      const EngineRequest& engine_request = admission.generations[0].engine_request;
      EXPECT_EQ(engine_request.prompt_ids.size(), c.prompt_tokens);
      EXPECT_EQ(engine_request.max_new_tokens, c.max_new_tokens);
      EXPECT_LE(engine_request.prompt_ids.size() + engine_request.max_new_tokens,
                state_.settings.limits.max_total_tokens);
    }
  }
}

// A case that is refused: the same status, type and message on every route.
struct Refused {
  Ask ask;
  int status;
  std::string error;
};

TEST_F(AdmissionTable, EveryRouteRefusesTheSameInputsAlike) {
  const Refused cases[] = {
      {{200, 1100, {}, {}},
       422,
       "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 1200. Given: 200 "
       "`inputs` tokens and 1024 `max_new_tokens`"},
      {{1001, 1, {}, {}},
       422,
       "Input validation error: `inputs` must have less than 1000 tokens. Given: 1001"},
      {{101, 0, {}, {}}, 422, "Input validation error: `max_new_tokens` must be strictly positive"},
      {{101, 10, -1.0f, {}},
       422,
       "Input validation error: `temperature` must be strictly positive"},
      {{101, 10, {}, {"1", "2", "3", "4", "5"}},
       422,
       "Input validation error: `stop` supports up to 4 stop sequences. Given: 5"},
  };
  for (const Refused& c : cases) {
    for (Route route : kRoutes) {
      SCOPED_TRACE(route_name(route) + ": " + c.error);
      auto result = admit_by(route, c.ask);
      ASSERT_TRUE(std::holds_alternative<AdmissionFailure>(result));
      const AdmissionFailure& failure = std::get<AdmissionFailure>(result);
      EXPECT_EQ(failure.error.status, c.status);
      EXPECT_EQ(failure.error.error_type, "validation");
      EXPECT_EQ(failure.error.error, c.error);
      EXPECT_STREQ(failure.metric_label, "err=\"validation\"");
    }
  }
  EXPECT_EQ(state_.requests_in_flight.load(), 0);  // refused requests hold no permit
}

TEST_F(AdmissionTable, EveryRouteIsRefusedWhenOverloaded) {
  state_.settings.max_concurrent_requests = 0;
  for (Route route : kRoutes) {
    SCOPED_TRACE(route_name(route));
    auto result = admit_by(route, Ask{101, 10, {}, {}});
    ASSERT_TRUE(std::holds_alternative<AdmissionFailure>(result));
    const AdmissionFailure& failure = std::get<AdmissionFailure>(result);
    EXPECT_EQ(failure.error.status, 429);
    EXPECT_EQ(failure.error.error_type, "overloaded");
    EXPECT_STREQ(failure.metric_label, "err=\"overloaded\"");
  }
}

// What wins when an overloaded server gets a bad request: TGI's order puts the checks before the
// permit (best_of, streams, the chat template) ahead of 429, and 429 ahead of the others.
TEST_F(AdmissionTable, OverloadIsCheckedBetweenThePrePermitRulesAndTheRest) {
  state_.settings.max_concurrent_requests = 0;
  auto code_of = [&](AdmissionRequest request) {
    auto result = admit(state_, std::move(request));
    EXPECT_TRUE(std::holds_alternative<AdmissionFailure>(result));
    return std::get<AdmissionFailure>(result).error.status;
  };
  AdmissionRequest best_of = route_request(Route::kGenerate, Ask{10, 5, 0.5f, {}});
  best_of.parameters.best_of = 3;  // above --max-best-of 2
  EXPECT_EQ(code_of(best_of), 422);
  EXPECT_EQ(code_of(route_request(Route::kGenerate, Ask{10, 5, -1.0f, {}})), 429);
  EXPECT_EQ(code_of(route_request(Route::kChat, Ask{10, 5, -1.0f, {}})), 429);
  state_.chat_template.reset();
  EXPECT_EQ(code_of(route_request(Route::kChat, Ask{10, 5, {}, {}})), 422);
}

TEST_F(AdmissionTable, PermitHoldsOneUnitPerGenerationUntilTheAdmissionIsReleased) {
  {
    auto result = admit(
        state_, completion_admission_request(std::get<CompletionRequest>(parse_completion_request(
                    R"({"prompt":["aaa","aaaa"],"n":2,"max_tokens":3})"))));
    ASSERT_TRUE(std::holds_alternative<Admission>(result));
    const Admission& admission = std::get<Admission>(result);
    EXPECT_EQ(state_.requests_in_flight.load(), 4);
    ASSERT_EQ(admission.generations.size(), 4u);
    // Prompt-major; each prompt's first choice keeps the request's seed, the others differ.
    EXPECT_EQ(admission.generations[0].prompt_idx, 0u);
    EXPECT_EQ(admission.generations[1].choice_idx, 1u);
    EXPECT_EQ(admission.generations[2].prompt_idx, 1u);
    EXPECT_EQ(admission.generations[2].engine_request.prompt_ids.size(), 4u);
    EXPECT_EQ(admission.generations[0].engine_request.sampling.seed,
              admission.prompts[0].valid.seed);
    EXPECT_NE(admission.generations[1].engine_request.sampling.seed,
              admission.generations[0].engine_request.sampling.seed);
  }
  EXPECT_EQ(state_.requests_in_flight.load(), 0);
}

// A response whose client hang-up the test triggers.
class HangUpResponse : public ResponseStream {
 public:
  void respond(HttpResponse) override {}
  void start_stream(int, std::vector<std::pair<std::string, std::string>>) override {}
  void write(std::string) override {}
  void finish() override {}
  bool closed() const override { return hung_up; }
  void on_close(std::function<void()> callback) override { on_close_ = std::move(callback); }
  void hang_up() {
    hung_up = true;
    if (on_close_) std::exchange(on_close_, nullptr)();
  }
  bool hung_up = false;

 private:
  std::function<void()> on_close_;
};

TEST_F(AdmissionTable, HangUpGivesThePermitBackAtOnceAndOnlyOnce) {
  const auto admit_two = [&] {
    auto result =
        admit(state_, completion_admission_request(std::get<CompletionRequest>(
                          parse_completion_request(R"({"prompt":"aaa","n":2,"max_tokens":3})"))));
    EXPECT_TRUE(std::holds_alternative<Admission>(result));
    return std::get<Admission>(std::move(result));
  };
  {
    Admission admission = admit_two();
    HangUpResponse response;
    release_permit_on_hang_up(admission, response);
    EXPECT_EQ(state_.requests_in_flight.load(), 2);
    response.hang_up();  // the sinks still hold the permit: the engine has not dropped them yet
    EXPECT_EQ(state_.requests_in_flight.load(), 0);
  }
  EXPECT_EQ(state_.requests_in_flight.load(), 0);  // dropping it later gives nothing back twice
  // A hang-up after the permit went (the answer was complete) is a no-op.
  HangUpResponse response;
  {
    Admission admission = admit_two();
    release_permit_on_hang_up(admission, response);
    Admission other = admit_two();
    EXPECT_EQ(state_.requests_in_flight.load(), 4);
  }
  EXPECT_EQ(state_.requests_in_flight.load(), 0);
  response.hang_up();
  EXPECT_EQ(state_.requests_in_flight.load(), 0);
}

TEST_F(AdmissionTable, SeedIsReportedOnlyForRandomChoices) {
  auto greedy = admit_by(Route::kGenerate, Ask{10, 5, {}, {}});  // parameters given: greedy
  auto sampled = admit_by(Route::kGenerate, Ask{10, 5, 0.5f, {}});
  ASSERT_TRUE(std::holds_alternative<Admission>(greedy));
  ASSERT_TRUE(std::holds_alternative<Admission>(sampled));
  EXPECT_FALSE(std::get<Admission>(greedy).generations[0].reported_seed.has_value());
  const AdmittedGeneration& g = std::get<Admission>(sampled).generations[0];
  ASSERT_TRUE(g.reported_seed.has_value());
  EXPECT_EQ(*g.reported_seed, g.engine_request.sampling.seed);
  // best_of with `temperature: 1.0` passes TGI's best_of rule (a warper is named) but samples
  // nothing: no candidate reports a seed, as TGI's shards report none for greedy requests.
  AdmissionRequest best_of = route_request(Route::kGenerate, Ask{10, 5, 1.0f, {}});
  best_of.parameters.best_of = 2;
  auto candidates = admit(state_, std::move(best_of));
  ASSERT_TRUE(std::holds_alternative<Admission>(candidates));
  ASSERT_EQ(std::get<Admission>(candidates).generations.size(), 2u);
  for (const AdmittedGeneration& c : std::get<Admission>(candidates).generations)
    EXPECT_FALSE(c.reported_seed.has_value());
}

TEST_F(AdmissionTable, PromptLogprobsBypassThePrefixCacheAndRankAlternatives) {
  // Completions' echo with logprobs: every choice, streamed or not, scores its prompt.
  for (bool stream : {false, true}) {
    AdmissionRequest request = route_request(Route::kCompletion, Ask{10, 5, 0.0f, {}});
    request.prompt_logprobs = true;
    request.parameters.top_n_tokens = 2;
    request.streaming = stream;
    request.n = 2;
    auto admitted = admit(state_, std::move(request));
    ASSERT_TRUE(std::holds_alternative<Admission>(admitted));
    ASSERT_EQ(std::get<Admission>(admitted).generations.size(), 2u);
    for (const AdmittedGeneration& g : std::get<Admission>(admitted).generations) {
      EXPECT_TRUE(g.engine_request.prompt_logprobs);
      EXPECT_FALSE(g.engine_request.use_prefix_cache);
      EXPECT_EQ(g.engine_request.prompt_top_n_tokens, 2);
    }
  }
  // TGI's decoder_input_details: the prompt's logprobs only with the flag, no alternatives.
  AdmissionRequest details = route_request(Route::kGenerate, Ask{10, 5, {}, {}});
  details.parameters.decoder_input_details = true;
  details.parameters.top_n_tokens = 2;
  for (bool enabled : {false, true}) {
    state_.settings.enable_prefill_logprobs = enabled;
    auto admitted = admit(state_, details);
    ASSERT_TRUE(std::holds_alternative<Admission>(admitted));
    const EngineRequest& r = std::get<Admission>(admitted).generations[0].engine_request;
    EXPECT_EQ(r.prompt_logprobs, enabled);
    EXPECT_FALSE(r.use_prefix_cache);
    EXPECT_EQ(r.prompt_top_n_tokens, 0);
  }
}

TEST_F(AdmissionTable, TokenIdPromptsRunAsGiven) {
  // The tokenizer has one token, "a" (id 0); the ids are not re-tokenized.
  auto parsed = parse_completion_request(R"({"prompt":[[0,0,0],[0]],"max_tokens":2})");
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(parsed));
  auto admitted =
      admit(state_, completion_admission_request(std::get<CompletionRequest>(std::move(parsed))));
  ASSERT_TRUE(std::holds_alternative<Admission>(admitted));
  const Admission& admission = std::get<Admission>(admitted);
  ASSERT_EQ(admission.prompts.size(), 2u);
  EXPECT_EQ(admission.prompts[0].valid.inputs, "a a a");  // decoded (no decoder: space-joined)
  EXPECT_EQ(admission.prompts[0].ids, (std::vector<int32_t>{0, 0, 0}));
  EXPECT_EQ(admission.prompts[1].ids, (std::vector<int32_t>{0}));
  EXPECT_EQ(admission.generations[1].engine_request.prompt_ids, (std::vector<int32_t>{0}));
  // An id outside the vocabulary, and an empty prompt, are 422s.
  for (const char* body : {R"({"prompt":[0,1]})", R"({"prompt":[[0],[]]})"}) {
    auto bad = admit(state_, completion_admission_request(
                                 std::get<CompletionRequest>(parse_completion_request(body))));
    ASSERT_TRUE(std::holds_alternative<AdmissionFailure>(bad)) << body;
    EXPECT_EQ(std::get<AdmissionFailure>(bad).error.status, 422);
  }
}

TEST_F(AdmissionTable, ChatTemplateFailureIsATemplateError) {
  state_.chat_template.reset();
  auto result = admit_by(Route::kChat, Ask{10, 5, {}, {}});
  ASSERT_TRUE(std::holds_alternative<AdmissionFailure>(result));
  EXPECT_EQ(std::get<AdmissionFailure>(result).error.status, 422);
  EXPECT_EQ(std::get<AdmissionFailure>(result).error.error_type, "template_error");
  EXPECT_STREQ(std::get<AdmissionFailure>(result).metric_label, "err=\"template\"");  // TGI's
}

}  // namespace
}  // namespace lm
