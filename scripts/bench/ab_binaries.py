#!/usr/bin/env python3
"""Two builds of our engine on the same model and threads, alternating: pp512 (prefill of 512
tokens) and tg128 (decode of 128 tokens) at batch 1 through text-generation-benchmark, and the
ratio new/old per pair with its median and spread. For "same speed" claims about a refactor, where
a side by side against llama.cpp would add llama.cpp's own noise. --prompt-tokens N measures ppN
instead of pp512; --decode-tokens 0 measures the prefill alone (no tg rows). The environment
passes through (e.g. CPU_ISA=avx2 caps both builds); --old-isa / --new-isa cap one side each
(--cpu-isa), so one build against itself at two kernel levels is an A/B too.

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


def run(binary, isa, model, threads, prompt, decode):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([binary, "--model-id", model, "-b", "1", "-s", str(prompt), "-d", str(max(1, decode)),
                        "--runs", "2", "--warmups", "1", "--num-threads", str(threads),
                        "--output", out.name] + (["--cpu-isa", isa] if isa else []),
                       check=True, capture_output=True)
        case = json.load(open(out.name))["cases"][0]
    return case["prefill_tokens_per_second"]["p50"], case["decode_tokens_per_second"]["p50"]


def spread(ratios):
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios),
            "pairs": ratios}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--old-isa", help="--cpu-isa for the old side (default: the environment's)")
    ap.add_argument("--new-isa", help="--cpu-isa for the new side")
    ap.add_argument("--model", action="append", required=True, help="name=path")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--decode-tokens", type=int, default=128)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    result = {"old": args.old, "new": args.new, "old_isa": args.old_isa, "new_isa": args.new_isa,
              "threads": args.threads, "pairs": args.pairs, "rows": {}}
    for spec in args.model:
        name, path = spec.split("=", 1)
        pp, tg = [], []
        for p in range(args.pairs):
            # Alternate which build goes first, so drift in the machine falls on both.
            order = [("old", args.old, args.old_isa), ("new", args.new, args.new_isa)]
            if p % 2:
                order.reverse()
            tps = {label: run(binary, isa, path, args.threads, args.prompt_tokens, args.decode_tokens)
                   for label, binary, isa in order}
            for label in ("old", "new"):
                result["rows"].setdefault(name, {}).setdefault(f"{label}_tokens_per_second", []).append(
                    {"prefill": tps[label][0], "decode": tps[label][1] if args.decode_tokens else None})
            pp.append(tps["new"][0] / tps["old"][0])
            if args.decode_tokens:
                tg.append(tps["new"][1] / tps["old"][1])
        pp_name, tg_name = f"pp{args.prompt_tokens}", f"tg{args.decode_tokens}"
        result["rows"][name][f"{pp_name}_new_over_old"] = spread(pp)
        line = f"{name}: {pp_name} {statistics.median(pp):.3f} [{min(pp):.3f}, {max(pp):.3f}]"
        if args.decode_tokens:
            result["rows"][name][f"{tg_name}_new_over_old"] = spread(tg)
            line += f"  {tg_name} {statistics.median(tg):.3f} [{min(tg):.3f}, {max(tg):.3f}]"
        print(line, flush=True)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
