#!/usr/bin/env python3
"""Prompt-lookup proposal rules replayed offline on speculation's tasks: how many proposals each
rule gets accepted and how many tokens a step would advance, without running the model per rule.

Greedy decoding's output does not depend on the proposals (verification keeps exactly the tokens
the model would have chosen), so one plain run per task gives every rule's outcome: at each step
the rule proposes from the prompt and the output so far, the longest prefix equal to the next
output tokens is accepted, and the step advances by that plus one. The proposal limit follows
the server's (engine/ngram_proposer.h: up to --speculate, two more after a fully accepted step,
one fewer after a rejection); the governor's on/off choice is left out (every step proposes).

Rules: `ngram3` the fixed 3-token lookup (latest occurrence of the last 3, else 2, 1 tokens; the
server's rule before session 30), `longest-C` the occurrence matching the sequence's end
furthest back, compared up to C tokens, and `longest-C-min2` the same proposing only after a
match of 2 tokens or more (the server's rule: kMaxProposalMatch = 32, kMinProposalMatch = 2).
With --cost c it also estimates the speedup over plain decoding as tokens per step over the
step's cost, 1 + c x its proposals (c: a proposed row's cost in plain steps).

Tasks and prompts are speculate_vs_llama_cpp.py's; the server (ours, plain, CPU_ISA default avx2)
is started here. Writes a JSON with the ids and the table when --out is given. Not part of
`make test`.

  .venv/bin/python scripts/bench/proposal_replay.py [--tokens 192] [--speculate 4] [--cost C] [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speculate_vs_llama_cpp as sv  # noqa: E402


def continue_from(ids: list[int], end: int, count: int) -> list[int]:
    """The `count` ids after position `end`, past the known ids repeating (LZ77's copy)."""
    out: list[int] = []
    for i in range(end + 1, end + 1 + count):
        out.append(ids[i] if i < len(ids) else out[i - len(ids)])
    return out


def ngram3(ids: list[int], count: int) -> list[int]:
    n = len(ids)
    for k in range(min(3, n - 1), 0, -1):
        for start in range(n - k - 1, -1, -1):
            if ids[start : start + k] == ids[n - k :]:
                return continue_from(ids, start + k - 1, count)
    return []


def longest(cap: int, min_match: int = 1):
    def rule(ids: list[int], count: int) -> list[int]:
        n, best_end, best_length = len(ids), -1, 0
        for end in range(n - 2, -1, -1):
            if best_length >= cap:
                break
            if ids[end] != ids[-1]:
                continue
            length = 1
            while length < min(cap, end + 1) and ids[end - length] == ids[n - 1 - length]:
                length += 1
            if length > best_length:
                best_end, best_length = end, length
        return continue_from(ids, best_end, count) if best_end >= 0 and best_length >= min_match else []

    return rule


def replay(prompt: list[int], output: list[int], rule, speculate: int, cost: float) -> dict:
    position, steps, proposed, accepted, limit = 1, 0, 0, 0, speculate  # the first token: prefill
    while position < len(output):
        count = min(speculate, limit, len(output) - position - 1)
        proposal = rule(prompt + output[:position], count) if count >= 1 else []
        taken = 0
        while taken < len(proposal) and proposal[taken] == output[position + taken]:
            taken += 1
        if proposal:
            limit = min(speculate, limit + 2) if taken == len(proposal) else max(1, limit - 1)
        steps, proposed, accepted, position = steps + 1, proposed + len(proposal), accepted + taken, position + taken + 1
    row = {"accepted_of_proposed": [accepted, proposed], "tokens_per_step": round((len(output) - 1) / steps, 3)}
    if cost:
        row["estimated_speedup"] = round((len(output) - 1) / (steps + cost * proposed), 3)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=192)
    ap.add_argument("--speculate", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", type=Path, default=sv.MODEL)
    ap.add_argument("--cost", type=float, default=0.0, help="a proposed row's cost in plain decode steps")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    port = sv.free_port()
    cmd = [str(sv.LAUNCHER), "--model-id", str(args.model), "--port", str(port), "--hostname", "127.0.0.1",
           "--num-threads", str(args.threads), "--max-total-tokens", "4096", "--max-input-tokens", "3072"]  # fmt: skip
    server = sv.Server("ours", cmd, port, {**os.environ, "CPU_ISA": os.environ.get("CPU_ISA", "avx2")})
    rules = {"ngram3": ngram3, **{f"longest-{c}": longest(c) for c in (4, 8, 16, 32)}, "longest-32-min2": longest(32, 2)}
    result = {"what": "proposal rules replayed on greedy outputs (proposal_replay.py)", "model": str(args.model),
              "new_tokens": args.tokens, "speculate": args.speculate, "tasks": {}}  # fmt: skip
    try:
        for task, prompt in sv.tasks().items():
            messages = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
            templated = json.loads(sv.request(port, "POST", "/chat_tokenize", messages)[1])
            prompt_ids = [t["id"] for t in templated["tokenize_response"]]
            body = {"inputs": templated["templated_text"], "parameters": {"max_new_tokens": args.tokens, "details": True}}
            generated = json.loads(sv.request(port, "POST", "/generate", body)[1])
            output_ids = [t["id"] for t in generated["details"]["tokens"]]
            table = {name: replay(prompt_ids, output_ids, rule, args.speculate, args.cost) for name, rule in rules.items()}
            result["tasks"][task] = {"prompt_ids": prompt_ids, "output_ids": output_ids, "rules": table}
            for name, row in table.items():
                a, p = row["accepted_of_proposed"]
                print(f"{task:8} {name:15} accepted {a:4}/{p:4} ({a / max(p, 1):.0%})  tokens/step {row['tokens_per_step']}"
                      + (f"  estimated speedup {row['estimated_speedup']}" if args.cost else ""))
    finally:
        server.stop()
    if args.out:
        args.out.write_text(json.dumps(result) + "\n")
        print("wrote", args.out)


if __name__ == "__main__":
    main()
