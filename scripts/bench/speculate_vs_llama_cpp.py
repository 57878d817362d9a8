#!/usr/bin/env python3
"""Speculation side by side with llama.cpp's: single-stream greedy chat completions on the same
GGUF, threads and instruction-set level, with and without speculation, in one run. Proposals
from n-gram prompt lookup, or with --draft from a draft model.

Servers (all started once, then every round asks each the same requests in turn):
  ours        text-generation-launcher
  ours+spec   the same with --speculate N (prompt-lookup n-grams, TGI's flag)
  llama       llama.cpp's llama-server
  llama+spec  the same with --spec-type ngram-simple (its prompt-lookup n-grams: a 3-token
              lookup as ours, --spec-ngram-simple-size-n 3 (its default 12 rarely matches in a
              chat answer), draft length --spec-ngram-simple-size-m N)
With --draft DRAFT.gguf the two "+spec" servers draft with that model instead: ours with
--speculative-model-id DRAFT --speculate N, llama.cpp with -md DRAFT --spec-type draft-simple
--spec-draft-n-max N -td THREADS. --model picks the target (default: the default model; e.g.
an F16 requantization of it, scripts/bench/cpu_side_by_side.py makes them, drafted for by the
default Q4_1 file).
Tasks, input-grounded from real text in this repository, and one free chat:
  summarise "summarise this document" over a README section (Connections, as of 6f65fd1: its
            first 3000 characters, cut mid-sentence; kept so that results stay comparable)
  rewrite   "rewrite this passage exactly" over a README paragraph
  code      "return this file with one change" over a C++ header of the repo (the proposer's
            own, src/engine/ngram_proposer.h as of bcd4bc8)
  quote     "answer with exact quotes" over a passage of docs/architecture.md
  free      a short story with no source text
With --clients N each request is sent by N clients at once and the rates are aggregates (all
streams' tokens over the wall time of them all; decode: the tokens after each stream's first over
the span from the earliest first chunk to the latest last one).
Each request goes through /v1/chat/completions (each server applies the GGUF's chat template),
temperature 0, `--tokens` new tokens, streamed: decode tokens/s = the tokens after the first over
the time from the first content chunk to the last (prefill and HTTP set-up left out), and request
tokens/s = all of them over the whole request. One unrecorded warm-up round (`--warmup`), then
the rounds, the server order reversed every other one. Reports per task the tokens/s of each server,
the speedups (spec / plain) for both engines and ours+spec / llama+spec, with [min, max] over the
rounds, and acceptance: ours from /metrics (tgi_speculative_*), llama.cpp from its response
`timings` (draft_n, draft_n_accepted) when present. Writes
bench/results/issue23_speculate_vs_llama_cpp.json (with --draft: issue23_draft_vs_llama_cpp.json).
Not part of `make test`.

  .venv/bin/python scripts/bench/speculate_vs_llama_cpp.py [--rounds 3] [--tokens 192]
      [--speculate 4] [--isa avx2] [--threads 2] [--model M.gguf] [--draft D.gguf]
      [--clients N] [--always]
Ours speculates adaptively (the server's default) unless --always (every decode step proposes).

llama.cpp: scripts/bench/build_llama_cpp.sh --isa LEVEL (its build-LEVEL/bin/llama-server); ours
runs capped at the same level (CPU_ISA).
"""

from __future__ import annotations

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAUNCHER = ROOT / "build/src/app/text-generation-launcher"
MODEL = ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"
CODE_TASK_COMMIT, CODE_TASK_FILE = "bcd4bc87660bd262ffa4865fa7356f7b8d5c6f62", "src/engine/ngram_proposer.h"
SUMMARY_TASK_COMMIT = "6f65fd1743f181d2ea5d0032e3541cbaa31ca0a4"


def paragraph(path: Path, starts_with: str, max_chars: int = 900) -> str:
    """The paragraph of `path` that starts with `starts_with` (real text of this repository)."""
    text = path.read_text()
    i = text.index(starts_with)
    end = text.find("\n\n", i)
    return text[i : end if end > 0 else None][:max_chars]


def pinned(commit: str, path: str) -> str:
    """`path` as of `commit`: the file changes, and a changed prompt would make old and new
    results incomparable."""
    return subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


def section(commit: str, path: str, heading: str, max_chars: int) -> str:
    """The first `max_chars` characters of the Markdown section of `path` as of `commit` (pinned)
    that starts with the line `heading`, up to the next heading of its level or above."""
    text = pinned(commit, path)
    i = text.index("\n" + heading + "\n") + 1
    level = len(heading) - len(heading.lstrip("#"))
    ends = re.compile(r"^#{1,%d} " % level, re.M)
    end = ends.search(text, i + len(heading))
    return text[i : end.start() if end else None][:max_chars].strip()


def tasks() -> dict[str, str]:
    readme = paragraph(ROOT / "README.md", "**KV cache dtype**")
    document = section(SUMMARY_TASK_COMMIT, "README.md", "## Connections (slow and stalled clients)",
                       3000)
    # The code task's file as it was when its figures began (bcd4bc8): the header has changed since.
    code = pinned(CODE_TASK_COMMIT, CODE_TASK_FILE)
    arch = paragraph(ROOT / "docs/architecture.md", "## Numerics", 1200)
    return {
        "summarise": f"Summarise the following document in one paragraph.\n\n{document}",
        "rewrite": f"Rewrite the following text exactly as it is, word for word.\n\n{readme}",
        "code": "Return the following C++ header unchanged except that the constant "
        "kMaxProposalNgram becomes 4. Output only the file.\n\n" + code,
        "quote": "Using only exact quotes from the passage below, explain how the weights are "
        f"stored in memory.\n\n{arch}",
        "free": "Write a short story about a robot who learns to paint.",
    }


def speculation_counters(port: int) -> dict[str, float]:
    """Our server's tgi_speculative_* counters from /metrics."""
    out = {}
    for line in request(port, "GET", "/metrics")[1].decode().splitlines():
        m = re.match(r"^(tgi_speculative_\w+) (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def aggregate_decode_rate(answers: list[dict]) -> float:
    """Concurrent streams' decode tokens/s: the tokens past each stream's first over the span
    from the earliest first content chunk to the latest last one."""
    span = max(a["last"] for a in answers) - min(a["first"] for a in answers)
    return sum(a["tokens"] - 1 for a in answers) / span


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port: int, method: str, path: str, body=None, timeout=900):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request(method, path, json.dumps(body) if body is not None else None,
                 {"Content-Type": "application/json"})  # fmt: skip
    resp = conn.getresponse()
    return resp.status, resp.read()


class Server:
    def __init__(self, name: str, cmd: list[str], port: int, env: dict):
        self.name, self.port = name, port
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                if self.chat("Hi", 2)[0] == 200:
                    return
            except OSError:
                time.sleep(0.3)
        self.proc.kill()
        raise RuntimeError(f"{name} did not become ready")

    def chat(self, prompt: str, tokens: int):
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}],
                "max_tokens": tokens, "temperature": 0, "seed": 1}  # fmt: skip
        return request(self.port, "POST", "/v1/chat/completions", body)

    def stream(self, prompt: str, tokens: int) -> dict:
        """A streamed chat completion: its text, token count, and the times of the first and
        last content chunks after the request was sent."""
        body = {"model": "m", "messages": [{"role": "user", "content": prompt}],
                "max_tokens": tokens, "temperature": 0, "seed": 1, "stream": True,
                "stream_options": {"include_usage": True}}  # fmt: skip
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=900)
        start = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200, (self.name, resp.read()[:300])
        text, first, last, usage, timings = [], None, None, None, None
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            usage = event.get("usage") or usage
            timings = event.get("timings") or timings
            for choice in event.get("choices", []):
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    now = time.perf_counter() - start
                    first = now if first is None else first
                    last = now
                    text.append(piece)
        total = time.perf_counter() - start
        return {"text": "".join(text), "tokens": usage["completion_tokens"], "first": first,
                "last": last, "total": total, "timings": timings}  # fmt: skip

    def counters(self) -> dict[str, float]:
        return speculation_counters(self.port) if self.name.startswith("ours") else {}

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


def start_all(args) -> list[Server]:
    llama_bin = ROOT / f".cache/llama.cpp/build-{args.isa}/bin/llama-server"
    if not llama_bin.exists():
        sys.exit(f"{llama_bin} missing: run scripts/bench/build_llama_cpp.sh --isa {args.isa}")
    ours_env = {**os.environ, "CPU_ISA": args.isa}
    servers = []
    ours_spec = ["--speculate", str(args.speculate)]
    if args.always:
        ours_spec += ["--adaptive-speculation", "false"]
    llama_spec = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3",
                  "--spec-ngram-simple-size-m", str(args.speculate)]  # fmt: skip
    if args.draft:
        ours_spec += ["--speculative-model-id", str(args.draft)]
        llama_spec = ["-md", str(args.draft), "--spec-type", "draft-simple", "--spec-draft-n-max",
                      str(args.speculate), "-td", str(args.threads)]  # fmt: skip
    for name, extra in (("ours", []), ("ours+spec", ours_spec)):
        port = free_port()
        cmd = [str(LAUNCHER), "--model-id", str(args.model), "--port", str(port), "--hostname",
               "127.0.0.1", "--num-threads", str(args.threads), "--max-total-tokens", "4096",
               "--max-input-tokens", "3072", *extra]  # fmt: skip
        servers.append(Server(name, cmd, port, ours_env))
    for name, extra in (("llama", []), ("llama+spec", llama_spec)):
        port = free_port()
        cmd = [str(llama_bin), "-m", str(args.model), "--port", str(port), "--host", "127.0.0.1",
               "-t", str(args.threads), "-tb", str(args.threads), "-c", str(4096 * args.clients),
               "-np", str(args.clients),
               "--jinja", *extra]  # fmt: skip
        servers.append(Server(name, cmd, port, dict(os.environ)))
    return servers


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}  # fmt: skip


def main() -> int:
    prompts = tasks()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1, help="unrecorded rounds first")
    ap.add_argument("--tokens", type=int, default=192)
    ap.add_argument("--speculate", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--isa", default="avx2", choices=["avx2", "avx512", "avx512-vnni", "avx512-bf16"])
    ap.add_argument("--clients", type=int, default=1,
                    help="concurrent streams of each request (> 1: aggregate tokens/s)")
    ap.add_argument("--always", action="store_true",
                    help="ours proposes in every decode step (--adaptive-speculation false)")
    ap.add_argument("--model", type=Path, default=MODEL, help="the target GGUF")
    ap.add_argument("--draft", type=Path, help="a draft model GGUF (else n-gram proposals)")
    ap.add_argument("--tasks", nargs="+", choices=list(prompts),
                    help="only these tasks (default: all; the default --out then names them)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    args.model, args.draft = args.model.resolve(), args.draft.resolve() if args.draft else None
    name = "issue23_draft_vs_llama_cpp" if args.draft else "issue23_speculate_vs_llama_cpp"
    suffix = (f"_{args.clients}clients" if args.clients > 1 else "") + ("_always" if args.always else "")
    suffix += "".join(f"_{t}" for t in args.tasks or [])
    args.out = args.out or ROOT / "bench/results" / f"{name}{suffix}.json"
    if args.tasks:
        prompts = {t: prompts[t] for t in args.tasks}
    servers = start_all(args)
    rates: dict[str, dict[str, list[float]]] = {t: {s.name: [] for s in servers} for t in prompts}
    decode: dict[str, dict[str, list[float]]] = {t: {s.name: [] for s in servers} for t in prompts}
    texts: dict[str, dict[str, set]] = {t: {s.name: set() for s in servers} for t in prompts}
    drafts: dict[str, dict[str, list[int]]] = {t: {"drafted": [], "accepted": []} for t in prompts}
    ours_spec: dict[str, dict[str, float]] = {t: {"proposed": 0.0, "accepted": 0.0} for t in prompts}
    try:
        for r in range(args.warmup + args.rounds):
            recorded = r >= args.warmup
            for task, prompt in prompts.items():
                order = servers if r % 2 == 0 else list(reversed(servers))
                for s in order:
                    before = s.counters()
                    if args.clients > 1:
                        start = time.perf_counter()
                        with ThreadPoolExecutor(args.clients) as pool:
                            answers = list(pool.map(lambda _: s.stream(prompt, args.tokens),
                                                    range(args.clients)))  # fmt: skip
                        wall = time.perf_counter() - start
                        answer = answers[0]
                    else:
                        answers = [s.stream(prompt, args.tokens)]
                        answer = answers[0]
                    if not recorded:
                        continue
                    n = answer["tokens"]
                    if args.clients > 1:
                        # Aggregate: every stream's tokens over the wall time of them all, and
                        # after the first token: tokens past each first over the span from the
                        # earliest first content chunk to the latest last one.
                        total = sum(a["tokens"] for a in answers)
                        rates[task][s.name].append(total / wall)
                        decode[task][s.name].append(aggregate_decode_rate(answers))
                    else:
                        rates[task][s.name].append(n / answer["total"])
                        # Decode only: the tokens after the first over the time from the first
                        # content chunk to the last (prefill and the HTTP round trip left out).
                        decode[task][s.name].append((n - 1) / (answer["last"] - answer["first"]))
                    texts[task][s.name].update(a["text"] for a in answers)
                    if s.name == "ours+spec":
                        after = s.counters()
                        for key in ("proposed", "accepted"):
                            metric = f"tgi_speculative_{key}_tokens"
                            ours_spec[task][key] += after.get(metric, 0) - before.get(metric, 0)
                    if s.name == "llama+spec" and answer["timings"]:
                        drafts[task]["drafted"].append(answer["timings"].get("draft_n", 0))
                        drafts[task]["accepted"].append(answer["timings"].get("draft_n_accepted", 0))
                if recorded:
                    print(task, {k: round(v[-1], 1) for k, v in decode[task].items()}, flush=True)
    finally:
        for s in servers:
            s.stop()
    result = {
        "what": "issue 23: draft-model speculation, ours (--speculative-model-id) vs llama.cpp's "
        "llama-server (-md, --spec-type draft-simple), single-stream greedy chat completions, "
        "alternating" if args.draft else "issue 23: n-gram speculation, ours (--speculate) vs "
        "llama.cpp's llama-server (--spec-type ngram-simple), single-stream greedy chat "
        "completions, alternating",
        "model": str(args.model.relative_to(ROOT)),
        "draft": str(args.draft.relative_to(ROOT)) if args.draft else None,
        "isa": args.isa, "threads": args.threads, "clients": args.clients,
        "ours_adaptive_speculation": not args.always,
        "new_tokens": args.tokens, "rounds": args.rounds, "draft_length": args.speculate,
        "tasks": {},
    }  # fmt: skip
    for task in prompts:
        rt, dt = rates[task], decode[task]
        per_round = lambda a, b, t=dt: [x / y for x, y in zip(t[a], t[b])]  # noqa: E731
        entry = {
            "decode_tokens_per_second": {k: [round(x, 1) for x in v] for k, v in dt.items()},
            "request_tokens_per_second": {k: [round(x, 1) for x in v] for k, v in rt.items()},
            "speedup_ours": spread(per_round("ours+spec", "ours")),
            "speedup_llama_cpp": spread(per_round("llama+spec", "llama")),
            "ours_spec_over_llama_spec": spread(per_round("ours+spec", "llama+spec")),
            "ours_over_llama_plain": spread(per_round("ours", "llama")),
            "request_speedup_ours": spread(per_round("ours+spec", "ours", rt)),
            "request_speedup_llama_cpp": spread(per_round("llama+spec", "llama", rt)),
            "ours_same_text_with_and_without": texts[task]["ours"] == texts[task]["ours+spec"],
            "llama_same_text_with_and_without": texts[task]["llama"] == texts[task]["llama+spec"],
            "ours_proposed_accepted": [ours_spec[task]["proposed"], ours_spec[task]["accepted"]],
            "llama_drafted_accepted": [sum(drafts[task]["drafted"]), sum(drafts[task]["accepted"])],
        }
        result["tasks"][task] = entry
        print(task, {k: v for k, v in entry.items() if k.startswith(("speedup", "ours_spec", "ours_over"))})
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
