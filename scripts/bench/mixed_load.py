#!/usr/bin/env python3
"""Latency under mixed load (issue 26): chat streams at steady load while long prompts arrive.

For each server -- ours with --max-step-latency-ms (default 300, the launcher's), ours with 0
(whole-budget prefill steps, the behaviour before issue 26), and llama.cpp's llama-server -- on
the same GGUF and threads, in one run, alternating (--rounds times): --chat-clients closed-loop
clients stream short completions (--chat-tokens each, greedy) while one client sends long prompts
of --long-sizes tokens one after another (each --long-tokens new tokens, 1.5 s apart). Reported
per server: the chat streams' inter-token gaps (p50/p99/max, and max while a long prompt was
being prefilled), TTFT of the chat requests (p50/p99) and of each long prompt, and throughput
(generated tokens/s, and prompt + generated tokens/s of the requests completed); then a summary:
per-round ratios (ours with the target / without it, and / llama-server) with their spread, and
the issue's aims checked on every round. Writes bench/results/issue26_mixed_load.json. Not part
of `make test`.

  .venv/bin/python scripts/bench/mixed_load.py [--rounds 1] [--long-sizes 2000 4000]
      [--llama-server PATH]  (a llama-server binary; scripts/bench/build_llama_cpp.sh builds one)
  .venv/bin/python scripts/bench/mixed_load.py --merge A.json B.json [--out C.json]
      (the rounds of several runs with the same settings, as one result and summary)

On a machine that advertises AMX but whose OS refuses it, a native llama.cpp build dies with
SIGILL: build llama-server with GGML_NATIVE=OFF, AVX-512/VNNI/BF16 on and AMX off, and pass it
with --llama-server (bench/results/issue26_mixed_load.json was measured so, -np 6, -c 6 x the
longest prompt + 400).
"""
import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time

# The stream timing and server start-up helpers of serving.py (same folder).
from serving import free_port, stream_stamps, wait_ready

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OURS = os.path.join(ROOT, "build/src/app/text-generation-launcher")
MODEL = os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf")
CHAT_PROMPTS = [
    "Once upon a time, there was a little robot who",
    "Here is a list of fruits: apple, banana,",
    "The history of the Roman Empire begins with",
    "In a small village by the sea, the fishermen",
    "To make a cup of tea, first you need to",
    "The three laws of robotics state that",
]


WHAT = "issue 26: chat streams at steady load while long prompts arrive"


def percentile(values, p):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(p / 100 * (len(values) - 1)))))]


def ms(x):
    return None if x is None else round(1000 * x, 1)


class Server:
    def __init__(self, name, kind, args, threads, llama_server, max_context):
        self.name, self.kind = name, kind
        self.port = free_port()
        if kind == "ours":
            cmd = [OURS, "--model-id", MODEL, "--hostname", "127.0.0.1", "--port", str(self.port),
                   "--num-threads", str(threads), "--max-concurrent-requests", "1024",
                   "--max-input-tokens", str(max_context - 200), "--max-total-tokens", str(max_context),
                   "--max-batch-prefill-tokens", "4096", "--prefix-caching", "false"] + args
        else:
            slots = 6
            cmd = [llama_server, "-m", MODEL, "--host", "127.0.0.1", "--port", str(self.port),
                   "-t", str(threads), "-tb", str(threads), "-np", str(slots),
                   "-c", str(slots * max_context), "--cont-batching", "--no-webui"] + args
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(self.port, "/health")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def stream(self, prompt, max_tokens):
        """Streams one greedy completion; returns (start, [token arrival times])."""
        return stream_stamps(self.kind, self.port, prompt, max_tokens)

    def count_tokens(self, text):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        conn.request("POST", "/tokenize", json.dumps({"inputs": text}), {"Content-Type": "application/json"})
        return len(json.loads(conn.getresponse().read()))


def long_prompt(words, seed):
    return f"Document {seed}. " + " ".join(f"w{(i * 7 + seed) % 997}," for i in range(words))


def calibrate(server, sizes):
    """Word counts giving prompts of about each size in tokens (our tokenizer; the same GGUF)."""
    per_word = server.count_tokens(long_prompt(400, 0)) / 400
    return {n: int(n / per_word) for n in sizes}


def run_phase(server, args, words_for, round_idx):
    chat, longs, lock = [], [], threading.Lock()
    done = threading.Event()

    def chat_client(c):
        i = c
        while not done.is_set():
            start, stamps = server.stream(CHAT_PROMPTS[i % len(CHAT_PROMPTS)], args.chat_tokens)
            with lock:
                chat.append((start, stamps))
            i += args.chat_clients

    clients = [threading.Thread(target=chat_client, args=(c,)) for c in range(args.chat_clients)]
    wall_start = time.perf_counter()
    for t in clients:
        t.start()
    time.sleep(args.warmup_s)
    for k, size in enumerate(args.long_sizes):
        prompt = long_prompt(words_for[size], 1000 * round_idx + 10 * k)
        start, stamps = server.stream(prompt, args.long_tokens)
        longs.append({"size": size, "start": start, "stamps": stamps})
        time.sleep(1.5)
    done.set()
    for t in clients:
        t.join()
    wall = time.perf_counter() - wall_start
    return chat, longs, wall


def summarize(chat, longs, wall, long_prompt_tokens, chat_prompt_tokens):
    gaps, gaps_during, ttfts = [], [], []
    windows = [(l["start"], l["stamps"][0]) for l in longs if l["stamps"]]
    for start, stamps in chat:
        if stamps:
            ttfts.append(stamps[0] - start)
        for a, b in zip(stamps, stamps[1:]):
            gaps.append(b - a)
            if any(ws < b and a < we for ws, we in windows):
                gaps_during.append(b - a)
    generated = sum(len(s) for _, s in chat) + sum(len(l["stamps"]) for l in longs)
    processed = generated + len(chat) * chat_prompt_tokens + sum(long_prompt_tokens[l["size"]] for l in longs)
    return {
        "chat_requests": len(chat),
        "itl_p50_ms": ms(percentile(gaps, 50)), "itl_p99_ms": ms(percentile(gaps, 99)),
        "itl_max_ms": ms(max(gaps, default=None)),
        "itl_max_during_long_prefill_ms": ms(max(gaps_during, default=None)),
        "chat_ttft_p50_ms": ms(percentile(ttfts, 50)), "chat_ttft_p99_ms": ms(percentile(ttfts, 99)),
        "chat_ttft_max_ms": ms(max(ttfts, default=None)),
        "long_ttft_ms": {str(l["size"]): ms(l["stamps"][0] - l["start"]) if l["stamps"] else None for l in longs},
        "wall_s": round(wall, 2),
        "generated_tokens_per_s": round(generated / wall, 2),
        "processed_tokens_per_s": round(processed / wall, 2),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--chat-clients", type=int, default=3)
    ap.add_argument("--chat-tokens", type=int, default=48)
    ap.add_argument("--long-sizes", type=int, nargs="+", default=[2000, 4000])
    ap.add_argument("--long-tokens", type=int, default=8)
    ap.add_argument("--warmup-s", type=float, default=3.0)
    ap.add_argument("--max-step-latency-ms", type=int, default=300)
    ap.add_argument("--llama-server", default=os.path.join(ROOT, ".cache/llama.cpp/build/bin/llama-server"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/issue26_mixed_load.json"))
    ap.add_argument("--merge", nargs="+", metavar="RESULT_JSON",
                    help="no run: join the rounds of these results files (same settings) into --out")
    args = ap.parse_args()
    if args.merge:
        return merge(args.merge, args.out)
    max_context = max(args.long_sizes) + 400
    configs = [(f"ours_step{args.max_step_latency_ms}ms", "ours",
                ["--max-step-latency-ms", str(args.max_step_latency_ms)]),
               ("ours_step0", "ours", ["--max-step-latency-ms", "0"])]
    if os.path.exists(args.llama_server):
        configs.append(("llama-server", "llama", []))
    else:
        print(f"no llama-server at {args.llama_server}: ours only", file=sys.stderr)

    probe = Server("probe", "ours", [], args.threads, None, max_context)
    words_for = calibrate(probe, args.long_sizes)
    long_tokens = {n: probe.count_tokens(long_prompt(words_for[n], 0)) for n in args.long_sizes}
    chat_tokens = round(sum(probe.count_tokens(p) for p in CHAT_PROMPTS) / len(CHAT_PROMPTS))
    probe.stop()

    runs = {name: [] for name, _, _ in configs}
    for r in range(args.rounds):
        for name, kind, extra in configs:
            server = Server(name, kind, extra, args.threads, args.llama_server, max_context)
            try:
                chat, longs, wall = run_phase(server, args, words_for, r)
            finally:
                server.stop()
            row = summarize(chat, longs, wall, long_tokens, chat_tokens)
            runs[name].append(row)
            print(name, json.dumps(row), flush=True)

    result = {
        "what": WHAT,
        "model": os.path.relpath(MODEL, ROOT),
        "threads": args.threads,
        "chat_clients": args.chat_clients, "chat_tokens": args.chat_tokens,
        "long_prompt_tokens": {str(k): v for k, v in long_tokens.items()},
        "long_new_tokens": args.long_tokens,
        "rounds": args.rounds,
        "machine": os.uname().nodename,
        "runs": runs,
    }
    write_result(result, args.out)


def write_result(result, out):
    result["summary"] = summary(result["runs"])
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result["summary"], indent=1))
    print("wrote", out)


def merge(paths, out):
    """One result from several runs of this script with the same settings: their rounds joined."""
    results = [json.load(open(p)) for p in paths]
    keys = ("model", "threads", "chat_clients", "chat_tokens", "long_prompt_tokens", "long_new_tokens")
    for r in results[1:]:
        assert all(r[k] == results[0][k] for k in keys), "different settings"
        assert r["runs"].keys() == results[0]["runs"].keys(), "different servers"
    merged = dict(results[0])
    merged["runs"] = {name: [row for r in results for row in r["runs"][name]] for name in merged["runs"]}
    merged["rounds"] = sum(r["rounds"] for r in results)
    write_result(merged, out)


def spread(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"min": round(min(values), 3), "median": round(percentile(values, 50), 3),
            "max": round(max(values), 3), "all": [round(v, 3) for v in values]}


def summary(runs):
    """Per round (the servers ran back to back, alternating), ours with the step-latency target
    against ours without it (the behaviour before issue 26) and against llama-server, and the
    issue's aims checked on every round."""
    stepped = next(name for name in runs if name.startswith("ours_step") and name != "ours_step0")
    base, ours = runs["ours_step0"], runs[stepped]
    rounds = range(min(len(base), len(ours)))
    sizes = list(ours[0]["long_ttft_ms"])
    longest = sizes[-1]

    def ratio(a, b):
        return None if a is None or not b else a / b

    out = {
        "compared": f"{stepped} / ours_step0, per round",
        "long_ttft_ratio": {n: spread([ratio(ours[i]["long_ttft_ms"][n], base[i]["long_ttft_ms"][n])
                                       for i in rounds]) for n in sizes},
        "processed_tokens_per_s_ratio": spread([ratio(ours[i]["processed_tokens_per_s"],
                                                      base[i]["processed_tokens_per_s"]) for i in rounds]),
        "generated_tokens_per_s_ratio": spread([ratio(ours[i]["generated_tokens_per_s"],
                                                      base[i]["generated_tokens_per_s"]) for i in rounds]),
        "itl_max_during_long_prefill_ms": {"ours": spread([r["itl_max_during_long_prefill_ms"] for r in ours]),
                                           "ours_step0": spread([r["itl_max_during_long_prefill_ms"] for r in base])},
        "chat_ttft_p99_ms": spread([r["chat_ttft_p99_ms"] for r in ours]),
    }
    if "llama-server" in runs:
        peer = runs["llama-server"]
        n = range(min(len(peer), len(ours)))
        out["vs_llama_server"] = {
            "long_ttft_ratio": {s: spread([ratio(ours[i]["long_ttft_ms"][s], peer[i]["long_ttft_ms"][s])
                                           for i in n]) for s in sizes},
            "itl_max_ratio": spread([ratio(ours[i]["itl_max_ms"], peer[i]["itl_max_ms"]) for i in n]),
            "processed_tokens_per_s_ratio": spread([ratio(ours[i]["processed_tokens_per_s"],
                                                          peer[i]["processed_tokens_per_s"]) for i in n]),
        }
    # The aims (default model, 2 threads), on every round; throughput also on the mean.
    tput = out["processed_tokens_per_s_ratio"]
    out["aims"] = {
        "max_gap_during_long_prefill_le_500ms": all(r["itl_max_during_long_prefill_ms"] <= 500 for r in ours),
        "chat_ttft_p99_le_1s": all(r["chat_ttft_p99_ms"] <= 1000 for r in ours),
        f"long_ttft_{longest}_within_1.2x_every_round": out["long_ttft_ratio"][longest]["max"] <= 1.2,
        "throughput_within_5pct_every_round": tput["min"] >= 0.95,
        "throughput_within_5pct_on_the_mean": sum(tput["all"]) / len(tput["all"]) >= 0.95,
    }
    return out


if __name__ == "__main__":
    main()
