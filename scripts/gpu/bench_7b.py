#!/usr/bin/env python3
"""Issue 25's benchmark, run by scripts/gpu/device_check.sh on a GPU machine: a random
Llama-2-7B-shaped BF16 checkpoint served by our launcher (--device cuda) against transformers
(eager attention, BF16) on the same GPU, in one run, alternating, greedy, the same text prompts
through the same tokenizer.json:

* batch 1: decode tokens/s (streamed token arrival times, first token excluded) and its share of
  the HBM roofline (weight bytes per token / the measured device-to-device copy bandwidth,
  read + write bytes, as kernels_cuda_bench counts it);
* batch 32: aggregate generated tokens/s of 32 concurrent requests (ours: 32 HTTP clients;
  transformers: one padded generate() of 32 prompts), prefill included in both.

Writes one JSON (--out) with every round, the medians and the ratios ours / transformers with
their [min, max]. `--shape tiny --device cpu` runs the same code path on a CPU machine in seconds
(a check of this script, not a measurement).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

SHAPES = {
    # Llama-2-7b-chat's config.json dimensions.
    "7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
               num_attention_heads=32, num_key_value_heads=32),
    "tiny": dict(hidden_size=256, intermediate_size=688, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=4),
}
TEXT = ("The quick brown fox jumps over the lazy dog while the committee reviews the "
        "quarterly report on renewable energy adoption in coastal cities, number {i}.")


def make_checkpoint(folder: Path, shape: str, tokenizer_dir: Path, device: str):
    """A random LlamaForCausalLM (transformers' own init, std 0.02) saved as BF16 safetensors."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32000, max_position_embeddings=4096, rms_norm_eps=1e-5,
                         bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
                         torch_dtype="bfloat16", **SHAPES[shape])
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.eval()
    if not (folder / "model.safetensors.index.json").exists() and not (
            folder / "model.safetensors").exists():
        folder.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(folder, safe_serialization=True, max_shard_size="20GB")
        for name in ("tokenizer.json", "tokenizer_config.json"):
            if (tokenizer_dir / name).exists():
                shutil.copy(tokenizer_dir / name, folder / name)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return model, weight_bytes


def copy_bandwidth(device: str) -> float:
    """Device-to-device copy, read + write bytes per second (0 on the CPU)."""
    import torch
    if device != "cuda":
        return 0.0
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        dst.copy_(src)
    torch.cuda.synchronize()
    return 2 * n * 10 / (time.perf_counter() - start)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def ours_batch1(base: str, prompt: str, new_tokens: int) -> dict:
    """One streamed request: decode tokens/s from the arrival times after the first token."""
    times = []
    body = {"inputs": prompt, "parameters": {"max_new_tokens": new_tokens, "details": True}}
    with post(base + "/generate_stream", body) as resp:
        for line in resp:
            if line.startswith(b"data:"):
                times.append(time.perf_counter())
    n = len(times)
    return {"tokens": n, "decode_tok_s": (n - 1) / (times[-1] - times[0]) if n > 1 else 0.0}


def ours_batch(base: str, prompts: list[str], new_tokens: int) -> dict:
    counts = [0] * len(prompts)

    def one(i: int):
        body = {"inputs": prompts[i], "parameters": {"max_new_tokens": new_tokens,
                                                     "details": True}}
        with post(base + "/generate", body) as resp:
            counts[i] = json.loads(resp.read())["details"]["generated_tokens"]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return {"tokens": sum(counts), "wall_s": wall, "tok_s": sum(counts) / wall}


def hf_generate(model, tokenizer, prompts: list[str], new_tokens: int, device: str,
                streamer=None) -> float:
    import torch
    batch = tokenizer(prompts, return_tensors="pt", padding=True).to(device)
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    with torch.no_grad():
        model.generate(**batch, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                       do_sample=False, pad_token_id=0, streamer=streamer)
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


class ArrivalTimes:
    """A transformers streamer that notes when each new token is handed out (the prompt first)."""

    def __init__(self):
        self.times: list[float] = []
        self.prompt_seen = False

    def put(self, value):
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        self.times.append(time.perf_counter())

    def end(self):
        pass


def hf_batch1(model, tokenizer, prompt: str, new_tokens: int, device: str) -> dict:
    # The same measure as ours: token arrival times, the first token excluded.
    arrivals = ArrivalTimes()
    hf_generate(model, tokenizer, [prompt], new_tokens, device, streamer=arrivals)
    t = arrivals.times
    return {"tokens": len(t), "decode_tok_s": (len(t) - 1) / (t[-1] - t[0])}


def hf_batch(model, tokenizer, prompts: list[str], new_tokens: int, device: str) -> dict:
    wall = hf_generate(model, tokenizer, prompts, new_tokens, device)
    total = new_tokens * len(prompts)
    return {"tokens": total, "wall_s": wall, "tok_s": total / wall}


def spread(ratios: list[float]) -> dict:
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launcher", required=True, type=Path)
    ap.add_argument("--tokenizer", required=True, type=Path, help="folder with tokenizer.json")
    ap.add_argument("--work", required=True, type=Path, help="where the checkpoint is written")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="7b")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--memory-fraction", type=float, default=0.6,
                    help="ours; transformers keeps its copy of the weights beside it")
    args = ap.parse_args()

    from transformers import PreTrainedTokenizerFast

    t0 = time.perf_counter()
    folder = args.work / f"llama-{args.shape}-random-bf16"
    model, weight_bytes = make_checkpoint(folder, args.shape, args.tokenizer, args.device)
    made_s = time.perf_counter() - t0
    tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(args.tokenizer / "tokenizer.json"))
    tokenizer.pad_token_id = 0
    tokenizer.padding_side = "left"
    prompts = [TEXT.format(i=i) for i in range(args.batch)]
    bandwidth = copy_bandwidth(args.device)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [str(args.launcher), "--model-id", str(folder), "--port", str(port),
           "--device", args.device, "--max-input-tokens", "1024", "--max-total-tokens", "2048",
           "--max-batch-prefill-tokens", "4096", "--max-batch-size", str(max(64, args.batch))]
    if args.device == "cuda":
        cmd += ["--cuda-memory-fraction", str(args.memory_fraction)]
    log = open(args.out.with_suffix(".server.log"), "w")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    result: dict = {"shape": args.shape, "device": args.device, "weight_bytes": weight_bytes,
                    "copy_bandwidth_bytes_s": bandwidth, "checkpoint_s": made_s,
                    "new_tokens": args.new_tokens, "batch": args.batch,
                    "prompt_tokens": len(tokenizer(prompts[0])["input_ids"]), "rounds": []}
    try:
        start = time.perf_counter()
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the server exited ({server.returncode}); see its log")
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.perf_counter() - start > 900:
                raise RuntimeError("the server did not become healthy in 900 s")
            time.sleep(1)
        result["server_ready_s"] = time.perf_counter() - start
        with urllib.request.urlopen(base + "/info", timeout=10) as r:
            result["info"] = json.loads(r.read())
        ours_batch1(base, prompts[0], 8)  # warm the HTTP path and the graphs
        hf_generate(model, tokenizer, prompts[:2], 8, args.device)  # and transformers' kernels
        for _ in range(args.rounds):
            row = {
                "ours_b1": ours_batch1(base, prompts[0], args.new_tokens),
                "hf_b1": hf_batch1(model, tokenizer, prompts[0], args.new_tokens, args.device),
                "ours_batch": ours_batch(base, prompts, args.new_tokens),
                "hf_batch": hf_batch(model, tokenizer, prompts, args.new_tokens, args.device),
            }
            result["rounds"].append(row)
            print(json.dumps(row), flush=True)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        log.close()

    rounds = result["rounds"]
    b1 = [r["ours_b1"]["decode_tok_s"] / r["hf_b1"]["decode_tok_s"] for r in rounds]
    bb = [r["ours_batch"]["tok_s"] / r["hf_batch"]["tok_s"] for r in rounds]
    ours_b1 = statistics.median(r["ours_b1"]["decode_tok_s"] for r in rounds)
    hf_b1 = statistics.median(r["hf_b1"]["decode_tok_s"] for r in rounds)
    result["summary"] = {
        "ours_b1_decode_tok_s": ours_b1,
        "hf_b1_decode_tok_s": hf_b1,
        "ratio_b1": spread(b1),
        "ours_b1_roofline_fraction": ours_b1 * weight_bytes / bandwidth if bandwidth else None,
        "hf_b1_roofline_fraction": hf_b1 * weight_bytes / bandwidth if bandwidth else None,
        "ours_batch_tok_s": statistics.median(r["ours_batch"]["tok_s"] for r in rounds),
        "hf_batch_tok_s": statistics.median(r["hf_batch"]["tok_s"] for r in rounds),
        "ratio_batch": spread(bb),
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
