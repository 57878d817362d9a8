#!/usr/bin/env python3
"""TGI's `--quantize bitsandbytes` (LLM.int8) against the library whose numbers it reproduces:
transformers with bitsandbytes' Linear8bitLt (BitsAndBytesConfig(load_in_8bit=True)) on the CPU,
the same float checkpoint (default: the default model's float copy, build/test-models/smollm2-f32),
the same threads, the same prompt and greedy tokens.

Alternating for --rounds: (a) our launcher serving the folder with --quantize bitsandbytes, a warm-up
/generate then --reps timed ones; (b) transformers + bitsandbytes in a fresh process (.venv-dev),
a warm-up generate then --reps timed ones. Both generate exactly --tokens tokens (ours: the prompt
is one whose greedy continuation has no EOS within them, checked; transformers: min_new_tokens).
Per round: decode tokens/s = (tokens - 1) / (time(tokens) - time(1 token)), i.e. without the
prefill, and prefill tokens/s of a --prefill-tokens prompt (time to the first token). For scale, (c)
our launcher with --quantize eetq (the same 8 bits a weight, int8 activations by block) runs in
each round too. Reports ratios ours/transformers and bitsandbytes/eetq per round with their spread.
Writes bench/results/issue20_llm_int8.json. Not part of `make test`.

  .venv/bin/python scripts/bench/llm_int8.py [--rounds 3] [--threads 2] [--tokens 32]
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

import requests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OURS = os.path.join(ROOT, "build/src/app/text-generation-launcher")
DEV_PYTHON = os.path.join(ROOT, ".venv-dev/bin/python")
PROMPT = "The history of the printing press"

# Runs in .venv-dev: transformers on model_dir, loaded by LOAD (a statement that sets `model`),
# and prints one JSON line of timings. peer_program(LOAD) is the whole program.
PEER_TIMING = r"""
import json, logging, sys, time
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
model_dir, threads, tokens, reps, prefill_tokens, prompt = sys.argv[1:7]
threads, tokens, reps, prefill_tokens = int(threads), int(tokens), int(reps), int(prefill_tokens)
torch.set_num_threads(threads)
LOAD
ids = AutoTokenizer.from_pretrained(model_dir)(prompt, return_tensors="pt").input_ids
long_ids = torch.randint(100, 20000, (1, prefill_tokens))
def gen(x, n):
    t = time.perf_counter()
    with torch.no_grad():
        out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                             do_sample=False)
    assert out.shape[1] - x.shape[1] == n
    return time.perf_counter() - t
gen(ids, tokens)  # warm-up
decode, prefill = [], []
for _ in range(reps):
    decode.append((tokens - 1) / (gen(ids, tokens) - gen(ids, 1)))
    prefill.append(prefill_tokens / gen(long_ids, 1))
print(json.dumps({"decode": decode, "prefill": prefill}))
"""


def peer_program(load: str) -> str:
    return PEER_TIMING.replace("LOAD", load.strip())


# transformers + bitsandbytes' Linear8bitLt.
PEER = peer_program("""
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, device_map="cpu",
    quantization_config=BitsAndBytesConfig(load_in_8bit=True)).eval()
""")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ours(args, quantize=None, model=None):
    """Our launcher serving `model` (default args.model) with --quantize `quantize` (or none):
    decode and prefill tokens/s of args.reps timed /generate pairs after a warm-up."""
    port = free_port()
    model = model or args.model
    flags = ["--quantize", quantize] if quantize else []
    proc = subprocess.Popen([OURS, "--model-id", model, "--port", str(port), "--hostname", "127.0.0.1",
                             "--num-threads", str(args.threads), *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def gen(inputs, n):
        body = {"inputs": inputs, "parameters": {"max_new_tokens": n, "details": True}}
        t = time.perf_counter()
        r = requests.post(url + "/generate", json=body, timeout=600).json()
        elapsed = time.perf_counter() - t
        assert r["details"]["generated_tokens"] == n, r["details"]  # no EOS within n
        return elapsed

    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"server exited ({proc.returncode}) on {model} with {flags}")
            try:
                if requests.get(url + "/health", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        # A prompt of --prefill-tokens tokens: words the tokenizer keeps as one token each ("the").
        long_prompt = " ".join(["the"] * args.prefill_tokens)
        gen(PROMPT, args.tokens)  # warm-up
        decode, prefill = [], []
        for _ in range(args.reps):
            decode.append((args.tokens - 1) / (gen(PROMPT, args.tokens) - gen(PROMPT, 1)))
            prefill.append(args.prefill_tokens / gen(long_prompt, 1))
    finally:
        proc.terminate()
        proc.wait()
    return {"decode": decode, "prefill": prefill}


def peer(args, program=PEER, model=None):
    """The timings `program` (peer_program) prints for `model` (default args.model)."""
    out = subprocess.run([DEV_PYTHON, "-c", program, model or args.model, str(args.threads), str(args.tokens),
                          str(args.reps), str(args.prefill_tokens), PROMPT],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(values):
    return sorted(values)[len(values) // 2]


def spread(values):
    return {"min": round(min(values), 3), "max": round(max(values), 3), "all": [round(v, 3) for v in values]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build/test-models/smollm2-f32"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prefill-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/issue20_llm_int8.json"))
    args = ap.parse_args()
    runs = {"ours_bitsandbytes": [], "transformers_bitsandbytes": [], "ours_eetq": []}
    for r in range(args.rounds):
        for name, fn in (("ours_bitsandbytes", lambda: ours(args, "bitsandbytes")),
                         ("transformers_bitsandbytes", lambda: peer(args)),
                         ("ours_eetq", lambda: ours(args, "eetq"))):
            res = fn()
            res = {k: [round(x, 2) for x in v] for k, v in res.items()}
            res.update({f"{k}_median": median(v) for k, v in list(res.items())})
            runs[name].append(res)
            print(f"round {r}: {name}: decode {res['decode_median']} tok/s, prefill {res['prefill_median']} tok/s",
                  file=sys.stderr)
    ratios = {}
    for what in ("decode", "prefill"):
        ratios[f"{what}_ours_over_transformers"] = spread(
            [o[f"{what}_median"] / p[f"{what}_median"]
             for o, p in zip(runs["ours_bitsandbytes"], runs["transformers_bitsandbytes"])])
        ratios[f"{what}_bitsandbytes_over_eetq"] = spread(
            [o[f"{what}_median"] / e[f"{what}_median"] for o, e in zip(runs["ours_bitsandbytes"], runs["ours_eetq"])])
    result = {"what": "issue 20: --quantize bitsandbytes (LLM.int8) against transformers + bitsandbytes "
                      "Linear8bitLt on the CPU, and against our --quantize eetq",
              "model": os.path.relpath(args.model, ROOT), "threads": args.threads, "tokens": args.tokens,
              "prefill_tokens": args.prefill_tokens, "reps": args.reps, "rounds": args.rounds,
              "runs": runs, "ratios": ratios}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(ratios, indent=2))


if __name__ == "__main__":
    main()
