#!/usr/bin/env python3
"""Server configurations of ours side by side on speculation's tasks: two builds (before/after a
change), speculation on/off/adaptive, alternating, single-stream greedy chat completions.

The tasks and the streamed decode rate are speculate_vs_llama_cpp.py's (summarise, rewrite, code,
quote, free; decode tokens/s = the tokens after the first over the time from the first content chunk
to the last). Every configuration is started once, warmed up, then each round asks each the
same requests in turn (the order reversed every other round). Reports per task each one's
median tokens/s (with --clients N, N streams at once and the aggregate rate) and its ratio to
the first configuration (median [min, max] over the rounds),
and its proposed/accepted tokens from /metrics. No llama.cpp: for our own changes.

  .venv/bin/python scripts/bench/speculate_ab.py --out F.json \\
      --config plain=build/src/app/text-generation-launcher \\
      --config 'always=/tmp/new/text-generation-launcher --speculate 4 --adaptive-speculation false'
Environment: CPU_ISA (default avx2), as speculate_vs_llama_cpp.py. Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speculate_vs_llama_cpp as sv  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", action="append", required=True, help="NAME=LAUNCHER [ARGS...]")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=192)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--clients", type=int, default=1,
                    help="each request sent by N clients at once; aggregate decode rate")
    ap.add_argument("--model", type=Path, default=sv.MODEL)
    ap.add_argument("--tasks", nargs="+", default=["rewrite", "code", "quote", "free"])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    prompts = sv.tasks()
    env = {**os.environ, "CPU_ISA": os.environ.get("CPU_ISA", "avx2")}
    servers = {}
    try:
        for spec in args.config:
            name, command = spec.split("=", 1)
            binary, *extra = command.split()
            port = sv.free_port()
            cmd = [binary, "--model-id", str(args.model), "--port", str(port), "--hostname", "127.0.0.1",
                   "--num-threads", str(args.threads), "--max-total-tokens", "4096",
                   "--max-input-tokens", "3072", *extra]  # fmt: skip
            servers[name] = sv.Server(name, cmd, port, env)
        for server in servers.values():
            for task in args.tasks:
                server.stream(prompts[task], 32)
        rates = {t: {n: [] for n in servers} for t in args.tasks}
        accepted = {t: {n: [0.0, 0.0] for n in servers} for t in args.tasks}
        for r in range(args.rounds):
            order = list(servers) if r % 2 == 0 else list(reversed(servers))
            for task in args.tasks:
                for name in order:
                    before = sv.speculation_counters(servers[name].port)
                    with ThreadPoolExecutor(args.clients) as pool:
                        answers = list(pool.map(lambda _: servers[name].stream(prompts[task], args.tokens),
                                                range(args.clients)))  # fmt: skip
                    after = sv.speculation_counters(servers[name].port)
                    rates[task][name].append(sv.aggregate_decode_rate(answers))
                    for i, key in enumerate(("proposed", "accepted")):
                        k = f"tgi_speculative_{key}_tokens"
                        accepted[task][name][i] += after.get(k, 0) - before.get(k, 0)
    finally:
        for server in servers.values():
            server.stop()
    base = list(servers)[0]
    result = {"what": "speculation tasks, our server configurations alternating (speculate_ab.py)",
              "model": str(args.model), "isa": env["CPU_ISA"], "threads": args.threads,
              "rounds": args.rounds, "new_tokens": args.tokens, "clients": args.clients,
              "configs": args.config,
              "tasks": {}}  # fmt: skip
    for task in args.tasks:
        row = {}
        for name in servers:
            ratios = [a / b for a, b in zip(rates[task][name], rates[task][base])]
            row[name] = {"decode_tokens_per_second": [round(x, 1) for x in rates[task][name]],
                         f"over_{base}": sv.spread(ratios),
                         "proposed_accepted": accepted[task][name]}  # fmt: skip
            print(f"{task:8s} {name:18s} {statistics.median(rates[task][name]):6.0f} tok/s "
                  f"x{row[name][f'over_{base}']}  proposed/accepted {accepted[task][name]}")  # fmt: skip
        result["tasks"][task] = row
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print("wrote", args.out)


if __name__ == "__main__":
    main()
