#!/usr/bin/env python3
"""Single-stream decode speed with and without `--speculate` (n-gram proposals), through HTTP.

Two servers of the same model and threads, started one after the other; each runs a
"rewrite this text" prompt (its answer repeats text from the prompt, where n-gram proposals are
accepted) and a free-form prompt (where few are), `--reps` times, greedy, and reports generated
tokens per second (the whole request, prefill included, over the generated tokens) and the
speculating server's acceptance counters. Writes bench/results/issue23_speculate_ngram.json.
Indicative only: not part of `make test`, and the machine may be shared.

  .venv/bin/python scripts/bench/speculate.py [--speculate 4] [--reps 3] [--tokens 160]
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
TEXT = ("Speculative decoding lets a server produce several tokens for one forward pass of the "
        "model. A cheap proposer guesses the next tokens, and the model checks every guess at "
        "once: the guesses it agrees with are kept, and the first one it disagrees with is "
        "replaced by its own choice. When the answer repeats the prompt, as in a rewrite or an "
        "edit of a document, most guesses are right and the text comes out faster, while the "
        "tokens are exactly those the model would have chosen on its own.")
PROMPTS = {
    "rewrite": f"Rewrite the following text exactly as it is.\n\nText: {TEXT}\n\nRewritten text:",
    "free": "Write a short story about a robot who learns to paint.",
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body, timeout=600):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    return resp.status, resp.read()


def metrics(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    out = {}
    for line in conn.getresponse().read().decode().splitlines():
        m = re.match(r"^(tgi_speculative_\w+) (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def serve(args, speculate):
    port = free_port()
    cmd = [LAUNCHER, "--model-id", MODEL, "--port", str(port), "--hostname", "127.0.0.1",
           "--num-threads", str(args.threads), "--max-total-tokens", "2048"]
    if speculate:
        cmd += ["--speculate", str(speculate)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if post(port, "/generate", {"inputs": "Hi", "parameters": {"max_new_tokens": 2}})[0] == 200:
                return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not become ready")


def measure(args, speculate):
    proc, port = serve(args, speculate)
    try:
        out = {}
        for name, prompt in PROMPTS.items():
            body = {"inputs": prompt, "parameters": {"max_new_tokens": args.tokens, "details": True}}
            rates, texts = [], set()
            before = metrics(port)
            for _ in range(args.reps):
                start = time.perf_counter()
                status, raw = post(port, "/generate", body)
                seconds = time.perf_counter() - start
                assert status == 200, raw
                answer = json.loads(raw)
                rates.append(answer["details"]["generated_tokens"] / seconds)
                texts.add(answer["generated_text"])
            after = metrics(port)
            out[name] = {"tokens_per_s": [round(r, 1) for r in rates],
                         "median_tokens_per_s": round(statistics.median(rates), 1),
                         "generated_text": sorted(texts)}
            if speculate:
                proposed = after["tgi_speculative_proposed_tokens"] - before.get(
                    "tgi_speculative_proposed_tokens", 0)
                accepted = after["tgi_speculative_accepted_tokens"] - before.get(
                    "tgi_speculative_accepted_tokens", 0)
                out[name].update(proposed=proposed, accepted=accepted,
                                 accepted_per_request=round(accepted / args.reps, 1))
        return out
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--speculate", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=160)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/issue23_speculate_ngram.json"))
    args = ap.parse_args()
    plain = measure(args, 0)
    spec = measure(args, args.speculate)
    result = {"what": "issue 23: single-stream greedy decode, with and without --speculate (n-gram)",
              "model": os.path.relpath(MODEL, ROOT), "threads": args.threads,
              "new_tokens": args.tokens, "reps": args.reps, "speculate": args.speculate,
              "note": "indicative: a shared machine; whole request time (prefill included)",
              "plain": plain, "speculate_run": spec}
    for name in PROMPTS:
        result[f"{name}_speedup"] = round(
            spec[name]["median_tokens_per_s"] / plain[name]["median_tokens_per_s"], 2)
        result[f"{name}_same_text"] = spec[name]["generated_text"] == plain[name]["generated_text"]
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    json.dump({k: v for k, v in result.items() if k.endswith(("speedup", "same_text"))}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
