#!/usr/bin/env python3
"""An FP8 checkpoint served from its FP8 bytes (FP8 panels, 1 byte a weight) against the same
weights dequantized into BF16 (what transformers holds on a CPU; our BF16 panels, 2 bytes a weight)
and against transformers running the FP8 checkpoint on the CPU (it dequantizes it to bf16).

The checkpoint is made here from a float folder (default: the default model's float copy,
build/test-models/smollm2-f32) in transformers' "fp8" layout: every layer Linear in E4M3 with an
fp32 weight_scale_inv per 64 x 64 block (absmax / 448, as transformers' FP8 quantizer), the rest
in bf16; its BF16 twin holds bf16(fp8 * scale), the bits both servers compute with.

Alternating for --rounds: (a) our launcher on the FP8 folder, (b) on the BF16 twin, (c)
transformers (.venv-dev, a fresh process, bf16) on the FP8 folder. Each: a warm-up /generate, then
--reps timed ones; decode tokens/s = (tokens - 1) / (time(tokens) - time(1 token)); prefill tokens/s
of a --prefill-tokens prompt (time to the first token). Also each folder's weight bytes from our
--dry-run plan. Reports per-round ratios with their spread. Writes
bench/results/issue20_fp8_checkpoint.json. Not part of `make test`.

  .venv/bin/python scripts/bench/fp8_checkpoint.py [--rounds 3] [--threads 2] [--tokens 32]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_int8 import DEV_PYTHON, OURS, ROOT, median, ours, peer, peer_program, spread  # noqa: E402

# Runs in .venv-dev: writes the FP8 folder and its BF16 twin from a float folder.
MAKE = r"""
import json, shutil, sys
from pathlib import Path
import torch
from safetensors.torch import load_file, save_file
src, fp8_dir, bf16_dir, block = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
sd = {}
for f in sorted(src.glob("*.safetensors")):
    sd.update(load_file(str(f)))
fp8, bf16 = {}, {}
for name, t in sd.items():
    t = t.to(torch.float32)
    if name.startswith("model.layers.") and name.endswith("_proj.weight"):
        n, k = t.shape
        tb = t.reshape(n // block, block, k // block, block)
        scale = tb.abs().amax((1, 3)).clamp(min=1e-12) / 448.0
        q = (tb / scale[:, None, :, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
        fp8[name] = q.reshape(n, k)
        fp8[name[:-len(".weight")] + ".weight_scale_inv"] = scale.contiguous()
        bf16[name] = (q.to(torch.float32) * scale[:, None, :, None]).reshape(n, k).to(torch.bfloat16)
    else:
        fp8[name] = bf16[name] = t.to(torch.bfloat16)
cfg = json.loads((src / "config.json").read_text())
cfg["torch_dtype"] = "bfloat16"
cfg.pop("dtype", None)
for d, tensors in ((fp8_dir, fp8), (bf16_dir, bf16)):
    d.mkdir(parents=True)
    for f in src.iterdir():
        if f.suffix != ".safetensors" and f.name not in ("config.json", "model.safetensors.index.json"):
            shutil.copy(f, d / f.name)
    save_file(tensors, str(d / "model.safetensors"), metadata={"format": "pt"})
    c = dict(cfg)
    if d == fp8_dir:
        c["quantization_config"] = {"quant_method": "fp8", "activation_scheme": "dynamic",
                                    "weight_block_size": [block, block],
                                    "modules_to_not_convert": ["lm_head"]}
    (d / "config.json").write_text(json.dumps(c, indent=2))
"""

# transformers on the FP8 folder (dequantized to bf16 on a CPU).
PEER = peer_program('model = AutoModelForCausalLM.from_pretrained(model_dir, device_map="cpu").eval()')


def weights_bytes(folder):
    out = subprocess.run([OURS, "--model-id", folder, "--dry-run", "--json-output"], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["memory"]["weights_bytes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "build/test-models/smollm2-f32"))
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prefill-tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/issue20_fp8_checkpoint.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fp8-bench-")
    try:
        fp8_dir, bf16_dir = os.path.join(tmp, "fp8"), os.path.join(tmp, "bf16")
        subprocess.run([DEV_PYTHON, "-c", MAKE, args.model, fp8_dir, bf16_dir, str(args.block)], check=True)
        sizes = {"ours_fp8": weights_bytes(fp8_dir), "ours_bf16": weights_bytes(bf16_dir)}
        runs = {"ours_fp8": [], "ours_bf16": [], "transformers_fp8": []}
        for r in range(args.rounds):
            for name, fn in (("ours_fp8", lambda: ours(args, model=fp8_dir)),
                             ("ours_bf16", lambda: ours(args, model=bf16_dir)),
                             ("transformers_fp8", lambda: peer(args, PEER, fp8_dir))):
                res = fn()
                res = {k: [round(x, 2) for x in v] for k, v in res.items()}
                res.update({f"{k}_median": median(v) for k, v in list(res.items())})
                runs[name].append(res)
                print(f"round {r}: {name}: decode {res['decode_median']} tok/s, prefill {res['prefill_median']} tok/s",
                      file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ratios = {}
    for what in ("decode", "prefill"):
        for other in ("ours_bf16", "transformers_fp8"):
            ratios[f"{what}_fp8_over_{other}"] = spread(
                [a[f"{what}_median"] / b[f"{what}_median"] for a, b in zip(runs["ours_fp8"], runs[other])])
    result = {"what": "issue 20: an FP8 checkpoint (transformers' fp8 layout, 64 x 64 blocks) served from its FP8 "
                      "bytes, against its BF16 twin (the same dequantized values) and against transformers on "
                      "the CPU",
              "model": os.path.relpath(args.model, ROOT), "block": args.block, "threads": args.threads,
              "tokens": args.tokens, "prefill_tokens": args.prefill_tokens, "reps": args.reps,
              "rounds": args.rounds, "weights_bytes": sizes, "runs": runs, "ratios": ratios}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({"weights_bytes": sizes, **ratios}, indent=2))


if __name__ == "__main__":
    main()
