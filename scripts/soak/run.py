#!/usr/bin/env python3
"""Soak (issue 24): a long mixed load at max_concurrent_requests against the default model, checked
for what a long-running deployment needs -- nothing lost, nothing leaked.

The server is started with --max-concurrent-requests C and as many closed-loop clients as that
(each sends its next request when the last one ends). A client picks, at random (seeded):
  generate / generate_stream        TGI's routes, greedy (raw HTTP, a new connection each)
  sampled                           /generate with do_sample and a seed
  chat / chat_stream                OpenAI chat completions, through the `openai` client
  completions / completions_stream  OpenAI completions, through the `openai` client
  invalid                           one of a set of malformed or refused requests (must be 4xx)
  disconnect_queued                 a /generate whose client hangs up before any answer, after a
                                    random wait (under load most of them are still queued)
  disconnect_stream                 a stream whose client hangs up after a few events
Prompts come from a fixed set of distinct prompts, each with its own max_new_tokens. Before the
load, every (route family, prompt) is run alone on the idle server: its reference. Checked:
  * no 5xx and no transport error (a reset or an empty answer the client did not cause);
  * every completed greedy (and seeded) request equals its run-alone reference -- our kernels are
    batch-invariant, so the batch a request lands in must not change its text;
  * RSS (VmRSS of /proc/<pid>/status) and the open fd count (/proc/<pid>/fd), sampled every few
    seconds, are flat after warm-up: over the load after the warm-up, the second half's maximum is
    at most (1 + rss_tolerance) times the first half's maximum (fds: at most fd_slack more), and
    after the load the idle fd count is back within fd_slack of the count before it;
  * the gauges (queue size, batch size, reserved tokens, KV blocks in use) are back to zero.
The KV pool is deliberately small (--max-batch-total-tokens, default 2048 tokens: 30 layers x 3
KV heads x 64 x K,V x fp32 = 45 KiB a token, ~90 MiB): the prefix cache keeps freed blocks until
they are needed, so a pool sized from free memory would keep growing RSS for as long as new
prompts arrive (issue 24's 8.5 GiB); a small one is filled within the first seconds of load and
then recycled, and it also keeps requests queued, so the queued-disconnect case is exercised.

  .venv/bin/python scripts/soak/run.py [--minutes 30] [--concurrency 32] [--out FILE]
      [--memory-limit-mib N --kv-tokens 0]

--memory-limit-mib N runs the server in a memory cgroup limited to N MiB (memory_cgroup.py; as root),
as a container with `--memory` would, and --kv-tokens 0 leaves the pool to the server, which sizes
it from that limit: then also checked, the cgroup's OOM killer never ran and the memory charged to
it never reached the limit (its peak), with the charged memory sampled beside the RSS.

Writes a JSON report (counts per kind, statuses, mismatches, the RSS/fd/gauge curves and the
checks); exits 1 when a check fails. tests/e2e/test_soak.py runs a 2-minute version.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memory_cgroup  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "build/src/app/text-generation-launcher"
MODEL = ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"

GAUGES = ("tgi_queue_size", "tgi_batch_current_size", "tgi_batch_current_max_tokens",
          "tgi_kv_cache_blocks_used", "vllm:num_requests_waiting", "vllm:num_requests_running")

KIND_WEIGHTS = {
    "generate": 14,
    "generate_stream": 14,
    "sampled": 6,
    "chat": 10,
    "chat_stream": 10,
    "completions": 8,
    "completions_stream": 6,
    "invalid": 10,
    "disconnect_queued": 10,
    "disconnect_stream": 12,
}
# The reference each kind is compared against (the route family's run-alone output).
FAMILY = {
    "generate": "tgi", "generate_stream": "tgi", "sampled": "sampled",
    "chat": "chat", "chat_stream": "chat",
    "completions": "completions", "completions_stream": "completions",
}  # fmt: skip

TOPICS = ["the moon", "a lighthouse keeper", "volcanoes", "the history of tea", "octopuses",
          "a robot learning to paint", "the Roman roads", "bread baking", "glaciers",
          "a chess tournament", "honey bees", "the printing press", "a night train",
          "coral reefs", "the first computers", "a mountain village", "thunderstorms",
          "paper airplanes", "the Silk Road", "a lost umbrella", "deep sea fish",
          "clock towers", "a desert oasis", "the northern lights"]  # fmt: skip
FORMS = ["Write a short story about {}.", "Explain {} to a child.",
         "List three surprising facts about {}.", "Describe {} in one paragraph.",
         "Once upon a time, there was {} and"]  # fmt: skip
MAX_NEW_TOKENS = (8, 24, 40, 64)


def make_prompts(n: int) -> list[dict]:
    """n distinct prompts; every fourth is long (a few sentences), to give prefill chunks."""
    prompts = []
    for i in range(n):
        text = FORMS[i % len(FORMS)].format(TOPICS[i % len(TOPICS)])
        if i % len(TOPICS) != i:
            text = f"({i // len(TOPICS)}) " + text
        if i % 4 == 3:
            text = ("Read this carefully. " + " ".join(
                f"Note {k}: {TOPICS[(i + k) % len(TOPICS)]} matters." for k in range(12))
                + " " + text)  # fmt: skip
        prompts.append({"text": text, "max_new_tokens": MAX_NEW_TOKENS[i % len(MAX_NEW_TOKENS)]})
    return prompts


# ---- requests ---------------------------------------------------------------------------------


class TransportError(Exception):
    """The connection failed in a way the client did not cause."""


def http_json(port: int, method: str, path: str, body: bytes | None, timeout: float,
              headers: dict | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as e:
        raise TransportError(f"{method} {path}: {type(e).__name__}: {e}") from e
    finally:
        conn.close()


def tgi_body(prompt: dict, sampled: bool = False, stream: bool = False) -> dict:
    params = {"max_new_tokens": prompt["max_new_tokens"]}
    if sampled:
        params.update(do_sample=True, temperature=0.8, top_p=0.9, seed=1234)
    return {"inputs": prompt["text"], "parameters": params, "stream": stream}


def tgi_generate(port, prompt, timeout, sampled=False) -> tuple[int, str | None]:
    status, raw = http_json(port, "POST", "/generate", json.dumps(tgi_body(prompt, sampled)).encode(),
                            timeout)
    if status != 200:
        return status, None
    return status, json.loads(raw)["generated_text"]


def sse_events(response, limit=None):
    """The JSON payloads of an SSE body, up to `limit` events."""
    count = 0
    while limit is None or count < limit:
        line = response.readline()
        if not line:
            return
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[len(b"data:"):].strip()
        if payload == b"[DONE]":
            return
        count += 1
        yield json.loads(payload)


# TGI answers a stream's refusals with 200 and one error event; the status it stands for.
STREAM_ERROR_STATUS = {"validation": 422, "overloaded": 429, "generation": 500}


def tgi_stream(port, prompt, timeout, hang_up_after=None, body=None) -> tuple[int, str | None]:
    """generate_stream; with hang_up_after, closes the socket after that many events. A stream
    that is one error event answers the status the error stands for."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        body = body if body is not None else json.dumps(tgi_body(prompt)).encode()
        conn.request("POST", "/generate_stream", body=body,
                     headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        if r.status != 200:
            r.read()
            return r.status, None
        text = None
        for i, event in enumerate(sse_events(r, hang_up_after)):
            if "error" in event:
                if i == 0 and event.get("error_type") in STREAM_ERROR_STATUS:
                    return STREAM_ERROR_STATUS[event["error_type"]], None
                raise TransportError(f"stream error event after {i} tokens: {event}")
            if event.get("generated_text") is not None:
                text = event["generated_text"]
        if hang_up_after is not None:
            return r.status, None
        if text is None:
            raise TransportError("stream ended without its final event")
        return r.status, text
    except (OSError, http.client.HTTPException) as e:
        raise TransportError(f"generate_stream: {type(e).__name__}: {e}") from e
    finally:
        if conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        conn.close()


def hang_up_before_answer(port, prompt, wait_s) -> int | None:
    """Sends /generate and closes the socket after wait_s; the status if an answer came first."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        body = json.dumps(tgi_body(prompt)).encode()
        head = (f"POST /generate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
        sock.sendall(head.encode() + body)
        sock.settimeout(wait_s)
        try:
            first = sock.recv(64)
        except socket.timeout:
            return None
        if first.startswith(b"HTTP/1.1 "):
            return int(first[9:12])
        return None
    finally:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()


def invalid_requests(port: int) -> list[tuple[str, str, bytes, dict]]:
    """(name, path, body, headers): each must be answered with a 4xx."""
    gen = lambda **p: json.dumps({"inputs": "Hello", "parameters": {"max_new_tokens": 4, **p}})  # noqa: E731
    return [
        ("bad_json", "/generate", b'{"inputs": "Hello", "parameters": {', {}),
        ("temperature_zero", "/generate", gen(temperature=0.0).encode(), {}),
        ("top_p_above_one", "/generate", gen(top_p=1.5).encode(), {}),
        ("stream_top_k_negative", "/generate_stream", gen(top_k=-3).encode(), {}),
        ("huge_max_new_tokens", "/generate", gen(max_new_tokens=10**9).encode(), {}),
        ("input_too_long", "/generate",
         json.dumps({"inputs": "word " * 5000, "parameters": {"max_new_tokens": 4}}).encode(), {}),
        ("empty_inputs", "/generate", json.dumps({"inputs": ""}).encode(), {}),
        ("inputs_not_string", "/generate", json.dumps({"inputs": 42}).encode(), {}),
        ("invalid_utf8", "/generate", b'{"inputs": "\xff\xfe"}', {}),
        ("wrong_content_type", "/generate", b"inputs=Hello", {"Content-Type": "text/plain"}),
        ("bad_grammar", "/generate", json.dumps({"inputs": "Hi", "parameters": {
            "max_new_tokens": 4, "grammar": {"type": "regex", "value": "(unclosed"}}}).encode(),
         {}),  # fmt: skip
        ("chat_no_messages", "/v1/chat/completions",
         json.dumps({"model": "tgi", "messages": []}).encode(), {}),
        ("chat_bad_role", "/v1/chat/completions", json.dumps(
            {"model": "tgi", "messages": [{"role": "wizard", "content": "hi"}]}).encode(), {}),
        ("completions_negative_max_tokens", "/v1/completions",
         json.dumps({"model": "tgi", "prompt": "Hi", "max_tokens": -1}).encode(), {}),
        ("unknown_route", "/nope", b"{}", {}),
    ]


# ---- sampling the process ---------------------------------------------------------------------


def proc_sample(pid: int) -> dict:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
            fields[key] = int(value.split()[0])
    return {"rss_kib": fields.get("VmRSS"), "rss_anon_kib": fields.get("RssAnon"),
            "rss_file_kib": fields.get("RssFile"), "threads": fields.get("Threads"),
            "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def parse_metrics(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def metrics(port: int) -> dict:
    status, raw = http_json(port, "GET", "/metrics", None, 30)
    if status != 200:
        raise TransportError(f"/metrics answered {status}")
    return parse_metrics(raw.decode())


def gauges(port: int) -> dict:
    m = metrics(port)
    # vllm: gauges carry a model_name label: a gauge is its one series, whatever its labels.
    def gauge(name: str):
        return next((v for k, v in m.items() if k == name or k.startswith(name + "{")), None)

    return {g: gauge(g) for g in GAUGES} | {"tgi_kv_cache_blocks_total":
                                            m.get("tgi_kv_cache_blocks_total")}


def request_counters(port: int) -> dict:
    """The server's own count of requests: successes, and failures by kind (dropped = the client
    left before the end)."""
    return {k: v for k, v in metrics(port).items()
            if k.startswith(("tgi_request_count", "tgi_request_success", "tgi_request_failure",
                             "tgi_request_preemptions", "tgi_prefix_cache_hit_rate"))}


# ---- the soak ---------------------------------------------------------------------------------


@dataclass
class Options:
    minutes: float = 30.0
    concurrency: int = 32  # = the server's --max-concurrent-requests
    kv_tokens: int = 2048  # --max-batch-total-tokens; 0: the server sizes its pool from memory
    num_prompts: int = 24
    sample_interval_s: float = 2.0
    warmup_fraction: float = 0.2  # of the load's duration, at least warmup_min_s
    warmup_min_s: float = 20.0
    rss_tolerance: float = 0.05
    fd_slack: int = 8
    request_timeout_s: float = 600.0
    seed: int = 0


def server_args(o: Options) -> list[str]:
    pool = ["--max-batch-total-tokens", str(o.kv_tokens)] if o.kv_tokens else []
    return ["--max-concurrent-requests", str(o.concurrency), *pool,
            "--max-batch-prefill-tokens", str(min(1024, o.kv_tokens or 1024)),
            "--max-input-tokens", "256", "--max-total-tokens", "512"]  # fmt: skip


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    kinds: dict = field(default_factory=dict)  # kind -> {"sent", "completed", "statuses"}
    mismatches: list = field(default_factory=list)
    transport_errors: list = field(default_factory=list)
    unexpected: list = field(default_factory=list)  # invalid requests not answered 4xx, etc.
    counts: dict = field(default_factory=dict)  # bucket -> number of problems

    def record(self, kind, status=None, completed=False):
        with self.lock:
            k = self.kinds.setdefault(kind, {"sent": 0, "completed": 0, "statuses": {}})
            k["sent"] += 1
            if completed:
                k["completed"] += 1
            if status is not None:
                k["statuses"][str(status)] = k["statuses"].get(str(status), 0) + 1

    def note(self, bucket, entry, cap=50):
        """Counts a problem; keeps the first `cap` of each bucket for the report."""
        with self.lock:
            self.counts[bucket] = self.counts.get(bucket, 0) + 1
            if len(getattr(self, bucket)) < cap:
                getattr(self, bucket).append(entry)

    def count(self, bucket) -> int:
        with self.lock:
            return self.counts.get(bucket, 0)


class Soak:
    """cgroup: the MemoryCgroup the server runs in, if any: its memory is sampled with the RSS,
    and the soak then also checks that the server was never OOM-killed and that the memory
    charged never reached the limit."""

    def __init__(self, port: int, pid: int, o: Options, log=print,
                 cgroup: memory_cgroup.MemoryCgroup = None):
        from openai import OpenAI

        self.port, self.pid, self.o, self.log, self.cgroup = port, pid, o, log, cgroup
        self.prompts = make_prompts(o.num_prompts)
        self.references: dict = {}
        self.tally = Tally()
        self.samples: list = []
        self.phase = "idle"
        self.t0 = time.monotonic()
        self._stop_sampling = threading.Event()
        self.oai = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0,
                          timeout=o.request_timeout_s)
        self.invalid = invalid_requests(port)

    # -- one request of each family, as the references and the load both send them --

    def run_family(self, family: str, idx: int, stream: bool = False) -> tuple[int, str | None]:
        p = self.prompts[idx]
        t = self.o.request_timeout_s
        if family == "tgi":
            return tgi_stream(self.port, p, t) if stream else tgi_generate(self.port, p, t)
        if family == "sampled":
            return tgi_generate(self.port, p, t, sampled=True)
        import openai

        try:
            if family == "chat":
                msgs = [{"role": "user", "content": p["text"]}]
                if stream:
                    parts = []
                    with self.oai.chat.completions.create(model="tgi", messages=msgs,
                                                          max_tokens=p["max_new_tokens"],
                                                          temperature=0, stream=True) as s:
                        for chunk in s:
                            if chunk.choices and chunk.choices[0].delta.content:
                                parts.append(chunk.choices[0].delta.content)
                    return 200, "".join(parts)
                r = self.oai.chat.completions.create(model="tgi", messages=msgs,
                                                     max_tokens=p["max_new_tokens"], temperature=0)
                return 200, r.choices[0].message.content or ""
            if family == "completions":
                if stream:
                    parts = []
                    with self.oai.completions.create(model="tgi", prompt=p["text"],
                                                     max_tokens=p["max_new_tokens"],
                                                     temperature=0, stream=True) as s:
                        for chunk in s:
                            if chunk.choices:
                                parts.append(chunk.choices[0].text or "")
                    return 200, "".join(parts)
                r = self.oai.completions.create(model="tgi", prompt=p["text"],
                                                max_tokens=p["max_new_tokens"], temperature=0)
                return 200, r.choices[0].text
        except openai.APIStatusError as e:
            return e.status_code, None
        except openai.APIConnectionError as e:
            raise TransportError(f"openai {family}: {type(e).__name__}: {e}") from e
        raise ValueError(family)

    def compute_references(self):
        self.phase = "reference"
        for family in ("tgi", "sampled", "chat", "completions"):
            for idx in range(len(self.prompts)):
                status, text = self.run_family(family, idx)
                if status != 200:
                    raise RuntimeError(f"reference {family}[{idx}] answered {status}")
                self.references[(family, idx)] = text

    # -- the load --

    def one_request(self, rng: random.Random) -> tuple[str, int | str | None]:
        """Sends one request of a random kind: (kind, status)."""
        kind = rng.choices(list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()))[0]
        idx = rng.randrange(len(self.prompts))
        t = self.tally
        try:
            if kind == "invalid":
                name, path, body, headers = rng.choice(self.invalid)
                if path == "/generate_stream":
                    status, _ = tgi_stream(self.port, None, self.o.request_timeout_s, body=body)
                else:
                    status, _ = http_json(self.port, "POST", path, body,
                                          self.o.request_timeout_s, headers)
                t.record(kind, status, completed=True)
                if not 400 <= status < 500:
                    t.note("unexpected", {"kind": kind, "name": name, "status": status})
                return kind, status
            if kind == "disconnect_queued":
                status = hang_up_before_answer(self.port, self.prompts[idx], rng.uniform(0, 0.8))
                t.record(kind, status)
                if status is not None and status >= 500:
                    t.note("unexpected", {"kind": kind, "status": status})
                return kind, status
            if kind == "disconnect_stream":
                status, _ = tgi_stream(self.port, self.prompts[idx], self.o.request_timeout_s,
                                       hang_up_after=rng.randint(1, 4))
                t.record(kind, status)
                if status >= 500:
                    t.note("unexpected", {"kind": kind, "status": status})
                return kind, status
            family = FAMILY[kind]
            status, text = self.run_family(family, idx, stream=kind.endswith("_stream"))
            t.record(kind, status, completed=status == 200)
            if status >= 500:
                t.note("unexpected", {"kind": kind, "status": status})
            if status == 200 and text != self.references[(family, idx)]:
                t.note("mismatches", {"kind": kind, "prompt_idx": idx, "got": text,
                                      "expected": self.references[(family, idx)]})
            return kind, status
        except TransportError as e:
            t.record(kind, "transport_error")
            t.note("transport_errors", {"kind": kind, "error": str(e)[:300]})
            return kind, "transport_error"
        except Exception as e:  # noqa: BLE001 -- e.g. an error event inside an OpenAI stream
            t.record(kind, "transport_error")
            t.note("transport_errors", {"kind": kind, "error": f"{type(e).__name__}: {e}"[:300]})
            return kind, "transport_error"

    def client(self, worker: int, deadline: float):
        rng = random.Random(self.o.seed * 1000 + worker)
        while time.monotonic() < deadline:
            kind, status = self.one_request(rng)
            # A server notices a hang-up within milliseconds, not at once: the client that left
            # comes back a little later (as a new client would), and a 429 backs off (as real
            # clients do) instead of spinning on the permit the hang-up still holds.
            if status == 429:
                time.sleep(0.1)
            elif kind.startswith("disconnect"):
                time.sleep(rng.uniform(0.02, 0.1))

    def sampler(self):
        while not self._stop_sampling.is_set():
            self.take_sample()
            self._stop_sampling.wait(self.o.sample_interval_s)

    def take_sample(self):
        s = {"t": round(time.monotonic() - self.t0, 2), "phase": self.phase}
        try:
            s.update(proc_sample(self.pid))
            if self.cgroup:
                s["cgroup_kib"] = self.cgroup.stats()["current_bytes"] // 1024
        except OSError as e:
            s["error"] = str(e)
        try:
            s.update(gauges(self.port))
        except TransportError as e:
            s["metrics_error"] = str(e)
        self.samples.append(s)
        return s

    def wait_idle(self, timeout_s=120.0) -> dict:
        """The gauges once they are all zero (or the last ones seen at the deadline)."""
        deadline = time.monotonic() + timeout_s
        while True:
            g = gauges(self.port)
            if all(g[k] == 0 for k in GAUGES) or time.monotonic() > deadline:
                return g
            time.sleep(0.5)

    def run(self) -> dict:
        o = self.o
        sampler = threading.Thread(target=self.sampler, daemon=True)
        sampler.start()
        self.log(f"soak: references for {len(self.prompts)} prompts x 4 route families (alone)")
        ref_start = time.monotonic()
        self.compute_references()
        self.phase = "baseline"
        before_load = self.take_sample()
        load_start = time.monotonic()
        deadline = load_start + o.minutes * 60
        self.log(f"soak: {o.minutes} min at {o.concurrency} concurrent clients "
                 f"(references took {load_start - ref_start:.0f} s)")
        self.phase = "load"
        workers = [threading.Thread(target=self.client, args=(w, deadline), daemon=True)
                   for w in range(o.concurrency)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        load_end = time.monotonic()
        self.phase = "drain"
        self.oai.close()  # its kept-alive connections are ours, not the server's leak
        end_gauges = self.wait_idle()
        counters = request_counters(self.port)
        # An idle server's state after the load: the same greedy outputs as before it.
        post_mismatches = []
        for idx in range(len(self.prompts)):
            status, text = self.run_family("tgi", idx)
            if status != 200 or text != self.references[("tgi", idx)]:
                post_mismatches.append({"prompt_idx": idx, "status": status, "got": text})
        time.sleep(1.0)  # let the server finish closing the last connections
        self.phase = "end"
        end = self.take_sample()
        self._stop_sampling.set()
        sampler.join()
        report = self.report(before_load, end, end_gauges, post_mismatches,
                             load_start - self.t0, load_end - self.t0)
        report["server_counters"] = counters
        return report

    # -- the verdict --

    def report(self, before, end, end_gauges, post_mismatches, load_start, load_end) -> dict:
        o = self.o
        warmup = max(o.warmup_fraction * (load_end - load_start), o.warmup_min_s)
        steady = [s for s in self.samples
                  if s["phase"] == "load" and s["t"] >= load_start + warmup and "rss_kib" in s]
        mid = (load_start + warmup + load_end) / 2
        first = [s for s in steady if s["t"] < mid]
        second = [s for s in steady if s["t"] >= mid]
        checks = {}
        statuses = {}
        for k in self.tally.kinds.values():
            for code, n in k["statuses"].items():
                statuses[code] = statuses.get(code, 0) + n
        num_5xx = sum(n for code, n in statuses.items() if code.isdigit() and int(code) >= 500)
        checks["no_5xx"] = num_5xx == 0
        checks["no_transport_errors"] = self.tally.count("transport_errors") == 0
        checks["no_unexpected_status"] = self.tally.count("unexpected") == 0
        checks["greedy_equal_to_alone"] = self.tally.count("mismatches") == 0
        checks["same_outputs_after_load"] = not post_mismatches
        checks["gauges_zero_at_end"] = all(end_gauges[g] == 0 for g in GAUGES)
        flat = {}
        if first and second:
            rss1 = max(s["rss_kib"] for s in first)
            rss2 = max(s["rss_kib"] for s in second)
            fd1 = max(s["fds"] for s in first)
            fd2 = max(s["fds"] for s in second)
            flat = {"rss_max_first_half_kib": rss1, "rss_max_second_half_kib": rss2,
                    "rss_growth": round(rss2 / rss1 - 1, 4),
                    "fd_max_first_half": fd1, "fd_max_second_half": fd2}  # fmt: skip
            checks["rss_flat"] = rss2 <= rss1 * (1 + o.rss_tolerance)
            checks["fds_flat"] = fd2 <= fd1 + o.fd_slack
        else:
            checks["rss_flat"] = checks["fds_flat"] = False  # too short to say
        checks["fds_back_at_end"] = end["fds"] <= before["fds"] + o.fd_slack
        checks["server_alive"] = Path(f"/proc/{self.pid}").exists()
        memory = self.cgroup.stats() if self.cgroup else None
        if memory:
            checks["not_oom_killed"] = not memory["oom_kills"]
            checks["peak_below_limit"] = memory["peak_bytes"] < memory["limit_bytes"]
        load_samples = [s for s in self.samples if s["phase"] == "load" and "rss_kib" in s]
        summary = {
            "rss_kib": {"before_load": before["rss_kib"], "end": end["rss_kib"],
                        "max": max((s["rss_kib"] for s in load_samples), default=None)},
            "fds": {"before_load": before["fds"], "end": end["fds"],
                    "max": max((s["fds"] for s in load_samples), default=None)},
            "queue_size_max": max((s.get("tgi_queue_size") or 0 for s in load_samples), default=0),
            "samples_with_queue": sum(1 for s in load_samples if (s.get("tgi_queue_size") or 0) > 0),
            "num_load_samples": len(load_samples),
        }  # fmt: skip
        t = self.tally
        return {
            "options": asdict(o),
            "server_args": server_args(o),
            "load_seconds": round(load_end - load_start, 1),
            "warmup_seconds": round(warmup, 1),
            "flatness_rule": (f"after {warmup:.0f} s of warm-up, max RSS of the load's second half "
                              f"<= (1 + {o.rss_tolerance}) x max of its first half; fds: <= first "
                              f"half's max + {o.fd_slack}, and idle fds after the load <= before + "
                              f"{o.fd_slack}"),
            "kinds": t.kinds,
            "statuses": statuses,
            "num_5xx": num_5xx,
            "num_mismatches": t.count("mismatches"),
            "mismatches": t.mismatches,
            "num_transport_errors": t.count("transport_errors"),
            "transport_errors": t.transport_errors,
            "unexpected": t.unexpected,
            "post_load_mismatches": post_mismatches,
            "end_gauges": end_gauges,
            "flatness": flat,
            "summary": summary,
            "cgroup": memory,
            "checks": checks,
            "ok": all(checks.values()),
            "samples": self.samples,
        }


# ---- standalone ------------------------------------------------------------------------------


def kv_plan_lines(server_log: str) -> list[str]:
    """The server's start-up lines that say how its KV pool was sized."""
    return [line for line in server_log.splitlines() if "KV budget" in line or "KV cache:" in line]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(o: Options, launcher: Path, model: Path, log_dir: Path, cgroup=None):
    port = free_port()
    out = open(log_dir / "server.log", "wb")
    cmd = [str(launcher), "--model-id", str(model), "--hostname", "127.0.0.1", "--port", str(port),
           *server_args(o)]
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                            preexec_fn=cgroup.enter if cgroup else None)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {(log_dir / 'server.log').read_text()[-2000:]}")
        try:
            if http_json(port, "GET", "/health", None, 5)[0] == 200:
                return proc, port
        except TransportError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise RuntimeError("server not ready in 300 s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    d = Options()
    ap.add_argument("--minutes", type=float, default=d.minutes)
    ap.add_argument("--concurrency", type=int, default=d.concurrency)
    ap.add_argument("--kv-tokens", type=int, default=d.kv_tokens,
                    help="the server's --max-batch-total-tokens; 0: sized from free memory "
                         "(inside --memory-limit-mib's cgroup, from its limit)")
    ap.add_argument("--memory-limit-mib", type=int, default=0,
                    help="run the server in a memory cgroup with this hard limit (as a container "
                         "with --memory); also checks it is never OOM-killed and never reaches it")
    ap.add_argument("--num-prompts", type=int, default=d.num_prompts)
    ap.add_argument("--sample-interval", type=float, default=d.sample_interval_s)
    ap.add_argument("--rss-tolerance", type=float, default=d.rss_tolerance)
    ap.add_argument("--seed", type=int, default=d.seed)
    ap.add_argument("--launcher", type=Path, default=LAUNCHER)
    ap.add_argument("--model", type=Path, default=MODEL)
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/issue24_soak.json")
    a = ap.parse_args()
    o = Options(minutes=a.minutes, concurrency=a.concurrency, kv_tokens=a.kv_tokens,
                num_prompts=a.num_prompts, sample_interval_s=a.sample_interval,
                rss_tolerance=a.rss_tolerance, seed=a.seed)
    log_dir = Path(tempfile.mkdtemp(prefix="soak-"))
    cgroup = None
    if a.memory_limit_mib:
        if reason := memory_cgroup.unavailable():
            sys.exit(f"--memory-limit-mib: no memory cgroup here ({reason})")
        cgroup = memory_cgroup.MemoryCgroup(f"lm-soak-{os.getpid()}", a.memory_limit_mib << 20)
    proc, port = start_server(o, a.launcher, a.model, log_dir, cgroup)
    try:
        report = Soak(port, proc.pid, o, cgroup=cgroup).run()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if cgroup:
            cgroup.remove()
    report["server_exit_code"] = proc.returncode
    report["server_kv_plan"] = kv_plan_lines((log_dir / "server.log").read_text(errors="replace"))
    report["model"] = str(a.model.relative_to(ROOT) if a.model.is_relative_to(ROOT) else a.model)
    report["date"] = time.strftime("%Y-%m-%d %H:%M:%S")
    report["machine"] = {"nproc": os.cpu_count()}
    # The curves as columns (one list per field, one entry per sample): compact and plottable.
    samples = report.pop("samples")
    report["curves"] = {k: [s.get(k) for s in samples] for k in dict.fromkeys(
        k for s in samples for k in s)}  # fmt: skip
    a.out.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps(report, indent=1)
    for k, column in report["curves"].items():  # one line per curve
        body = body.replace(json.dumps(column, indent=1).replace("\n", "\n  "),
                            json.dumps(column), 1)
    a.out.write_text(body + "\n")
    s = report["summary"]
    print(json.dumps({k: report[k] for k in ("kinds", "statuses", "num_5xx", "num_mismatches",
                                             "num_transport_errors", "end_gauges", "flatness",
                                             "checks", "ok")}, indent=1))  # fmt: skip
    print(f"rss KiB before/end/max {s['rss_kib']}, fds {s['fds']}; report: {a.out}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
