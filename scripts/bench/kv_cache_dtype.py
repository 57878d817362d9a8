#!/usr/bin/env python3
"""KV cache dtypes (issue 20 item 3): for each --kv-cache-dtype, the bytes one token takes and so
the tokens that fit in the same RAM, and tg128@d1024 -- single-stream decode of 128 tokens after a
1024-token prompt -- against the fp32 cache, with our in-process text-generation-benchmark on the
same model and threads, the dtypes alternating within each round. Reports per dtype the decode
tokens/s of every round and the ratio dtype/fp32 per round (median, min, max). Writes
bench/results/issue20_kv_cache_dtype.json. Not part of `make test`.

  [CPU_ISA=avx2] .venv/bin/python scripts/bench/kv_cache_dtype.py [--rounds 3] [--threads 2]
      [--models models/SmolLM2-135M-Instruct.Q4_1.gguf .cache/models/llama7b4l-random-Q4_K_M.gguf]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BENCH = os.path.join(ROOT, "build/src/app/text-generation-benchmark")
LAUNCHER = os.path.join(ROOT, "build/src/app/text-generation-launcher")
DTYPES = ["fp32", "fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2"]


def plan(model, dtype):
    """--dry-run's KV bytes per token and KV budget (free memory's share) for this dtype."""
    out = subprocess.run([LAUNCHER, "--model-id", model, "--dry-run", "--json-output",
                          "--kv-cache-dtype", dtype], capture_output=True, text=True, check=True)
    p = json.loads(out.stdout.strip().splitlines()[-1])
    return p["memory"]["kv_bytes_per_token"], p["memory"]["kv_budget_bytes"]


def decode_rate(model, dtype, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([BENCH, "--model-id", model, "-b", "1", "-s", str(args.depth), "-d",
                        str(args.tokens), "-r", "1", "-w", "1", "--num-threads", str(args.threads),
                        "--kv-cache-dtype", dtype, "--output", f.name],
                       check=True, capture_output=True)
        doc = json.load(open(f.name))
    assert doc["kv_cache_dtype"] == dtype, doc["kv_cache_dtype"]
    return doc["cases"][0]["decode_tokens_per_second"]["mean"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=[
        os.path.join(ROOT, "models/SmolLM2-135M-Instruct.Q4_1.gguf"),
        os.path.join(ROOT, ".cache/models/llama7b4l-random-Q4_K_M.gguf")])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--depth", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/issue20_kv_cache_dtype.json"))
    args = ap.parse_args()
    results = {"what": f"tg{args.tokens}@d{args.depth}: single-stream decode tokens/s after a "
                       f"{args.depth}-token prompt, text-generation-benchmark, {args.threads} "
                       "threads, dtypes alternating within each round; capacity: KV tokens in "
                       "the same RAM (the fp32 plan's KV budget)",
               "rounds": args.rounds, "cpu_isa": os.environ.get("CPU_ISA", "auto"), "models": {}}
    for model in args.models:
        name = os.path.basename(model)
        per = {d: {} for d in DTYPES}
        budget = None
        for d in DTYPES:
            per_token, kv_budget = plan(model, d)
            budget = budget or kv_budget
            per[d]["kv_bytes_per_token"] = per_token
        for d in DTYPES:
            per[d]["tokens_in_fp32_budget"] = budget // per[d]["kv_bytes_per_token"]
            per[d]["capacity_vs_fp32"] = round(per[d]["tokens_in_fp32_budget"] /
                                               per["fp32"]["tokens_in_fp32_budget"], 2)
            per[d]["decode_tokens_per_s"] = []
        for r in range(args.rounds):
            order = DTYPES if r % 2 == 0 else list(reversed(DTYPES))
            for d in order:
                rate = decode_rate(model, d, args)
                per[d]["decode_tokens_per_s"].append(round(rate, 2))
                print(f"{name} round {r} {d}: {rate:.2f} tok/s", flush=True)
        for d in DTYPES:
            ratios = [a / b for a, b in zip(per[d]["decode_tokens_per_s"],
                                            per["fp32"]["decode_tokens_per_s"])]
            per[d]["decode_vs_fp32"] = {"median": round(statistics.median(ratios), 3),
                                        "min": round(min(ratios), 3), "max": round(max(ratios), 3)}
        results["models"][name] = {"kv_budget_bytes": budget, "dtypes": per}
        for d in DTYPES:
            p = per[d]
            print(f"{name} {d}: {p['kv_bytes_per_token']} B/token, capacity x{p['capacity_vs_fp32']}, "
                  f"decode/fp32 {p['decode_vs_fp32']}")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
