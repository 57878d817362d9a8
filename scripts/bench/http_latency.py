#!/usr/bin/env python3
"""Idle-server latency: one request at a time, through HTTP (/generate_stream) versus the engine
alone (`text-generation-launcher generate`, same model, prompt, threads and token count).

Runs both in one process tree, alternating, `--reps` times each, and reports time to first token
and per-token latency with the spread, plus the HTTP/engine ratios. Writes
bench/results/http_latency.json. Not part of `make test` (timings are not asserted).

  .venv/bin/python scripts/bench/http_latency.py [--reps 5] [--tokens 64]
"""
import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LAUNCHER = os.path.join(ROOT, "build/src/app/text-generation-launcher")
MODEL = os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPT = "Once upon a time, there was a little robot who"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("server did not become ready")


def http_run(port, tokens):
    body = json.dumps({"inputs": PROMPT, "parameters": {"max_new_tokens": tokens, "details": False}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start = time.perf_counter()
    conn.request("POST", "/generate_stream", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    stamps, buf = [], b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if event.startswith(b"data:"):
                stamps.append(time.perf_counter())
    if len(stamps) != tokens:
        raise RuntimeError(f"expected {tokens} events, got {len(stamps)}")
    ttft = stamps[0] - start
    per_token = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    return ttft, per_token


def engine_run(tokens, threads):
    out = subprocess.run(
        [LAUNCHER, "generate", "--model-id", MODEL, "--prompt", PROMPT, "--max-new-tokens", str(tokens),
         "--no-bos", "--num-threads", str(threads)],
        capture_output=True, text=True, check=True)
    m = re.search(r"prefill=([0-9.]+)s decode=([0-9.]+) tokens/s", out.stderr)
    if not m:
        raise RuntimeError("unexpected generate output: " + out.stderr)
    return float(m.group(1)), 1.0 / float(m.group(2))


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "runs": values}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [LAUNCHER, "--model-id", MODEL, "--hostname", "127.0.0.1", "--port", str(port), "--num-threads",
         str(args.threads)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_ready(port)
        http_run(port, 4)  # warm the connection path once
        results = {"http_ttft": [], "http_per_token": [], "engine_prefill": [], "engine_per_token": []}
        for _ in range(args.reps):  # alternate so drift affects both sides alike
            ttft, per_token = http_run(port, args.tokens)
            results["http_ttft"].append(ttft)
            results["http_per_token"].append(per_token)
            prefill, per_token = engine_run(args.tokens, args.threads)
            results["engine_prefill"].append(prefill)
            results["engine_per_token"].append(per_token)
    finally:
        server.terminate()
        server.wait(timeout=30)
    report = {k: summary(v) for k, v in results.items()}
    report["ratio_per_token_http_over_engine"] = (report["http_per_token"]["median"] /
                                                  report["engine_per_token"]["median"])
    report["http_overhead_per_token_ms"] = 1000 * (report["http_per_token"]["median"] -
                                                   report["engine_per_token"]["median"])
    report["ratio_ttft_http_over_engine_prefill"] = (report["http_ttft"]["median"] /
                                                     report["engine_prefill"]["median"])
    report["setup"] = {"model": os.path.basename(MODEL), "prompt": PROMPT, "tokens": args.tokens,
                       "threads": args.threads, "reps": args.reps}
    os.makedirs(os.path.join(ROOT, "bench/results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench/results/http_latency.json"), "w") as f:
        json.dump(report, f, indent=2)
    ms = lambda s: f"{1000 * s:.2f} ms"
    print(f"per token: http {ms(report['http_per_token']['median'])} "
          f"[{ms(report['http_per_token']['min'])}..{ms(report['http_per_token']['max'])}], engine "
          f"{ms(report['engine_per_token']['median'])} "
          f"[{ms(report['engine_per_token']['min'])}..{ms(report['engine_per_token']['max'])}], ratio "
          f"{report['ratio_per_token_http_over_engine']:.3f}, overhead {report['http_overhead_per_token_ms']:.3f} ms")
    print(f"first token: http {ms(report['http_ttft']['median'])}, engine prefill "
          f"{ms(report['engine_prefill']['median'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
