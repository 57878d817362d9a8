#!/usr/bin/env python3
"""Two builds of our engine on the same model and threads, alternating: pp512 (prefill of 512
tokens) and tg128 (decode of 128 tokens) at batch 1 through text-generation-benchmark, and the
ratio new/old per pair with its median and spread. For "same speed" claims about a refactor, where
a side by side against llama.cpp would add llama.cpp's own noise.

  scripts/bench/ab_binaries.py --old OLD/text-generation-benchmark --new build/src/app/... \
      --model smollm2-q4_1=models/SmolLM2-135M-Instruct.Q4_1.gguf [--model name=path ...] \
      --pairs 6 --threads 2 --out bench/results/ab.json
"""

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path


def run(binary, model, threads):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, "--model-id", model, "-b", "1", "-s", "512", "-d", "128",
                        "--runs", "2", "--warmups", "1", "--num-threads", str(threads),
                        "--output", out.name], check=True, capture_output=True)
        case = json.load(open(out.name))["cases"][0]
    return case["prefill_tokens_per_second"]["p50"], case["decode_tokens_per_second"]["p50"]


def spread(ratios):
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "pairs": ratios}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--model", action="append", required=True, help="name=path")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    result = {"old": args.old, "new": args.new, "threads": args.threads, "pairs": args.pairs,
              "rows": {}}
    for spec in args.model:
        name, path = spec.split("=", 1)
        pp, tg = [], []
        for p in range(args.pairs):
            # Alternate which build goes first, so drift in the machine falls on both.
            order = [("old", args.old), ("new", args.new)]
            if p % 2:
                order.reverse()
            tps = {label: run(binary, path, args.threads) for label, binary in order}
            pp.append(tps["new"][0] / tps["old"][0])
            tg.append(tps["new"][1] / tps["old"][1])
        result["rows"][name] = {"pp512_new_over_old": spread(pp), "tg128_new_over_old": spread(tg)}
        print(f"{name}: pp512 {statistics.median(pp):.3f} [{min(pp):.3f}, {max(pp):.3f}]  "
              f"tg128 {statistics.median(tg):.3f} [{min(tg):.3f}, {max(tg):.3f}]", flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
