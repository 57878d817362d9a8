#!/usr/bin/env python3
"""Serving benchmark: our HTTP server versus llama.cpp's llama-server on the same GGUF, threads
and prompts, in the same run, alternating.

For each concurrency C in --concurrency (default 1 4 16 64) and each load shape:
  closed  C clients each send their next request as soon as the previous one finishes;
  poisson requests arrive as a Poisson process at --poisson-rate-per-client * C requests/s,
          at most C in flight (an arrival waits for a free client slot).
Every request streams (ours: POST /generate_stream; llama.cpp: POST /completion with stream)
--max-tokens tokens, greedy. Reported per row: generated tokens/s over the run's wall time, TTFT
p50/p99 and inter-token latency p50/p99, and ours/llama.cpp ratios. Writes
bench/results/serving.json. Build llama-server first: scripts/bench/build_llama_cpp.sh.

  .venv/bin/python scripts/bench/serving.py [--concurrency 1 4 16 64] [--requests-per-client 3]
"""
import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OURS = os.path.join(ROOT, "build/src/app/text-generation-launcher")
LLAMA_SERVER = os.path.join(ROOT, ".cache/llama.cpp/build/bin/llama-server")
MODEL = os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf")
PROMPTS = [
    "Once upon a time, there was a little robot who",
    "Here is a list of fruits: apple, banana,",
    "def fibonacci(n):",
    "The history of the Roman Empire begins with",
    "In a small village by the sea, the fishermen",
    "Photosynthesis is the process by which plants",
    "To make a cup of tea, first you need to",
    "The three laws of robotics state that",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, path, timeout=180):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"server on {port} did not become ready")


def sse_stamps(port, path, body, is_token):
    """POSTs `body` to `path` and reads the SSE stream; returns (HTTP status, start, [arrival time
    of each event whose JSON payload is_token accepts]), perf_counter seconds."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    stamps, buf = [], b""
    while True:
        chunk = resp.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            event, buf = buf.split(b"\n\n", 1)
            if not event.startswith(b"data:"):
                continue
            if is_token(json.loads(event[5:])):
                stamps.append(time.perf_counter())
    conn.close()
    return resp.status, start, stamps


def token_event(kind):
    """Which SSE payloads carry a token: every event of ours, llama-server's with content."""
    return (lambda payload: True) if kind == "ours" else (lambda payload: bool(payload.get("content")))


def stream_stamps(kind, port, prompt, max_tokens):
    """Streams one greedy completion from ours ("ours": /generate_stream) or llama-server
    (/completion); returns (start, [arrival time of each token event]), perf_counter seconds."""
    if kind == "ours":
        path = "/generate_stream"
        body = {"inputs": prompt, "parameters": {"max_new_tokens": max_tokens}}
    else:
        path = "/completion"
        body = {"prompt": prompt, "n_predict": max_tokens, "stream": True, "temperature": 0.0,
                "cache_prompt": False}
    _, start, stamps = sse_stamps(port, path, body, token_event(kind))
    return start, stamps


class Server:
    def __init__(self, kind, threads, slots):
        self.kind = kind
        self.port = free_port()
        if kind == "ours":
            cmd = [OURS, "--model-id", MODEL, "--hostname", "127.0.0.1", "--port", str(self.port),
                   "--num-threads", str(threads), "--max-concurrent-requests", "1024"]
        else:
            cmd = [LLAMA_SERVER, "-m", MODEL, "--host", "127.0.0.1", "--port", str(self.port), "-t", str(threads),
                   "-tb", str(threads), "-np", str(slots), "-c", str(slots * 512), "--cont-batching",
                   "--no-webui"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(self.port, "/health")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def request(self, prompt, max_tokens):
        """Streams one completion; returns (ttft, [inter-token gaps], tokens)."""
        start, stamps = stream_stamps(self.kind, self.port, prompt, max_tokens)
        if not stamps:
            return None
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        return stamps[0] - start, gaps, len(stamps)


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    k = min(len(values) - 1, max(0, int(round(p / 100 * (len(values) - 1)))))
    return values[k]


def run_load(server, concurrency, shape, requests_per_client, max_tokens, rate_per_client, seed):
    rng = random.Random(seed)
    total = concurrency * requests_per_client
    prompts = [PROMPTS[i % len(PROMPTS)] for i in range(total)]
    arrivals = []
    t = 0.0
    for _ in range(total):
        t += rng.expovariate(rate_per_client * concurrency) if shape == "poisson" else 0.0
        arrivals.append(t)
    results, lock = [], threading.Lock()
    next_idx = [0]
    start = time.perf_counter()

    def client():
        while True:
            with lock:
                if next_idx[0] >= total:
                    return
                i = next_idx[0]
                next_idx[0] += 1
            delay = start + arrivals[i] - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            r = server.request(prompts[i], max_tokens)
            if r is not None:
                with lock:
                    results.append(r)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.perf_counter() - start
    ttfts = [r[0] for r in results]
    gaps = [g for r in results for g in r[1]]
    tokens = sum(r[2] for r in results)
    return {"requests": len(results), "tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall,
            "ttft_p50_ms": 1000 * percentile(ttfts, 50), "ttft_p99_ms": 1000 * percentile(ttfts, 99),
            "itl_p50_ms": 1000 * percentile(gaps, 50), "itl_p99_ms": 1000 * percentile(gaps, 99)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--shapes", nargs="+", default=["closed", "poisson"])
    ap.add_argument("--requests-per-client", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--poisson-rate-per-client", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/serving.json"))
    args = ap.parse_args()
    if not os.path.exists(LLAMA_SERVER):
        sys.exit("llama-server missing: run scripts/bench/build_llama_cpp.sh first")
    rows = []
    for c in args.concurrency:
        for shape in args.shapes:
            row = {"concurrency": c, "shape": shape}
            for kind in ("ours", "llama.cpp"):  # alternate, each with a fresh server
                server = Server(kind, args.threads, c)
                try:
                    server.request(PROMPTS[0], 4)  # warm-up
                    row[kind] = run_load(server, c, shape, args.requests_per_client, args.max_tokens,
                                         args.poisson_rate_per_client, seed=c)
                finally:
                    server.stop()
            o, l = row["ours"], row["llama.cpp"]
            row["ratio_tokens_per_s"] = o["tokens_per_s"] / l["tokens_per_s"]
            row["ratio_ttft_p99"] = o["ttft_p99_ms"] / l["ttft_p99_ms"]
            rows.append(row)
            print(f"C={c:3d} {shape:8s} ours {o['tokens_per_s']:7.1f} tok/s ttft p50/p99 "
                  f"{o['ttft_p50_ms']:.0f}/{o['ttft_p99_ms']:.0f} ms itl p50/p99 {o['itl_p50_ms']:.1f}/"
                  f"{o['itl_p99_ms']:.1f} ms | llama.cpp {l['tokens_per_s']:7.1f} tok/s ttft "
                  f"{l['ttft_p50_ms']:.0f}/{l['ttft_p99_ms']:.0f} ms itl {l['itl_p50_ms']:.1f}/"
                  f"{l['itl_p99_ms']:.1f} ms | throughput ratio {row['ratio_tokens_per_s']:.2f}", flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"setup": vars(args) | {"model": os.path.basename(MODEL)}, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
