#!/usr/bin/env python3
"""The structured-output suite at full count: every JSON schema and regex of
tests/e2e/schema_suite.py with --samples seeded samples each (temperature 1.0) on our server,
reporting per grammar whether it was enforced (completed outputs that validate / violate, outputs
cut by max_new_tokens) or refused with a 4xx, and the totals; writes bench/results/ JSON.

  .venv/bin/python scripts/bench/schema_suite.py --samples 25 [--url http://127.0.0.1:8080]
      [--only json:calendar_event regex:iso_date ... --out bench/results/<subset>.json]

Without --url it starts build/src/app/text-generation-launcher on the default model.
"""
from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests/e2e"))
from schema_suite import REGEXES, SCHEMAS, run_case  # noqa: E402


def start_server(port: int) -> subprocess.Popen:
    proc = subprocess.Popen([str(ROOT / "build/src/app/text-generation-launcher"), "--model-id",
                             str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"), "--port",
                             str(port), "--hostname", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).ok:
                return proc
        except requests.RequestException:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=25)
    ap.add_argument("--url")
    ap.add_argument("--port", type=int, default=18555)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--only", nargs="+", metavar="KIND:NAME",
                    help="run only these grammars (as named in the results: json:person)")
    ap.add_argument("--out", default=str(ROOT / "bench/results/issue19_schema_suite.json"))
    args = ap.parse_args()
    cases = [("json", n, s) for n, s in SCHEMAS.items()] + [("regex", n, r) for n, r in REGEXES.items()]
    if args.only:
        unknown = set(args.only) - {f"{k}:{n}" for k, n, _ in cases}
        if unknown:
            raise SystemExit(f"no such grammars: {sorted(unknown)}")
        cases = [c for c in cases if f"{c[0]}:{c[1]}" in args.only]
    proc = None if args.url else start_server(args.port)
    url = args.url or f"http://127.0.0.1:{args.port}"

    def post(body):
        r = requests.post(url + "/generate", json=body, timeout=600)
        return r.status_code, r.json()

    seeds = range(1000, 1000 + args.samples)
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(args.concurrency) as pool:
            outs = list(pool.map(lambda c: run_case(post, *c, seeds=seeds), cases))
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=30)
    per_case = {f"{k}:{n}": o for (k, n, _), o in zip(cases, outs)}
    totals = {}
    for kind in ("json", "regex"):
        rows = [o for (k, _, _), o in zip(cases, outs) if k == kind]
        totals[kind] = {
            "grammars": len(rows),
            "enforced": sum(1 for o in rows if not o["refused"]),
            "refused": sum(1 for o in rows if o["refused"]),
            "samples_valid": sum(o["valid"] for o in rows),
            "samples_violating": sum(len(o["invalid"]) for o in rows),
            "samples_truncated": sum(o["truncated"] for o in rows),
            "grammars_with_a_violation": sum(1 for o in rows if o["invalid"]),
        }
    result = {"samples_per_grammar": args.samples, "seconds": round(time.monotonic() - started, 1),
              "machine": platform.processor() or platform.machine(), "totals": totals,
              "refused": {k: o["refused"] for k, o in per_case.items() if o["refused"]},
              "violations": {k: o["invalid"] for k, o in per_case.items() if o["invalid"]},
              "per_grammar": {k: {x: (len(v) if x == "invalid" else v) for x, v in o.items()}
                              for k, o in per_case.items()}}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(totals, indent=1))
    print("refused:", json.dumps(result["refused"], indent=1))


if __name__ == "__main__":
    main()
