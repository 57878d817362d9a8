#!/usr/bin/env python3
"""tg128 at depth 4096 with and without a sliding window (issue 21): window-bounded K/V.

Writes one random-weight Mistral-shaped checkpoint (F16, 8 layers, hidden 512, 8 KV heads of 64,
the Llama SentencePiece vocabulary of build/test-models/tokenizers/llama-spm) twice: with
"sliding_window": --window (every layer windowed, so the engine frees the K/V blocks before the
window) and with "sliding_window": null (the same weights, full attention, every block kept).
Starts our server on each (--num-threads 2, prompts prefilled in chunks of 512, no prefix
caching) and alternates --runs requests per variant: a prompt of --depth tokens (random words,
a different prompt each run, sized through /tokenize), then 128 greedy tokens streamed. Reports
per variant the decode tokens/s ((n - 1) / (last token - first token)), the prefill time, and the
KV blocks held (tgi_kv_cache_blocks_used, polled every 20 ms: the peak over the request and the
peak while decoding), with median / min / max over the runs. Writes
bench/results/issue21_window_tg_d4096.json. Not part of `make test`.

  .venv/bin/python scripts/bench/window_tg_depth.py [--runs 3] [--window 512] [--depth 4096]
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import threading
import time
import http.client

import numpy as np
from safetensors.numpy import save_file

from serving import free_port, stream_stamps, wait_ready

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OURS = os.path.join(ROOT, "build/src/app/text-generation-launcher")
TOKENIZER = os.path.join(ROOT, "build/test-models/tokenizers/llama-spm")
OUT_DIR = os.path.join(ROOT, "build/bench-models")
RESULT = os.path.join(ROOT, "bench/results/issue21_window_tg_d4096.json")

HIDDEN, LAYERS, HEADS, KV_HEADS, INTERMEDIATE, VOCAB = 512, 8, 8, 8, 1536, 32000


def write_checkpoint(window):
    """The same seeded weights; only config.json's sliding_window differs."""
    name = f"mistral-w{window}" if window else "mistral-nowindow"
    path = os.path.join(OUT_DIR, name)
    if os.path.exists(os.path.join(path, "model.safetensors")):
        return path
    os.makedirs(path, exist_ok=True)
    rng = np.random.default_rng(21)
    head_dim = HIDDEN // HEADS

    def w(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.04).astype(np.float16)

    tensors = {"model.embed_tokens.weight": w(VOCAB, HIDDEN), "lm_head.weight": w(VOCAB, HIDDEN),
               "model.norm.weight": np.ones(HIDDEN, np.float16)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        tensors |= {p + "self_attn.q_proj.weight": w(HEADS * head_dim, HIDDEN),
                    p + "self_attn.k_proj.weight": w(KV_HEADS * head_dim, HIDDEN),
                    p + "self_attn.v_proj.weight": w(KV_HEADS * head_dim, HIDDEN),
                    p + "self_attn.o_proj.weight": w(HIDDEN, HEADS * head_dim),
                    p + "mlp.gate_proj.weight": w(INTERMEDIATE, HIDDEN),
                    p + "mlp.up_proj.weight": w(INTERMEDIATE, HIDDEN),
                    p + "mlp.down_proj.weight": w(HIDDEN, INTERMEDIATE),
                    p + "input_layernorm.weight": np.ones(HIDDEN, np.float16),
                    p + "post_attention_layernorm.weight": np.ones(HIDDEN, np.float16)}
    save_file(tensors, os.path.join(path, "model.safetensors"))
    config = {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
              "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE,
              "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
              "num_key_value_heads": KV_HEADS, "head_dim": head_dim, "hidden_act": "silu",
              "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "sliding_window": window or None, "tie_word_embeddings": False,
              "torch_dtype": "float16", "vocab_size": VOCAB, "bos_token_id": 1,
              "eos_token_id": 2}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    for file in os.listdir(TOKENIZER):
        shutil.copy(os.path.join(TOKENIZER, file), path)
    return path


def get_json(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    return json.loads(data) if r.getheader("Content-Type", "").startswith("application/json") \
        else data.decode()


def blocks_used(port):
    text = get_json(port, "GET", "/metrics")
    m = re.search(r"^tgi_kv_cache_blocks_used (\S+)$", text, re.M)
    return int(float(m.group(1))) if m else -1


class Server:
    def __init__(self, model, depth, threads):
        self.port = free_port()
        cmd = [OURS, "--model-id", model, "--hostname", "127.0.0.1", "--port", str(self.port),
               "--num-threads", str(threads), "--max-input-tokens", str(depth + 64),
               "--max-total-tokens", str(depth + 64 + 128), "--max-batch-prefill-tokens", "512",
               "--prefix-caching", "false"]
        self.log = open(model + ".log", "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        wait_ready(self.port, "/health", timeout=600)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()


def prompt_of(port, depth, seed):
    """Random words whose tokenization (BOS included) is `depth` tokens."""
    rng = random.Random(seed)
    words = ["alpha", "river", "stone", "light", "garden", "window", "market", "silver", "cloud",
             "engine", "paper", "orange", "north", "music", "forest", "table", "winter", "glass"]
    text = " ".join(rng.choice(words) for _ in range(depth))
    lo, hi = 1, len(text)
    while lo < hi:  # the longest prefix of at most `depth` tokens
        mid = (lo + hi + 1) // 2
        if len(get_json(port, "POST", "/tokenize", {"inputs": text[:mid]})) <= depth:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo], len(get_json(port, "POST", "/tokenize", {"inputs": text[:lo]}))


def timed_request(server, prompt):
    """Streams 128 tokens while polling the KV blocks gauge; returns (start, token stamps,
    [(perf_counter time, blocks used)])."""
    samples = []
    done = threading.Event()

    def poll():
        while not done.is_set():
            samples.append((time.perf_counter(), blocks_used(server.port)))
            time.sleep(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        start, stamps = stream_stamps("ours", server.port, prompt, 128)
    finally:
        done.set()
        poller.join()
    return start, stamps, samples


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--depth", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    variants = {"window": write_checkpoint(args.window), "no_window": write_checkpoint(0)}
    results = {name: {"decode_tokens_per_second": [], "prefill_seconds": [],
                      "peak_kv_blocks": [], "decode_kv_blocks": [], "generated_tokens": [],
                      "prompt_tokens": []} for name in variants}
    for run in range(args.runs):
        for name, model in variants.items():
            server = Server(model, args.depth, args.threads)
            try:
                prompt, num_prompt_tokens = prompt_of(server.port, args.depth, seed=run)
                start, stamps, samples = timed_request(server, prompt)
            finally:
                server.stop()
            r = results[name]
            n = len(stamps)
            r["generated_tokens"].append(n)
            r["prompt_tokens"].append(num_prompt_tokens)
            r["prefill_seconds"].append(round(stamps[0] - start, 3))
            r["decode_tokens_per_second"].append(round((n - 1) / (stamps[-1] - stamps[0]), 2))
            r["peak_kv_blocks"].append(max(b for _, b in samples))
            r["decode_kv_blocks"].append(max(b for t, b in samples if t >= stamps[0]))
            print(f"run {run} {name}: {n} tokens, prefill {stamps[0] - start:.2f}s, decode "
                  f"{r['decode_tokens_per_second'][-1]} tokens/s, KV blocks peak "
                  f"{r['peak_kv_blocks'][-1]}, while decoding {r['decode_kv_blocks'][-1]}",
                  flush=True)
    doc = {"issue": 21, "what": f"tg128 at depth {args.depth}: a {args.depth}-token prompt "
                                 "(prefilled in chunks of 512), then 128 greedy tokens streamed",
           "model": {"shape": "MistralForCausalLM, random F16 weights", "hidden_size": HIDDEN,
                     "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
                     "num_key_value_heads": KV_HEADS, "intermediate_size": INTERMEDIATE,
                     "vocab_size": VOCAB, "sliding_window": args.window},
           "threads": args.threads, "kv_block_size": 16, "runs_per_variant": args.runs,
           "order": "alternating, one fresh server per run",
           "note": "kv blocks: tgi_kv_cache_blocks_used polled every 20 ms; the windowed peak is "
                   "the window's blocks plus one 512-token prefill chunk's, while decoding "
                   "ceil((W - 1) / 16) + 1. Prefill times are noisy: the 2 cores are shared "
                   "with other jobs.",
           "variants": {name: {k: summary(v) for k, v in r.items()} for name, r in results.items()}}
    w, nw = (doc["variants"][k]["decode_tokens_per_second"]["median"] for k in variants)
    doc["decode_speedup_median"] = round(w / nw, 2)
    # Each run's window/no-window pair ran back to back: their ratio cancels most of the load
    # that other jobs put on the shared cores.
    doc["decode_speedup_per_run"] = [
        round(a / b, 2) for a, b in zip(results["window"]["decode_tokens_per_second"],
                                        results["no_window"]["decode_tokens_per_second"])]
    os.makedirs(os.path.dirname(RESULT), exist_ok=True)
    with open(RESULT, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(json.dumps({k: {m: v[m]["median"] for m in v} for k, v in doc["variants"].items()},
                     indent=2))


if __name__ == "__main__":
    main()
