"""Raw-HTTP conformance of the TGI routes (spec tgi-api.md §1, §2, §3, §11) on the session server."""

import json
import time

import pytest
import requests

from conftest import MAX_INPUT_TOKENS, MAX_TOTAL_TOKENS, gen_body, raw_request, sse_events

X_HEADERS = [
    "x-compute-type",
    "x-compute-time",
    "x-compute-characters",
    "x-total-time",
    "x-validation-time",
    "x-queue-time",
    "x-inference-time",
    "x-time-per-token",
    "x-prompt-tokens",
    "x-generated-tokens",
]


# ---- health, info, models, docs ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/health", "/", "/ping"])
def test_health_routes_200_empty(server, path):
    r = server.get(path)
    assert r.status_code == 200
    assert r.content == b""


def test_info_shape(server):
    r = server.get("/info")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    info = r.json()
    assert list(info) == [
        "model_id",
        "model_sha",
        "model_pipeline_tag",
        "max_concurrent_requests",
        "max_best_of",
        "max_stop_sequences",
        "max_input_tokens",
        "max_total_tokens",
        "validation_workers",
        "max_client_batch_size",
        "router",
        "version",
        "sha",
        "docker_label",
    ]
    assert info["model_id"].endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert info["max_input_tokens"] == MAX_INPUT_TOKENS  # from env MAX_INPUT_TOKENS
    assert info["max_total_tokens"] == MAX_TOTAL_TOKENS  # from env MAX_TOTAL_TOKENS
    assert info["max_concurrent_requests"] == 128
    assert info["max_best_of"] == 2
    assert info["max_stop_sequences"] == 4
    assert info["router"] == "text-generation-router"
    assert isinstance(info["version"], str) and info["version"]
    for k in ("validation_workers", "max_client_batch_size"):
        assert isinstance(info[k], int)


def test_v1_models(server):
    body = server.get("/v1/models").json()
    model_id = server.get("/info").json()["model_id"]
    assert body == {
        "object": "list",
        "data": [{"id": model_id, "object": "model", "created": 0, "owned_by": model_id}],
    }


def test_docs_html(server):
    r = server.get("/docs")  # may redirect to /docs/
    assert r.status_code == 200
    assert "text/html" in r.headers["content-type"]
    assert b"<html" in r.content.lower()


def test_openapi_document(server):
    r = server.get("/api-doc/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    assert doc["info"]["title"] == "Text Generation Inference"
    served = {"/", "/generate", "/generate_stream", "/health", "/info", "/metrics", "/tokenize",
              "/invocations", "/v1/models"}  # fmt: skip
    assert served <= set(doc["paths"]), set(doc["paths"])
    assert server.get("/openapi.json").status_code == 404  # TGI has no such route


# ---- generation ----------------------------------------------------------------------------------


def test_generate_basic_and_defaults(server):
    r = server.post("/generate", gen_body("The capital of France is", max_new_tokens=6))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert list(body) == ["generated_text"]  # details default false (OpenAPI says true; serde false)
    assert isinstance(body["generated_text"], str) and body["generated_text"]
    # Greedy (parameters present => do_sample false) is deterministic.
    again = server.post("/generate", gen_body("The capital of France is", max_new_tokens=6)).json()
    assert again == body


def test_generate_details_shape(server):
    body = server.post("/generate", gen_body("Hello", max_new_tokens=5, details=True)).json()
    d = body["details"]
    assert d["finish_reason"] in ("length", "eos_token")
    assert d["generated_tokens"] == len(d["tokens"]) <= 5
    assert d["seed"] is None  # greedy
    assert d["prefill"] == []
    assert "top_tokens" not in d and "best_of_sequences" not in d
    for t in d["tokens"]:
        assert set(t) == {"id", "text", "logprob", "special"}
        assert isinstance(t["id"], int) and isinstance(t["special"], bool)
        assert t["logprob"] is None or t["logprob"] <= 0
    assert "".join(t["text"] for t in d["tokens"] if not t["special"]) == body["generated_text"]


def test_generate_top_n_tokens(server):
    d = server.post("/generate", gen_body("Hello", max_new_tokens=3, details=True, top_n_tokens=3)).json()
    d = d["details"]
    assert len(d["top_tokens"]) == d["generated_tokens"]
    for chosen, tops in zip(d["tokens"], d["top_tokens"]):
        assert len(tops) >= 3
        lps = [t["logprob"] for t in tops]
        assert lps == sorted(lps, reverse=True)
        assert chosen["id"] == tops[0]["id"]  # greedy picks the best


def test_generate_sampling_seed_reproducible(server):
    p = dict(max_new_tokens=6, do_sample=True, seed=42, temperature=0.9, top_k=20, details=True)
    a = server.post("/generate", gen_body("Once upon a time", **p)).json()
    b = server.post("/generate", gen_body("Once upon a time", **p)).json()
    assert a == b
    assert a["details"]["seed"] == 42


def test_generate_x_headers(server):
    prompt = "héllo wörld"
    r = server.post("/generate", gen_body(prompt, max_new_tokens=4, details=True))
    h = r.headers
    for name in X_HEADERS:
        assert name in h, name
    assert h["x-compute-type"]
    float(h["x-compute-time"])  # seconds as a float string
    assert "." in h["x-compute-time"]
    assert int(h["x-compute-characters"]) == len(prompt)  # Unicode chars, not bytes
    for name in ("x-total-time", "x-validation-time", "x-queue-time", "x-inference-time",
                 "x-time-per-token"):  # fmt: skip
        assert int(h[name]) >= 0, name
    assert int(h["x-generated-tokens"]) == r.json()["details"]["generated_tokens"]
    tok = server.post("/tokenize", {"inputs": prompt}).json()
    assert int(h["x-prompt-tokens"]) == len(tok)


def test_truncate_keeps_last_tokens(server):
    long_prompt = " ".join(["word"] * 40)
    r = server.post("/generate", gen_body(long_prompt, max_new_tokens=2, truncate=5))
    assert r.status_code == 200
    assert r.headers["x-prompt-tokens"] == "5"


def test_stop_sequence(server):
    ref = server.post("/generate", gen_body("The capital of France is", max_new_tokens=8, details=True))
    toks = ref.json()["details"]["tokens"]
    idx = next(i for i in range(1, len(toks))
               if toks[i]["text"].strip() and toks[i]["text"] not in "".join(t["text"] for t in toks[:i]))  # fmt: skip
    stop = toks[idx]["text"]
    r = server.post("/generate", gen_body("The capital of France is", max_new_tokens=8, details=True,
                                          stop=[stop]))  # fmt: skip
    d = r.json()
    assert d["details"]["finish_reason"] == "stop_sequence"
    assert d["generated_text"].endswith(stop)  # the stop sequence stays in the text
    assert d["details"]["generated_tokens"] == idx + 1


def test_compat_route_returns_array_with_full_text(server):
    # POST / answers a one-element array; without a Hub pipeline tag return_full_text defaults true.
    prompt = "The capital of France is"
    r = server.post("/", {"inputs": prompt, "parameters": {"max_new_tokens": 4}})
    assert r.status_code == 200
    body = r.json()
    assert isinstance(body, list) and len(body) == 1
    assert body[0]["generated_text"].startswith(prompt)
    for name in X_HEADERS:
        assert name in r.headers
    plain = server.post("/generate", gen_body(prompt, max_new_tokens=4)).json()["generated_text"]
    assert body[0]["generated_text"] == prompt + plain
    explicit = server.post("/", {"inputs": prompt, "parameters": {"max_new_tokens": 4,
                                                                 "return_full_text": False}})  # fmt: skip
    assert explicit.json()[0]["generated_text"] == plain


def test_invocations_generate_shape(server):
    r = server.post("/invocations", {"inputs": "Hello", "parameters": {"max_new_tokens": 3}})
    assert r.status_code == 200
    assert isinstance(r.json(), list) and len(r.json()) == 1
    r = server.post("/invocations", {"foo": 1})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text.startswith("Failed to deserialize the JSON body into the target type")


# ---- SSE -----------------------------------------------------------------------------------------


def _read_http(sock) -> tuple[bytes, bytes]:
    """Read a whole HTTP/1.1 response (chunked or length-delimited), return (head, body)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, buf
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    lower = head.lower()
    if b"transfer-encoding: chunked" in lower:
        body = b""
        while True:
            while b"\r\n" not in rest:
                rest += sock.recv(65536)
            size_line, rest = rest.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(rest) < size + 2:
                more = sock.recv(65536)
                assert more
                rest += more
            if size == 0:
                return head, body
            body += rest[:size]
            rest = rest[size + 2 :]
    length = 0
    for line in lower.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(rest) < length:
        more = sock.recv(65536)
        if not more:
            break
        rest += more
    return head, rest


def test_sse_framing_bytes(server):
    body = json.dumps(gen_body("Hello", max_new_tokens=4, details=True)).encode()
    sock = raw_request(server.port, "POST", "/generate_stream", body,
                       {"Content-Type": "application/json", "Connection": "close"})  # fmt: skip
    with sock:
        head, raw = _read_http(sock)
    lines = head.decode().split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    hdrs = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    assert hdrs["content-type"] == "text/event-stream"
    assert hdrs["cache-control"] == "no-cache"
    assert hdrs["x-accel-buffering"] == "no"
    assert "x-compute-type" in hdrs
    assert hdrs["x-compute-characters"] == "5"
    assert b"[DONE]" not in raw
    assert raw.startswith(b'data:{"index":1,"token":{"id":')
    events = sse_events(raw)
    assert [e["index"] for e in events] == list(range(1, len(events) + 1))
    for e in events[:-1]:
        assert e["generated_text"] is None and e["details"] is None
        assert "top_tokens" not in e  # omitted when empty
        assert set(e["token"]) == {"id", "text", "logprob", "special"}
    last = events[-1]
    assert last["generated_text"] == "".join(e["token"]["text"] for e in events
                                             if not e["token"]["special"])  # fmt: skip
    assert list(last["details"]) == ["finish_reason", "generated_tokens", "seed", "input_length"]
    assert last["details"]["generated_tokens"] == len(events)
    assert last["details"]["input_length"] == 1
    # Same text as the non-streamed request.
    assert last["generated_text"] == server.post("/generate", gen_body("Hello", max_new_tokens=4)).json()["generated_text"]


def test_sse_no_details_and_top_tokens(server):
    r = server.post("/generate_stream", gen_body("Hello", max_new_tokens=3, top_n_tokens=2))
    events = sse_events(r.content)
    assert events[-1]["details"] is None
    assert events[-1]["generated_text"] is not None
    for e in events:
        assert len(e["top_tokens"]) >= 2


def test_compat_route_streams(server):
    r = server.post("/", {"inputs": "Hello", "parameters": {"max_new_tokens": 3}, "stream": True})
    assert r.headers["content-type"] == "text/event-stream"
    events = sse_events(r.content)
    assert events[-1]["generated_text"].startswith("Hello")  # return_full_text default true on /


@pytest.mark.parametrize(
    "params, message",
    [
        ({"best_of": 2, "do_sample": True}, "`best_of` != 1 is not supported when streaming tokens"),
        ({"best_of": 0}, "`best_of` != 1 is not supported when streaming tokens"),
        ({"decoder_input_details": True},
         "`decoder_input_details` == true is not supported when streaming tokens"),
        ({"temperature": -1.0}, "`temperature` must be strictly positive"),
    ],
)  # fmt: skip
def test_sse_errors_are_events(server, params, message):
    r = server.post("/generate_stream", gen_body("Hello", max_new_tokens=3, **params))
    assert r.status_code == 200  # streams always answer 200
    assert r.headers["content-type"] == "text/event-stream"
    events = sse_events(r.content)
    assert events == [{"error": f"Input validation error: {message}", "error_type": "validation"}]


# ---- validation ----------------------------------------------------------------------------------

VALIDATION_CASES = [
    ({"temperature": 0.0}, "`temperature` must be strictly positive"),
    ({"temperature": -0.5}, "`temperature` must be strictly positive"),
    ({"repetition_penalty": 0.0}, "`repetition_penalty` must be strictly positive"),
    ({"frequency_penalty": 2.5}, "`frequency_penalty` must be >= -2.0 and <= 2.0"),
    ({"top_p": 1.0}, "`top_p` must be > 0.0 and < 1.0"),
    ({"top_p": 0.0}, "`top_p` must be > 0.0 and < 1.0"),
    ({"typical_p": 1.0}, "`typical_p` must be > 0.0 and < 1.0"),
    ({"typical_p": 0.0}, "`typical_p` must be > 0.0 and < 1.0"),
    ({"top_k": 0}, "`top_k` must be strictly positive"),
    ({"top_k": -1}, "`top_k` must be strictly positive"),
    ({"max_new_tokens": 0}, "`max_new_tokens` must be strictly positive"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "`stop` supports up to 4 stop sequences. Given: 5"),
    ({"top_n_tokens": 6}, "`top_n_tokens` must be >= 0 and <= 5. Given: 6"),
    ({"truncate": 0}, f"`truncate` must be strictly positive and less than {MAX_INPUT_TOKENS}. Given: 0"),
    ({"truncate": MAX_INPUT_TOKENS + 1},
     f"`truncate` must be strictly positive and less than {MAX_INPUT_TOKENS}. Given: {MAX_INPUT_TOKENS + 1}"),
    ({"best_of": 2}, "you must use sampling when `best_of` is > 1"),
    ({"best_of": 3, "do_sample": True}, "`best_of` must be > 0 and <= 2. Given: 3"),
    ({"best_of": 2, "do_sample": True, "seed": 1}, "`seed` must not be set when `best_of` > 1"),
    # First failure wins: sampling-for-best_of, temperature, repetition_penalty, ...
    ({"temperature": 0.0, "top_p": 1.0, "top_k": 0}, "`temperature` must be strictly positive"),
    ({"top_p": 1.5, "typical_p": 2.0, "top_k": 0}, "`top_p` must be > 0.0 and < 1.0"),
    # Ours (TGI serves an unknown adapter with the base model, silently): refused.
    ({"adapter_id": "org/lora"}, "`adapter_id` `org/lora` is not loaded: this server serves no LoRA adapters"),
]  # fmt: skip


@pytest.mark.parametrize("params, message", VALIDATION_CASES)
def test_validation_messages(server, params, message):
    params = {"max_new_tokens": 2, **params}
    r = server.post("/generate", {"inputs": "Hello", "parameters": params})
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == {"error": f"Input validation error: {message}", "error_type": "validation"}


def test_empty_inputs(server):
    r = server.post("/generate", {"inputs": "", "parameters": {"max_new_tokens": 2}})
    assert r.status_code == 422
    assert r.json() == {"error": "Input validation error: `inputs` cannot be empty", "error_type": "validation"}


def _n_tokens(server, text):
    return len(server.post("/tokenize", {"inputs": text}).json())


def test_input_too_long(server):
    text = "hello " * (MAX_INPUT_TOKENS + 20)
    n = _n_tokens(server, text)
    assert n > MAX_INPUT_TOKENS
    r = server.post("/generate", gen_body(text, max_new_tokens=1))
    assert r.status_code == 422
    assert r.json() == {
        "error": f"Input validation error: `inputs` must have less than {MAX_INPUT_TOKENS} tokens. Given: {n}",
        "error_type": "validation",
    }


def test_input_plus_new_tokens_over_total(server):
    text = "hello " * 100
    n = _n_tokens(server, text)
    new = MAX_TOTAL_TOKENS - n + 1
    r = server.post("/generate", gen_body(text, max_new_tokens=new))
    assert r.status_code == 422
    assert r.json() == {
        "error": f"Input validation error: `inputs` tokens + `max_new_tokens` must be <= {MAX_TOTAL_TOKENS}. "
        f"Given: {n} `inputs` tokens and {new} `max_new_tokens`",
        "error_type": "validation",
    }


def test_total_length_checked_before_input_length(server):
    # Over-long prompt without max_new_tokens: chunk = max_total - input saturates at 0, and the
    # total-length rule (reporting 0) fires before the input-length rule (spec §1.4, quirk 6).
    text = "hello " * (MAX_TOTAL_TOKENS + 10)
    n = _n_tokens(server, text)
    r = server.post("/generate", {"inputs": text, "parameters": {}})
    assert r.status_code == 422
    assert r.json()["error"] == (
        f"Input validation error: `inputs` tokens + `max_new_tokens` must be <= {MAX_TOTAL_TOKENS}. "
        f"Given: {n} `inputs` tokens and 0 `max_new_tokens`"
    )


def test_truncate_makes_long_input_valid(server):
    text = "hello " * (MAX_INPUT_TOKENS + 20)
    r = server.post("/generate", gen_body(text, max_new_tokens=1, truncate=10))
    assert r.status_code == 200
    assert r.headers["x-prompt-tokens"] == "10"


# ---- extractor rejections (text/plain) and routing -----------------------------------------------


def test_malformed_json_400(server):
    r = server.post("/generate", data=b'{"inputs": "Hi",', headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text.startswith("Failed to parse the request body as JSON: ")


@pytest.mark.parametrize("path", ["/generate", "/generate_stream", "/", "/tokenize"])
def test_missing_content_type_415(server, path):
    r = server.post(path, data=b'{"inputs":"Hi"}')
    assert r.status_code == 415
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text == "Expected request with `Content-Type: application/json`"


@pytest.mark.parametrize(
    "body",
    [
        {"parameters": {"max_new_tokens": 2}},  # missing required field
        {"inputs": 5},
        {"inputs": "Hi", "parameters": {"max_new_tokens": "5"}},
        {"inputs": "Hi", "parameters": {"max_new_tokens": 2.0}},
        {"inputs": "Hi", "parameters": {"max_new_tokens": -1}},
        {"inputs": "Hi", "parameters": {"details": None}},  # non-optional with default rejects null
        {"inputs": "Hi", "parameters": {"stop": "x"}},
    ],
)
def test_wrong_types_422_text(server, body):
    r = server.post("/generate", body)
    assert r.status_code == 422
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text.startswith("Failed to deserialize the JSON body into the target type: ")


def test_unknown_fields_and_explicit_nulls_accepted(server):
    body = {"inputs": "Hi", "bogus": 1,
            "parameters": {"max_new_tokens": 2, "temperature": None, "top_k": None, "seed": None,
                           "best_of": None, "truncate": None, "whatever": [1, 2]}}  # fmt: skip
    assert server.post("/generate", body).status_code == 200


def test_unknown_path_404_and_wrong_method_405(server):
    r = server.get("/does-not-exist")
    assert r.status_code == 404 and r.content == b""
    r = server.post("/nope", {"inputs": "x"})
    assert r.status_code == 404
    assert server.get("/generate").status_code == 405
    assert requests.delete(server.url + "/health", timeout=10).status_code == 405
    assert server.post("/info", {}).status_code == 405


# ---- tokenize ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["Hello wörld, naïve café — done.", "café 😀 — done."])
def test_tokenize_offsets_are_hf_byte_offsets(server, text):
    """TGI's offsets are HF tokenizers' in bytes: in order, covering the input, each entry's text
    its byte slice; byte-level tokens that split a character (the emoji: ' ' + 3 of its bytes,
    then its last) each span all of it (tests/tokenizer: the whole corpus against HF)."""
    r = server.post("/tokenize", {"inputs": text, "parameters": {"truncate": 2}})  # params ignored
    assert r.status_code == 200
    toks = r.json()
    assert len(toks) > 2
    raw = text.encode()
    covered = set()
    for prev, t in zip([None, *toks], toks):
        assert list(t) == ["id", "text", "start", "stop"]
        assert t["stop"] > t["start"]
        assert t["text"] == raw[t["start"] : t["stop"]].decode(errors="replace")
        if prev is not None:
            assert prev["start"] <= t["start"] <= prev["stop"]
        covered.update(range(t["start"], t["stop"]))
    assert covered == set(range(len(raw)))
    if "😀" in text:
        assert [t["text"] for t in toks if "😀" in t["text"]] == [" 😀", "😀"]


def test_tokenize_empty_and_wrong_type(server):
    r = server.post("/tokenize", {"inputs": 3})
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/plain")


# ---- metrics -------------------------------------------------------------------------------------


def test_metrics_after_requests(server):
    before = server.metrics()
    assert server.post("/generate", gen_body("Hi", max_new_tokens=2)).status_code == 200
    assert server.post("/generate", gen_body("Hi", temperature=0.0)).status_code == 422
    r = server.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    m = server.metrics()
    assert m["tgi_request_count"] >= before.get("tgi_request_count", 0) + 2
    assert m["tgi_request_success"] >= before.get("tgi_request_success", 0) + 1
    key = 'tgi_request_failure{err="validation"}'
    assert m[key] >= before.get(key, 0) + 1
    assert "# TYPE tgi_request_count counter" in text
    assert "# HELP tgi_request_success Number of successful requests" in text
    assert "# TYPE tgi_request_duration histogram" in text
    for h in ("tgi_request_duration", "tgi_request_validation_duration", "tgi_request_queue_duration",
              "tgi_request_inference_duration", "tgi_request_mean_time_per_token_duration",
              "tgi_request_generated_tokens", "tgi_request_input_length"):  # fmt: skip
        assert m[f"{h}_count"] >= 1, h
        assert f'{h}_bucket{{le="+Inf"}}' in m, h
        assert m[f'{h}_bucket{{le="+Inf"}}'] == m[f"{h}_count"]
    # 35 geometric bounds 0.0001 * 1.5^k (k = 1..35) plus +Inf for every *duration histogram.
    les = [k.split('le="')[1].rstrip('"}') for k in m if k.startswith("tgi_request_duration_bucket")]
    assert les[-1] == "+Inf" and len(les) == 36
    assert [float(x) for x in les[:-1]] == pytest.approx([0.0001 * 1.5**k for k in range(1, 36)])
    # Idle server: gauges back to 0 (allow a moment for the engine thread).
    deadline = time.monotonic() + 2
    while server.metrics().get("tgi_batch_current_size", 0) != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.metrics().get("tgi_batch_current_size", 0) == 0
