#!/usr/bin/env python3
"""Constrained decoding benchmark: our server versus llama.cpp's llama-server on the same GGUF
(the default model), threads and prompts, in one run, alternating.

  decode   B concurrent greedy streams (B in --batch, default 1 16) of --max-tokens tokens, once
           unconstrained and once under a JSON schema that cannot close before --max-tokens
           (an array with minItems), per server per round. Reported: aggregate generated
           tokens/s over the decode span (first token of any stream to the last token of all) and
           the inter-token gap p50; ratios schema/free (aim >= 0.95 for ours) and ours/llama.cpp.
  compile  ours: the admission's grammar time from lm_grammar_compile_duration_seconds (a cold
           schema: a property renamed with a fresh nonce, so the cache misses; a cached one: the
           same schema again), for a small, a medium and the suite's largest schema. Both
           servers: the time to first token of a one-token request with the schema minus without
           (llama.cpp converts and parses its grammar on every request: it has no cache).
  coverage every schema of tests/e2e/schema_suite.py once, greedy, on both servers: refused (4xx/5xx
           and its message), completed and valid, completed and invalid (jsonschema with its format
           checker), cut by the token limit. llama.cpp's refusals and invalid outputs are listed.

Writes bench/results/issue19_grammar_speed.json. Build llama-server first
(scripts/bench/build_llama_cpp.sh); run on a quiet machine.

  .venv/bin/python scripts/bench/grammar_speed.py [--rounds 3] [--batch 1 16] [--threads 2]
"""
from __future__ import annotations

import argparse
import copy
import http.client
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid

import jsonschema

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "e2e"))
from schema_suite import PROMPT as SUITE_PROMPT  # noqa: E402
from schema_suite import SCHEMAS  # noqa: E402
from serving import (LLAMA_SERVER, MODEL, OURS, ROOT, free_port, percentile,  # noqa: E402
                     sse_stamps, token_event, wait_ready)

# One prompt per mode, the same for every stream: the two modes then differ only in the mask.
FREE_PROMPT = "Count from 1 to 300, separated by commas: 1, 2, 3, 4,"
SCHEMA_PROMPT = "Here is a JSON list of forty people, each with a name and a city:\n"


def people_schema(min_items):
    person = {"type": "object", "properties": {"name": {"type": "string"},
                                               "city": {"type": "string"}},
              "required": ["name", "city"]}
    return {"type": "object", "properties": {"people": {"type": "array", "items": person,
                                                        "minItems": min_items}},
            "required": ["people"]}


class Server:
    def __init__(self, kind, threads, slots):
        self.kind = kind
        self.port = free_port()
        if kind == "ours":
            cmd = [OURS, "--model-id", MODEL, "--hostname", "127.0.0.1", "--port", str(self.port),
                   "--num-threads", str(threads), "--max-concurrent-requests", "1024"]
        else:
            cmd = [LLAMA_SERVER, "-m", MODEL, "--host", "127.0.0.1", "--port", str(self.port),
                   "-t", str(threads), "-tb", str(threads), "-np", str(slots),
                   "-c", str(slots * 1024), "--cont-batching", "--no-webui"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(self.port, "/health")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def body(self, prompt, max_tokens, schema, stream):
        if self.kind == "ours":
            params = {"max_new_tokens": max_tokens, "details": True}
            if schema is not None:
                params["grammar"] = {"type": "json", "value": schema}
            return "/generate_stream" if stream else "/generate", {"inputs": prompt,
                                                                   "parameters": params}
        body = {"prompt": prompt, "n_predict": max_tokens, "stream": stream, "temperature": 0.0,
                "cache_prompt": False}
        if schema is not None:
            body["json_schema"] = schema
        return "/completion", body

    def post(self, path, body):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        conn.close()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, {"raw": raw.decode(errors="replace")[:300]}

    def stream(self, prompt, max_tokens, schema):
        """(start, [arrival of each token]) for one streamed greedy completion."""
        path, body = self.body(prompt, max_tokens, schema, stream=True)
        status, start, stamps = sse_stamps(self.port, path, body,
                                           token_event("ours" if self.kind == "ours" else "llama"))
        if status != 200:
            raise RuntimeError(f"{self.kind}: HTTP {status}")
        return start, stamps

    def metrics(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
        conn.close()
        out = {}
        for line in text.splitlines():
            m = re.match(r"^(\S+) (\S+)$", line)
            if m and not line.startswith("#"):
                out[m.group(1)] = float(m.group(2))
        return out


def decode_run(server, batch, max_tokens, constrained):
    schema = people_schema(40) if constrained else None
    results, lock = [], threading.Lock()

    def client():
        prompt = SCHEMA_PROMPT if constrained else FREE_PROMPT
        r = server.stream(prompt, max_tokens, schema)
        with lock:
            results.append(r)

    threads = [threading.Thread(target=client) for _ in range(batch)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    firsts = [s[1][0] for s in results if s[1]]
    lasts = [s[1][-1] for s in results if s[1]]
    decoded = sum(max(len(s[1]) - 1, 0) for s in results)
    gaps = [b - a for s in results for a, b in zip(s[1], s[1][1:])]
    span = max(lasts) - min(firsts)
    return {"tokens": sum(len(s[1]) for s in results), "decode_tokens_per_s": decoded / span,
            "itl_p50_ms": 1000 * percentile(gaps, 50)}


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def compile_schemas():
    largest = max(SCHEMAS.items(), key=lambda kv: len(json.dumps(kv[1])))
    return {"small: person": SCHEMAS["person"], "medium: order": SCHEMAS["order"],
            f"large: {largest[0]}": largest[1]}


def renamed(schema, nonce):
    """The schema with its first property renamed: a grammar the server has not seen."""
    s = copy.deepcopy(schema)
    props = s.get("properties")
    if not props:
        return {"type": "object", "properties": {f"k{nonce}": s}, "required": [f"k{nonce}"]}
    first = next(iter(props))
    s["properties"] = {(f"{first}_{nonce}" if k == first else k): v for k, v in props.items()}
    if "required" in s:
        s["required"] = [f"{first}_{nonce}" if k == first else k for k in s["required"]]
    return s


def ttft(server, prompt, schema):
    start, stamps = server.stream(prompt, 1, schema)
    return stamps[0] - start if stamps else float("nan")


def compile_round(server, name, schema):
    prompt = SUITE_PROMPT.format(name=name)
    out = {}
    if server.kind == "ours":
        cold = renamed(schema, uuid.uuid4().hex[:8])
        for label, key in (("miss", "compile_cold_ms"), ("hit", "compile_cached_ms")):
            before = server.metrics()
            status, _ = server.post(*server.body(prompt, 1, cold, stream=False))
            after = server.metrics()
            assert status == 200, status

            def delta(stat):
                series = f'lm_grammar_compile_duration_seconds_{stat}{{cache="{label}"}}'
                return after.get(series, 0) - before.get(series, 0)

            assert delta("count") == 1, (label, delta("count"))
            out[key] = 1000 * delta("sum")
    free = ttft(server, prompt, None)
    constrained = ttft(server, prompt, renamed(schema, uuid.uuid4().hex[:8]))
    out["ttft_overhead_ms"] = 1000 * (constrained - free)
    return out


def coverage(server, max_tokens):
    rows = {}
    for name, schema in SCHEMAS.items():
        prompt = SUITE_PROMPT.format(name=name.replace("/", " ").replace("_", " "))
        status, payload = server.post(*server.body(prompt, max_tokens, schema, stream=False))
        if status != 200:
            rows[name] = {"outcome": "refused", "status": status,
                          "why": str(payload.get("error", payload))[:200]}
            continue
        if server.kind == "ours":
            text = payload["generated_text"]
            cut = payload["details"]["finish_reason"] == "length"
        else:
            text = payload["content"]
            cut = payload.get("stop_type") == "limit" or bool(payload.get("truncated"))
        if cut:
            rows[name] = {"outcome": "cut"}
            continue
        try:
            jsonschema.validate(json.loads(text), schema,
                                format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            rows[name] = {"outcome": "valid"}
        except (ValueError, jsonschema.ValidationError) as e:
            rows[name] = {"outcome": "invalid", "output": text[:300], "why": str(e)[:200]}
    counts = {k: sum(r["outcome"] == k for r in rows.values())
              for k in ("valid", "invalid", "refused", "cut")}
    return {"counts": counts,
            "not_valid": {n: r for n, r in rows.items() if r["outcome"] in ("invalid", "refused")}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--skip-coverage", action="store_true")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/issue19_grammar_speed.json"))
    args = ap.parse_args()
    for path in (OURS, LLAMA_SERVER, MODEL):
        if not os.path.exists(path):
            sys.exit(f"missing {path} (make build; scripts/bench/build_llama_cpp.sh)")

    kinds = ["ours", "llama.cpp"]
    slots = max(args.batch)
    decode = {k: {b: {"free": [], "schema": [], "free_itl": [], "schema_itl": []}
                  for b in args.batch} for k in kinds}
    compile_ = {k: {} for k in kinds}
    for rnd in range(args.rounds):
        for kind in (kinds if rnd % 2 == 0 else kinds[::-1]):
            server = Server("ours" if kind == "ours" else "llama", args.threads, slots)
            try:
                decode_run(server, 1, 8, False)  # warm-up
                for b in args.batch:
                    for constrained in (False, True):
                        r = decode_run(server, b, args.max_tokens, constrained)
                        mode = "schema" if constrained else "free"
                        decode[kind][b][mode].append(r["decode_tokens_per_s"])
                        decode[kind][b][f"{mode}_itl"].append(r["itl_p50_ms"])
                        print(f"round {rnd} {kind:9s} batch {b:2d} {mode:6s} "
                              f"{r['decode_tokens_per_s']:7.1f} tok/s  itl p50 "
                              f"{r['itl_p50_ms']:.1f} ms  ({r['tokens']} tokens)", flush=True)
                for name, schema in compile_schemas().items():
                    r = compile_round(server, name, schema)
                    for key, v in r.items():
                        compile_[kind].setdefault(name, {}).setdefault(key, []).append(v)
                    print(f"round {rnd} {kind:9s} {name}: " +
                          ", ".join(f"{k} {v:.1f}" for k, v in r.items()), flush=True)
            finally:
                server.stop()

    result = {"what": "constrained decoding, ours vs llama-server, default model Q4_1 GGUF",
              "machine": {"cpu": platform.processor() or platform.machine(),
                          "cores": os.cpu_count(), "threads": args.threads},
              "rounds": args.rounds, "max_tokens": args.max_tokens, "decode": {}, "compile": {}}
    for b in args.batch:
        row = {}
        for kind in kinds:
            d = decode[kind][b]
            row[kind] = {"free_tokens_per_s": spread(d["free"]),
                         "schema_tokens_per_s": spread(d["schema"]),
                         "free_itl_p50_ms": spread(d["free_itl"]),
                         "schema_itl_p50_ms": spread(d["schema_itl"]),
                         "schema_over_free": spread([s / f for s, f in zip(d["schema"], d["free"])])}
        row["ours_over_llama_cpp_schema"] = spread(
            [o / l for o, l in zip(decode["ours"][b]["schema"], decode["llama.cpp"][b]["schema"])])
        row["ours_over_llama_cpp_free"] = spread(
            [o / l for o, l in zip(decode["ours"][b]["free"], decode["llama.cpp"][b]["free"])])
        result["decode"][f"batch_{b}"] = row
    for kind in kinds:
        result["compile"][kind] = {name: {k: spread(v) for k, v in r.items()}
                                   for name, r in compile_[kind].items()}
    if not args.skip_coverage:
        result["coverage"] = {}
        for kind in kinds:
            server = Server("ours" if kind == "ours" else "llama", args.threads, slots)
            try:
                result["coverage"][kind] = coverage(server, 160)
            finally:
                server.stop()
            print(f"coverage {kind}: {result['coverage'][kind]['counts']}", flush=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({k: result[k] for k in ("decode",)}, indent=1)[:3000])
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
