#include "server/router.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>

#include "base/log.h"
#include "base/work_queue.h"
#include "server/openai/openai_handler.h"
#include "server/openapi.h"
#include "server/routed_response.h"
#include "server/state/tgi_metrics.h"
#include "server/text/token_offsets.h"
#include "server/tgi/generate_handler.h"
#include "server/tgi/generate_request.h"
#include "server/tgi/info_response.h"
#include "server/wire/api_error.h"

namespace lm {
namespace {

using Handler = std::function<void(ServerState&, HttpRequest, std::shared_ptr<ResponseStream>)>;

struct Route {
  bool needs_api_key;
  bool needs_json_body;
  Handler handler;
  // Tokenizes, renders templates or compiles grammars: runs on a validation worker, never on
  // the I/O thread that received it (which serves many other connections).
  bool validates = false;
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// TGI compares the whole header to "Bearer KEY" case-insensitively; compare in constant time so
// response timing does not reveal how much of a guess matched.
bool authorized(const ServerState& state, const HttpRequest& request) {
  if (!state.api_key) return true;
  const std::string expected = lower("Bearer " + *state.api_key);
  const std::string got = lower(request.header("authorization"));
  unsigned diff = got.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= static_cast<unsigned>(expected[i] ^ (i < got.size() ? got[i] : 0));
  return diff == 0;
}

bool is_json_content_type(const std::string& value) {
  const std::string v = lower(value);
  const std::string mime = v.substr(0, v.find(';'));
  return mime == "application/json" || (mime.rfind("application/", 0) == 0 && mime.size() > 5 &&
                                        mime.compare(mime.size() - 5, 5, "+json") == 0);
}

// CORS as tower-http with TGI's settings: any origin (or the listed ones), GET/POST, content-type.
Headers cors_headers(const ServerState& state, const HttpRequest& request) {
  Headers headers;
  const std::string origin = request.header("origin");
  if (state.cors_allow_origin.empty()) {
    headers.emplace_back("access-control-allow-origin", "*");
  } else if (std::find(state.cors_allow_origin.begin(), state.cors_allow_origin.end(), origin) !=
             state.cors_allow_origin.end()) {
    headers.emplace_back("access-control-allow-origin", origin);
  }
  headers.emplace_back("vary",
                       "origin, access-control-request-method, access-control-request-headers");
  return headers;
}

void respond_unhealthy(ResponseStream& response) {
  const ApiError e = unhealthy_error();
  response.respond({e.status, {{"Content-Type", "application/json"}}, api_error_json(e)});
}

// After a generation failed, /health proves the model works again with a real one-token
// generation (TGI's liveness prefill) before it reports healthy.
class LivenessSink : public TokenSink {
 public:
  LivenessSink(ServerState& state, std::shared_ptr<ResponseStream> response)
      : state_(state), response_(std::move(response)) {}
  bool on_token(const TokenEvent&) override {
    state_.healthy = true;
    response_->respond({200, {}, ""});
    return false;
  }
  void on_error(const std::string&) override { respond_unhealthy(*response_); }
  bool cancelled() const override { return response_->closed(); }

 private:
  ServerState& state_;
  std::shared_ptr<ResponseStream> response_;
};

void respond_health(ServerState& state, HttpRequest, std::shared_ptr<ResponseStream> response) {
  if (state.healthy) {
    response->respond({200, {}, ""});
    return;
  }
  EngineRequest liveness;
  liveness.prompt_ids = state.tokenizer->encode("liveness", /*add_special_tokens=*/true);
  liveness.max_new_tokens = 1;
  liveness.ignore_eos = true;
  auto sink = std::make_shared<LivenessSink>(state, response);
  if (Status s = state.engine->submit(std::move(liveness), sink); !s.ok())
    respond_unhealthy(*response);
}

void respond_metrics(ServerState& state, HttpRequest, std::shared_ptr<ResponseStream> response) {
  publish_engine_stats(state.metrics, state.engine->stats(), state.settings.kv_bytes_per_block);
  response->respond({200, {{"Content-Type", "text/plain; version=0.0.4"}}, state.metrics.render()});
}

void respond_tokenize(ServerState& state, HttpRequest request,
                      std::shared_ptr<ResponseStream> response) {
  auto parsed = parse_generate_request(request.body, GenerateBody::kGenerate);
  if (auto* rejection = std::get_if<BodyRejection>(&parsed)) {
    response->respond(
        {rejection->status, {{"Content-Type", std::string(kTextPlain)}}, rejection->body});
    return;
  }
  const std::string& inputs = std::get<ParsedGenerateRequest>(parsed).inputs;
  const std::vector<int32_t> ids = state.tokenizer->encode(inputs, /*add_special_tokens=*/true);
  const std::vector<TokenizeEntry> entries =
      token_offsets(*state.tokenizer, inputs, ids, /*add_special_tokens=*/true);
  response->respond({200, {{"Content-Type", "application/json"}}, tokenize_response_json(entries)});
}

std::map<std::pair<std::string, std::string>, Route> route_table() {
  auto generate = [](GenerateRoute r) {
    return [r](ServerState& s, HttpRequest q, std::shared_ptr<ResponseStream> p) {
      handle_generate(s, std::move(q), std::move(p), r);
    };
  };
  auto json = [](std::function<std::string(ServerState&)> body) {
    return [body](ServerState& s, HttpRequest, std::shared_ptr<ResponseStream> p) {
      p->respond({200, {{"Content-Type", "application/json"}}, body(s)});
    };
  };
  std::map<std::pair<std::string, std::string>, Route> t;
  t[{"POST", "/generate"}] = {true, true, generate(GenerateRoute::kGenerate), true};
  t[{"POST", "/generate_stream"}] = {true, true, generate(GenerateRoute::kGenerateStream), true};
  t[{"POST", "/"}] = {true, true, generate(GenerateRoute::kCompat), true};
  t[{"POST", "/invocations"}] = {true, true, handle_invocations, true};
  t[{"POST", "/v1/chat/completions"}] = {true, true, handle_chat_completions, true};
  t[{"POST", "/v1/completions"}] = {true, true, handle_completions, true};
  t[{"POST", "/chat_tokenize"}] = {false, true, handle_chat_tokenize, true};
  t[{"POST", "/tokenize"}] = {true, true, respond_tokenize, true};
  t[{"GET", "/"}] = {false, false, respond_health};
  t[{"GET", "/health"}] = {false, false, respond_health};
  t[{"GET", "/ping"}] = {false, false, respond_health};
  t[{"GET", "/metrics"}] = {false, false, respond_metrics};
  t[{"GET", "/info"}] = {false, false,
                         json([](ServerState& s) { return info_json(info_body_of(s.settings)); })};
  t[{"GET", "/v1/models"}] = {
      false, false, json([](ServerState& s) { return models_response_json(s.settings.model_id); })};
  t[{"GET", "/api-doc/openapi.json"}] = {
      false, false, json([](ServerState& s) {
        return openapi_json({s.settings.limits, std::string(kRouterVersion)});
      })};
  t[{"GET", "/docs"}] = {
      false, false, [](ServerState&, HttpRequest, std::shared_ptr<ResponseStream> p) {
        p->respond({200, {{"Content-Type", "text/html; charset=utf-8"}}, docs_html()});
      }};
  return t;
}

}  // namespace

HttpHandler make_router(ServerState& state) {
  auto table =
      std::make_shared<const std::map<std::pair<std::string, std::string>, Route>>(route_table());
  return [&state, table](HttpRequest request, std::shared_ptr<ResponseStream> raw) {
    auto response = std::make_shared<RoutedResponse>(cors_headers(state, request),
                                                     state.keepalive.wrap(std::move(raw)));
    std::string path = request.path;
    if (path.size() > 1 && path.rfind("/docs/", 0) == 0) path = "/docs";  // Swagger UI's sub-paths
    if (request.method == "OPTIONS") {                                    // CORS preflight
      response->respond({200,
                         {{"access-control-allow-methods", "GET,POST"},
                          {"access-control-allow-headers", "content-type"}},
                         ""});
      return;
    }
    const std::string method = request.method == "HEAD" ? "GET" : request.method;
    auto it = table->find({method, path});
    if (it == table->end()) {
      const bool known_path = std::any_of(table->begin(), table->end(),
                                          [&](const auto& e) { return e.first.second == path; });
      response->respond({known_path ? 405 : 404, {}, ""});
      return;
    }
    const Route& route = it->second;
    if (route.needs_api_key && !authorized(state, request)) {
      response->respond({401, {}, ""});
      return;
    }
    if (route.needs_json_body && !is_json_content_type(request.header("content-type"))) {
      response->respond(
          {415, {{"Content-Type", std::string(kTextPlain)}}, std::string(kMissingJsonContentType)});
      return;
    }
    if (route.validates && state.validation_workers != nullptr) {
      // More requests waiting for admission than permits exist: most would get a 429 there
      // anyway, after holding their bodies in the queue; answer it now (TGI takes its permit
      // before validating).
      if (state.validation_workers->queued() >=
          static_cast<size_t>(std::max<int64_t>(state.settings.max_concurrent_requests, 1))) {
        const ApiError e = overloaded_error();
        response->respond({e.status, {{"Content-Type", "application/json"}}, api_error_json(e)});
        return;
      }
      state.validation_workers->post(
          [&state, handler = route.handler, request = std::move(request), response]() mutable {
            if (response->closed()) return;  // the client left while the request was queued
            try {
              handler(state, std::move(request), response);
            } catch (const std::exception& e) {
              log_error(std::string("HTTP handler threw: ") + e.what());
              response->fail();
            }
          });
      return;
    }
    route.handler(state, std::move(request), std::move(response));
  };
}

}  // namespace lm
