"""Behaviour that needs its own server instance (API key, payload limit, CORS origins, overload,
SIGTERM drain, --json-output), plus client disconnects on the session server."""

import json
import signal
import socket
import threading
import time

import openai
import pytest
import requests
from openai import OpenAI
from text_generation import Client
from text_generation.errors import OverloadedError

from conftest import gen_body, launch_server, raw_request


def _read_head(sock) -> tuple[str, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        assert chunk, buf
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head.decode(), rest


class SseReader:
    """Reads `data:` events from a raw chunked SSE response, one at a time."""

    def __init__(self, sock):
        self.sock = sock
        self.head, self.buf = _read_head(sock)
        assert self.head.startswith("HTTP/1.1 200"), self.head
        self.payload = b""

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def _dechunk(self):
        while True:
            if b"\r\n" not in self.buf:
                return
            size_line, rest = self.buf.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if len(rest) < size + 2:
                return
            self.payload += rest[:size]
            self.buf = rest[size + 2 :]
            if size == 0:
                return

    def next_event(self):
        while b"\n\n" not in self.payload:
            self._dechunk()
            if b"\n\n" in self.payload:
                break
            self._fill()
        block, self.payload = self.payload.split(b"\n\n", 1)
        assert block.startswith(b"data:")
        return json.loads(block[5:])


def open_stream(port, params, inputs="1, 2, 3, 4, 5, 6,") -> SseReader:
    body = json.dumps({"inputs": inputs, "parameters": params}).encode()
    sock = raw_request(port, "POST", "/generate_stream", body, {"Content-Type": "application/json"})
    return SseReader(sock)


def wait_for(predicate, timeout=3.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


# ---- API key, payload limit, CORS ----------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded():
    env = {"API_KEY": "Secret-Key", "PAYLOAD_LIMIT": "2000"}
    with launch_server(["--cors-allow-origin", "http://allowed.example"], env=env) as s:
        yield s


AUTH = {"Authorization": "Bearer Secret-Key"}


@pytest.mark.parametrize("path", ["/generate", "/generate_stream", "/", "/invocations", "/tokenize"])
def test_api_key_required(guarded, path):
    body = gen_body("Hi", max_new_tokens=1)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Secret-Key"}):
        r = guarded.post(path, body, headers=headers)
        assert r.status_code == 401, (path, headers)
        assert r.content == b""
    assert guarded.post(path, body, headers=AUTH).status_code == 200


def test_api_key_case_insensitive(guarded):
    r = guarded.post("/generate", gen_body("Hi", max_new_tokens=1),
                     headers={"Authorization": "BEARER secret-key"})  # fmt: skip
    assert r.status_code == 200


@pytest.mark.parametrize("path", ["/health", "/info", "/ping", "/", "/metrics", "/v1/models"])
def test_info_routes_stay_open(guarded, path):
    assert guarded.get(path).status_code == 200


def test_client_with_api_key(guarded):
    r = Client(guarded.url, headers=AUTH, timeout=60).generate("Hi", max_new_tokens=2)
    assert r.details.generated_tokens >= 1


def test_payload_limit_413(guarded):
    big = {"inputs": "a" * 3000, "parameters": {"max_new_tokens": 1}}
    r = guarded.post("/generate", big, headers=AUTH)
    assert r.status_code == 413
    assert r.headers["content-type"].startswith("text/plain")
    assert r.text == "Failed to buffer the request body: length limit exceeded"
    small = {"inputs": "a" * 100, "parameters": {"max_new_tokens": 1}}
    assert guarded.post("/generate", small, headers=AUTH).status_code == 200


def test_cors_preflight_any_origin(server):
    r = requests.options(server.url + "/generate", timeout=10, headers={
        "Origin": "http://somewhere.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})  # fmt: skip
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    methods = {m.strip() for m in r.headers["access-control-allow-methods"].split(",")}
    assert methods == {"GET", "POST"}
    assert r.headers["access-control-allow-headers"].lower() == "content-type"
    r = server.post("/generate", gen_body("Hi", max_new_tokens=1), headers={"Origin": "http://x.example"})
    assert r.headers["access-control-allow-origin"] == "*"


def test_cors_configured_origin(guarded):
    pre = {"Access-Control-Request-Method": "POST"}
    r = requests.options(guarded.url + "/generate", timeout=10,
                         headers={"Origin": "http://allowed.example", **pre})  # fmt: skip
    assert r.status_code == 200  # preflight is answered before auth
    assert r.headers["access-control-allow-origin"] == "http://allowed.example"
    r = requests.options(guarded.url + "/generate", timeout=10,
                         headers={"Origin": "http://evil.example", **pre})  # fmt: skip
    assert "access-control-allow-origin" not in r.headers
    r = guarded.get("/info", headers={"Origin": "http://allowed.example"})
    assert r.headers["access-control-allow-origin"] == "http://allowed.example"


# ---- overload ------------------------------------------------------------------------------------


def test_overloaded_429_while_first_succeeds():
    with launch_server(["--max-concurrent-requests", "1"]) as s:
        stream = open_stream(s.port, {"max_new_tokens": 80, "details": True})
        with stream.sock:
            first = stream.next_event()
            assert first["index"] == 1
            r = s.post("/generate", gen_body("Hi", max_new_tokens=1))
            assert r.status_code == 429
            assert r.headers["content-type"].startswith("application/json")
            assert r.json() == {"error": "Model is overloaded", "error_type": "overloaded"}
            with pytest.raises(OverloadedError, match="Model is overloaded"):
                Client(s.url, timeout=30).generate("Hi", max_new_tokens=1)
            # Streams answer 200 and carry the error as their only event.
            r = s.post("/generate_stream", gen_body("Hi", max_new_tokens=1))
            assert r.status_code == 200
            assert r.content == b'data:{"error":"Model is overloaded","error_type":"overloaded"}\n\n'
            # The permit is taken before validation: even an invalid request gets 429.
            assert s.post("/generate", gen_body("Hi", temperature=0.0)).status_code == 429
            event = first
            while event["generated_text"] is None:
                event = stream.next_event()
            assert event["details"]["generated_tokens"] >= 1
        m = s.metrics()
        assert m['tgi_request_failure{err="overloaded"}'] >= 4
        assert wait_for(lambda: s.post("/generate", gen_body("Hi", max_new_tokens=1)).status_code == 200)


def test_a_client_that_hangs_up_frees_its_permit_at_once():
    """The one permit is held by a request whose long prompt is being prefilled in one engine step
    (about a second): its client hangs up, and the next client is admitted at once instead of
    meeting a 429 until that step ends and the engine drops the hung-up sequence (the soak,
    scripts/soak/run.py, saw 17% 429s after hang-ups)."""
    args = ["--max-concurrent-requests", "1", "--max-step-latency-ms", "0",
            "--max-input-tokens", "3000", "--max-total-tokens", "3072",
            "--max-batch-prefill-tokens", "3072"]
    with launch_server(args) as s:
        long_prompt = "The quick brown fox jumps over the lazy dog. " * 250
        body = json.dumps(gen_body(long_prompt, max_new_tokens=4)).encode()
        sock = raw_request(s.port, "POST", "/generate", body,
                           {"Content-Type": "application/json"})
        time.sleep(0.3)  # admitted, its prefill step running
        sock.close()
        time.sleep(0.1)
        t0 = time.monotonic()
        r = s.post("/generate", gen_body("Hi", max_new_tokens=1))
        assert r.status_code == 200, r.text
        # It was admitted while the long step ran, and waited for it in the queue.
        assert time.monotonic() - t0 < 30
        assert wait_for(lambda: s.metrics().get('tgi_request_failure{err="dropped"}') == 1)
        assert s.metrics().get('tgi_request_failure{err="overloaded"}', 0) == 0


def test_clients_that_wait_for_their_answers_never_meet_a_429():
    """As many closed-loop clients as --max-concurrent-requests, each on every generation route:
    a client sends its next request the moment it has read the last one's end, so the permit must
    be free by then (it was released only when the engine dropped the finished sequence, after the
    answer went out: a quarter of such requests got 429; the soak, scripts/soak/run.py, found it)."""
    clients = 16
    with launch_server(["--max-concurrent-requests", str(clients)]) as s:
        oai = OpenAI(base_url=s.url + "/v1", api_key="-", max_retries=0, timeout=120)

        def generate():
            return s.post("/generate", gen_body("Hi", max_new_tokens=2)).status_code

        def generate_stream():
            r = s.post("/generate_stream", gen_body("Hi", max_new_tokens=2))
            return 429 if b"overloaded" in r.content else r.status_code

        def chat():
            try:
                oai.chat.completions.create(model="tgi", max_tokens=2,
                                            messages=[{"role": "user", "content": "Hi"}])
                return 200
            except openai.APIStatusError as e:
                return e.status_code

        def completions_stream():
            try:
                with oai.completions.create(model="tgi", prompt="Hi", max_tokens=2,
                                            stream=True) as stream:
                    for _ in stream:
                        pass
                return 200
            except openai.APIStatusError as e:
                return e.status_code

        routes = [generate, generate_stream, chat, completions_stream]
        statuses = [[] for _ in range(clients)]

        def client(i):
            for k in range(8):
                statuses[i].append((routes[(i + k) % len(routes)].__name__,
                                    routes[(i + k) % len(routes)]()))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        refused = [x for per_client in statuses for x in per_client if x[1] != 200]
        assert not refused, refused
        assert sum(map(len, statuses)) == clients * 8


# ---- client disconnects --------------------------------------------------------------------------


def _dropped(server) -> float:
    return server.metrics().get('tgi_request_failure{err="dropped"}', 0.0)


def test_stream_disconnect_counts_dropped_and_frees_sequence(server):
    before = _dropped(server)
    stream = open_stream(server.port, {"max_new_tokens": 200})
    stream.next_event()
    stream.next_event()
    stream.sock.close()
    assert wait_for(lambda: _dropped(server) >= before + 1, timeout=2.0), server.get("/metrics").text
    assert wait_for(lambda: server.metrics().get("tgi_batch_current_size", 0) == 0, timeout=2.0)
    r = server.post("/generate", gen_body("Hi", max_new_tokens=2))
    assert r.status_code == 200


def test_non_stream_disconnect_counts_dropped(server):
    before = _dropped(server)
    body = json.dumps(gen_body("1, 2, 3, 4, 5, 6,", max_new_tokens=200)).encode()
    sock = raw_request(server.port, "POST", "/generate", body, {"Content-Type": "application/json"})
    assert wait_for(lambda: server.metrics().get("tgi_batch_current_size", 0) >= 1, timeout=2.0)
    sock.close()
    assert wait_for(lambda: _dropped(server) >= before + 1, timeout=2.0), server.get("/metrics").text
    assert wait_for(lambda: server.metrics().get("tgi_batch_current_size", 0) == 0, timeout=2.0)
    assert server.post("/generate", gen_body("Hi", max_new_tokens=2)).status_code == 200


# ---- SIGTERM drain and --json-output -------------------------------------------------------------


def _refused(port) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return False
    except OSError:
        return True


def test_sigterm_drains_stream_then_exits_0_with_json_logs():
    with launch_server(env={"JSON_OUTPUT": "true"}) as s:
        assert s.post("/generate", gen_body("Hi", max_new_tokens=2)).status_code == 200
        assert s.post("/generate", gen_body("Hi", top_k=0)).status_code == 422
        stream = open_stream(s.port, {"max_new_tokens": 90, "details": True})
        with stream.sock:
            assert stream.next_event()["index"] == 1
            s.proc.send_signal(signal.SIGTERM)
            # New connections are refused while the in-flight stream is still being served.
            assert wait_for(lambda: _refused(s.port), timeout=1.0)
            events = []
            event = stream.next_event()
            while event.get("generated_text") is None:
                assert "error" not in event, event
                events.append(event)
                event = stream.next_event()
            assert event["details"]["finish_reason"] in ("length", "eos_token")
            assert event["details"]["generated_tokens"] == len(events) + 2
        assert s.proc.wait(timeout=30) == 0
        out, err = s.stdout(), s.stderr()

    lines = [line for line in (out + err).splitlines() if line.strip()]
    assert lines, "no log lines"
    messages = []
    for line in lines:
        obj = json.loads(line)  # every line is one JSON object
        assert list(obj)[:3] == ["timestamp", "level", "fields"], obj
        assert obj["timestamp"].endswith("Z") and "T" in obj["timestamp"]
        assert obj["level"] in ("TRACE", "DEBUG", "INFO", "WARN", "ERROR")
        assert isinstance(obj["fields"]["message"], str)
        assert obj["target"].startswith("text_generation_")
        messages.append(obj["fields"]["message"])
    assert err.strip() == "", "--json-output logs go to stdout"
    assert any(m.startswith("Warming up model") for m in messages)
