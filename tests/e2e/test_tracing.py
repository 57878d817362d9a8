"""OpenTelemetry traces (--otlp-endpoint): a small OTLP/HTTP receiver on 127.0.0.1 takes the
server's JSON exports, and the tests check TGI's span tree (the handler span under the caller's
traceparent, validate/queued/infer with prefill and decode under it), the resource's service.name,
the error status of a refused request, and that SIGTERM's drain flushes the spans still queued."""

import json
import secrets
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import gen_body, launch_server

SERVICE_NAME = "lm-infer-e2e"
CHILDREN = {"validate", "queued", "infer", "prefill", "decode"}


class OtlpReceiver:
    """An OTLP/HTTP trace receiver: records every POST to /v1/traces (JSON bodies only)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.posts = []  # (path, content type, decoded body)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # the exporter keeps its connection between batches

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.posts.append(
                        (self.path, self.headers.get("Content-Type"), json.loads(body)))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def spans(self):
        """Every span received, each with its resource's attributes under "_resource"."""
        out = []
        with self.lock:
            posts = list(self.posts)
        for path, content_type, body in posts:
            assert path == "/v1/traces", path
            assert content_type == "application/json", content_type
            for resource_spans in body["resourceSpans"]:
                resource = attributes(resource_spans["resource"])
                for scope_spans in resource_spans["scopeSpans"]:
                    for span in scope_spans["spans"]:
                        out.append({**span, "_resource": resource})
        return out

    def trace(self, trace_id, expected_names, timeout=10.0):
        """The spans of one trace once all `expected_names` arrived (polls up to `timeout` s)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = {s["name"]: s for s in self.spans() if s["traceId"] == trace_id}
            if expected_names <= spans.keys() or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)


def attributes(obj) -> dict:
    """OTLP attributes as {key: python value} (intValue strings become ints)."""
    out = {}
    for a in obj.get("attributes", []):
        (kind, value), = a["value"].items()
        out[a["key"]] = int(value) if kind == "intValue" else value
    return out


def new_traceparent():
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, parent_id, f"00-{trace_id}-{parent_id}-01"


def assert_span_tree(spans, root_name, trace_id, parent_id):
    """TGI's shape: the handler span under the caller's, its phases under it, all one trace."""
    assert {root_name} | CHILDREN <= spans.keys(), sorted(spans)
    root = spans[root_name]
    assert root["traceId"] == trace_id
    assert root["parentSpanId"] == parent_id
    assert root["kind"] == 2  # server
    assert "status" not in root or root["status"].get("code", 0) != 2, root["status"]
    assert root["_resource"]["service.name"] == SERVICE_NAME
    for name in ("validate", "queued", "infer"):
        assert spans[name]["parentSpanId"] == root["spanId"], name
    for name in ("prefill", "decode"):
        assert spans[name]["parentSpanId"] == spans["infer"]["spanId"], name
    ids = {spans[n]["spanId"] for n in {root_name} | CHILDREN}
    assert len(ids) == len(CHILDREN) + 1 and all(len(i) == 16 and int(i, 16) for i in ids)
    start, end = int(root["startTimeUnixNano"]), int(root["endTimeUnixNano"])
    assert abs(start / 1e9 - time.time()) < 600, "Unix nanoseconds"
    for name in CHILDREN:
        s, e = int(spans[name]["startTimeUnixNano"]), int(spans[name]["endTimeUnixNano"])
        assert start <= s <= e <= end, name
    # The phases follow one another: validate -> queued -> prefill -> decode.
    order = ["validate", "queued", "prefill", "decode"]
    for a, b in zip(order, order[1:]):
        assert int(spans[a]["endTimeUnixNano"]) <= int(spans[b]["startTimeUnixNano"]) + 1, (a, b)
    return root


@pytest.fixture(scope="module")
def receiver():
    r = OtlpReceiver()
    yield r
    r.close()


@pytest.fixture(scope="module")
def traced(receiver):
    args = ["--otlp-endpoint", receiver.endpoint, "--otlp-service-name", SERVICE_NAME]
    with launch_server(args) as s:
        yield s


def test_generate_is_a_child_of_the_callers_span(traced, receiver):
    trace_id, parent_id, traceparent = new_traceparent()
    r = traced.post("/generate", gen_body("The capital of France is", max_new_tokens=5,
                                          details=True, seed=7),
                    headers={"traceparent": traceparent})
    assert r.status_code == 200, r.text
    details = r.json()["details"]
    spans = receiver.trace(trace_id, {"generate"} | CHILDREN)
    root = assert_span_tree(spans, "generate", trace_id, parent_id)
    a = attributes(root)
    assert "max_new_tokens: Some(5)" in a["parameters"], a["parameters"]
    assert a["parameters"].startswith("GenerateParameters { ")
    assert a["gen_ai.usage.output_tokens"] == details["generated_tokens"]
    assert a["gen_ai.usage.input_tokens"] > 0
    for key in ("total_time", "validation_time", "queue_time", "inference_time", "time_per_token"):
        assert a[key][-1] == "s" and a[key][0].isdigit(), (key, a[key])  # "12.5ms", as TGI
    assert "seed" in a


def test_generate_stream_and_chat_completions_are_traced(traced, receiver):
    trace_id, parent_id, traceparent = new_traceparent()
    with requests.post(traced.url + "/generate_stream", json=gen_body("Hello", max_new_tokens=4),
                       headers={"traceparent": traceparent}, stream=True, timeout=60) as r:
        assert r.status_code == 200
        events = [line for line in r.iter_lines() if line.startswith(b"data:")]
    assert len(events) >= 2  # two tokens at least: a prefill and a decode
    assert_span_tree(receiver.trace(trace_id, {"generate_stream"} | CHILDREN), "generate_stream",
                     trace_id, parent_id)

    trace_id, parent_id, traceparent = new_traceparent()
    r = traced.post("/v1/chat/completions",
                    {"model": "tgi", "max_tokens": 4,
                     "messages": [{"role": "user", "content": "Write a long story about a cat."}]},
                    headers={"traceparent": traceparent})
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] >= 2
    spans = receiver.trace(trace_id, {"chat_completions"} | CHILDREN)
    root = assert_span_tree(spans, "chat_completions", trace_id, parent_id)
    assert attributes(root)["gen_ai.usage.output_tokens"] == r.json()["usage"]["completion_tokens"]


def test_an_invalid_traceparent_starts_a_new_trace(traced, receiver):
    seen = {s["spanId"] for s in receiver.spans()}
    bad_trace = secrets.token_hex(16)
    r = traced.post("/generate", gen_body("Hi", max_new_tokens=2),
                    headers={"traceparent": f"ff-{bad_trace}-{secrets.token_hex(8)}-01"})
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + 10
    roots = []
    while not roots and time.monotonic() < deadline:
        roots = [s for s in receiver.spans() if s["name"] == "generate" and s["spanId"] not in seen]
        time.sleep(0.05)
    assert len(roots) == 1, roots
    assert "parentSpanId" not in roots[0]
    assert roots[0]["traceId"] != bad_trace and len(roots[0]["traceId"]) == 32


def test_a_refused_request_has_an_error_span(traced, receiver):
    trace_id, parent_id, traceparent = new_traceparent()
    r = traced.post("/generate", gen_body("Hi", temperature=-1.0),
                    headers={"traceparent": traceparent})
    assert r.status_code == 422, r.text
    spans = receiver.trace(trace_id, {"generate", "validate"})
    root = spans["generate"]
    assert root["parentSpanId"] == parent_id
    assert root["status"]["code"] == 2  # STATUS_CODE_ERROR
    assert root["status"]["message"] == r.json()["error"]
    a = attributes(root)
    assert a["http.response.status_code"] == 422
    assert a["error.type"] == "validation"
    assert spans["validate"]["status"]["code"] == 2
    assert spans["validate"]["parentSpanId"] == root["spanId"]
    assert "queued" not in spans and "infer" not in spans  # it never reached the engine


def test_sigterm_flushes_the_queued_spans():
    receiver = OtlpReceiver()
    try:
        args = ["--otlp-endpoint", receiver.endpoint + "/v1/traces"]  # the full URL is kept
        with launch_server(args, env={"OTLP_SERVICE_NAME": "flushed"}) as s:
            trace_id, parent_id, traceparent = new_traceparent()
            with requests.post(s.url + "/generate_stream",
                               json=gen_body("Once upon a time", max_new_tokens=40),
                               headers={"traceparent": traceparent}, stream=True,
                               timeout=60) as r:
                lines = r.iter_lines()
                first = next(line for line in lines if line.startswith(b"data:"))
                assert b"token" in first
                # In flight: the drain lets it finish, then the exporter's queue is flushed.
                s.proc.send_signal(signal.SIGTERM)
                rest = [line for line in lines if line.startswith(b"data:")]
            assert b"generated_text" in rest[-1]
            assert s.proc.wait(timeout=60) == 0
            # No polling: the spans were sent before the process exited, not on a later tick.
            spans = {sp["name"]: sp for sp in receiver.spans() if sp["traceId"] == trace_id}
        assert_service = {sp["_resource"]["service.name"] for sp in spans.values()}
        assert assert_service == {"flushed"}
        assert spans.keys() >= {"generate_stream"} | CHILDREN, sorted(spans)
        assert spans["generate_stream"]["parentSpanId"] == parent_id
    finally:
        receiver.close()
