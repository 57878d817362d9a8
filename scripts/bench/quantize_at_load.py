#!/usr/bin/env python3
"""Quantizing at load (issue 20 item 2): does a float checkpoint served with `--quantize q4_0` (or q4_k ...)
run as fast as the same weights quantized offline by llama.cpp's llama-quantize?

On one float GGUF (default: the 8-layer Llama-2-7B-shaped F16 file scripts/bench/cpu_side_by_side.py
makes, .cache/models/llama7b8l-random-F16.gguf), llama-quantize --pure writes the TYPE file once
(its time reported); then, alternating for --rounds, our launcher serves (a) the float file as
stored, (b) the float file with --quantize TYPE, (c) llama-quantize's file; each: seconds until
/health answers, resident memory then (VmRSS) and at its peak (VmHWM: the load's, quantizing
included), and single-stream decode tokens/s of --reps greedy /generate calls of --tokens tokens
after one warm-up. Reports the ratios (b)/(c) and (b)/(a) per round with their spread. Writes
bench/results/issue20_quantize_at_load[_TYPE].json. Not part of `make test`.

  .venv/bin/python scripts/bench/quantize_at_load.py [--type q4_0] [--rounds 2] [--threads 2]
"""
import argparse
import json
import os
import socket
import subprocess
import time

import requests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OURS = os.path.join(ROOT, "build/src/app/text-generation-launcher")
QUANTIZE = os.path.join(ROOT, ".cache/llama.cpp/build/bin/llama-quantize")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_and_measure(model, extra, args):
    port = free_port()
    start = time.perf_counter()
    proc = subprocess.Popen([OURS, "--model-id", model, "--port", str(port), "--hostname", "127.0.0.1",
                             "--num-threads", str(args.threads), "--max-batch-total-tokens", "4096", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"server exited ({proc.returncode}) for {model} {extra}")
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        ready_s = time.perf_counter() - start
        with open(f"/proc/{proc.pid}/status") as f:
            status = {line.split(":")[0]: line.split()[1] for line in f if line.startswith(("VmRSS", "VmHWM"))}
        rss_mib = int(status["VmRSS"]) / 1024
        peak_rss_mib = int(status["VmHWM"]) / 1024  # the load's peak, quantizing included
        body = {"inputs": "The quick brown fox", "parameters": {"max_new_tokens": args.tokens, "details": True}}
        requests.post(url + "/generate", json=body, timeout=600)  # warm-up
        rates = []
        for _ in range(args.reps):
            t = time.perf_counter()
            r = requests.post(url + "/generate", json=body, timeout=600).json()
            rates.append(r["details"]["generated_tokens"] / (time.perf_counter() - t))
    finally:
        proc.terminate()
        proc.wait()
    return {"ready_s": round(ready_s, 2), "rss_mib": round(rss_mib, 1), "peak_rss_mib": round(peak_rss_mib, 1),
            "decode_tokens_per_s": [round(x, 2) for x in rates],
            "decode_tokens_per_s_median": round(sorted(rates)[len(rates) // 2], 2)}


def spread(values):
    return {"min": round(min(values), 3), "max": round(max(values), 3), "all": [round(v, 3) for v in values]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, ".cache/models/llama7b8l-random-F16.gguf"))
    ap.add_argument("--type", default="q4_0", choices=["q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k",
                                                       "bitsandbytes-nf4", "bitsandbytes-fp4"])
    ap.add_argument("--peer-type", default="q4_0", help="llama-quantize's type for a bitsandbytes --type")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="default bench/results/issue20_quantize_at_load[_TYPE].json (q4_0 unsuffixed)")
    args = ap.parse_args()
    if args.out is None:
        suffix = "" if args.type == "q4_0" else f"_{args.type}"
        args.out = os.path.join(ROOT, f"bench/results/issue20_quantize_at_load{suffix}.json")
    # bitsandbytes' formats have no llama.cpp twin: the peer file is --peer-type's (Q4_0, the same
    # 4.5 bits a weight).
    peer_type = args.type if not args.type.startswith("bitsandbytes") else args.peer_type
    offline = os.path.join(ROOT, ".cache/models",
                           os.path.basename(args.model).replace(".gguf", f"-llama-quantize-{peer_type}.gguf"))
    t = time.perf_counter()
    subprocess.run([QUANTIZE, "--pure", args.model, offline, peer_type.upper(), str(args.threads)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    quantize_s = time.perf_counter() - t
    configs = [("float_as_stored", args.model, []),
               (f"quantize_{args.type}_at_load", args.model, ["--quantize", args.type]),
               (f"llama_quantize_{peer_type}_file", offline, [])]
    runs = {name: [] for name, _, _ in configs}
    for _ in range(args.rounds):
        for name, model, extra in configs:
            row = serve_and_measure(model, extra, args)
            runs[name].append(row)
            print(name, json.dumps(row), flush=True)
    ours, file_, floats = (runs[configs[i][0]] for i in (1, 2, 0))
    rate = "decode_tokens_per_s_median"
    result = {
        "what": "issue 20 item 2: --quantize at load against the same weights quantized by llama-quantize",
        "model": os.path.relpath(args.model, ROOT), "type": args.type, "peer_type": peer_type,
        "threads": args.threads,
        "tokens": args.tokens, "reps": args.reps, "rounds": args.rounds,
        "llama_quantize_seconds": round(quantize_s, 2),
        "note": "llama-quantize --pure also quantizes token_embd (ours keeps the embedding table float)",
        "runs": runs,
        "summary": {
            "decode_at_load_over_llama_quantize_file": spread([a[rate] / b[rate] for a, b in zip(ours, file_)]),
            "decode_at_load_over_float": spread([a[rate] / b[rate] for a, b in zip(ours, floats)]),
            "rss_at_load_over_float": spread([a["rss_mib"] / b["rss_mib"] for a, b in zip(ours, floats)]),
            "peak_rss_at_load_over_llama_quantize_file": spread(
                [a["peak_rss_mib"] / b["peak_rss_mib"] for a, b in zip(ours, file_)]),
            "ready_s_at_load_over_llama_quantize_file": spread([a["ready_s"] / b["ready_s"] for a, b in zip(ours, file_)]),
        },
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result["summary"], indent=1))
    print("wrote", args.out)
    os.unlink(offline)


if __name__ == "__main__":
    main()
