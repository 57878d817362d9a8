#!/usr/bin/env python3
"""GPTQ and AWQ checkpoints at Llama-2-7B's shape (issue 20): decode against the memory-bandwidth
roofline of the checkpoint's own bytes, prefill against our Q4_0 on the same shape, and tokens/s
against transformers running the same GPTQ checkpoint on the CPU (gptqmodel's kernels, as
`AutoModelForCausalLM.from_pretrained` loads a GPTQ folder).

Checkpoints (made here under --work, default .cache/models/, when missing; numpy, seeded): HF
folders of a Llama-2-7B-shaped model (hidden 4096, 32 heads, MLP 11008, vocab 32000 with Llama-2's
tokenizer, fp16 embedding and lm_head) with --layers of its 32 layers (per layer and per token the
real model's work), every layer Linear 4-bit with groups of 128 in the packed layouts the
libraries write:
  gptq          GPTQ v1 (AutoGPTQ / gptqmodel "gptq" format), symmetric, desc_act false: qweight
                [K/8, N], qzeros [G, N/8] holding z - 1 = 7, fp16 scales [G, N], g_idx [K]
  gptq-actorder the same with desc_act true: g_idx a seeded permutation of the groups (act-order)
  awq           AWQ GEMM (AutoAWQ), zero_point true: qweight [K, N/8] in AWQ's nibble order,
                qzeros [G, N/8] (random zero-points 0..15), fp16 scales [G, N]
  q4_0          for scale: the GGUF scripts/bench/make_shaped_gguf.py writes (--type q4_0: every
                matrix Q4_0, output Q6_K) with the same layers
The values are random (meaningless text), the bytes and the arithmetic are the real model's.

Alternating for --rounds, ours (build/src/app/text-generation-benchmark, CPU_ISA=--isa when given)
on every checkpoint: pp64 and pp512 (prompt tokens/s) and tg128 (tokens/s of 128 decode steps);
then transformers (.venv-dev with gptqmodel) on the
gptq folder (gptqmodel's loader, its default CPU kernel and dtype; transformers' own GPTQ loader
needs optimum besides): decode tokens/s of --peer-tokens greedy tokens after a short prompt (without
the prefill) and prompt tokens/s of a 64-token prompt.

Each round also times one process that loads the checkpoint and runs one token (seconds, peak
resident memory). Reported per checkpoint: the decode bandwidth roofline = the read bandwidth
measured just before each tg128 run (text-generation-benchmark --measure-machine; it moves by tens
of percent between minutes on a shared host) / the bytes a decode step reads as the checkpoint
stores them (packed weights, scales, zero-points, the fp16 lm_head, norms; not the embedding
table, of which it reads one row, nor g_idx, which only orders the columns), and our fraction of
it; the bytes we hold them in (our --dry-run plan); prefill ratios against our Q4_0;
ours / transformers. Writes bench/results/issue20_gptq_awq.json. Not part of `make test`.

  .venv/bin/python scripts/bench/gptq_awq.py [--rounds 3] [--layers 8] [--threads 2] [--isa avx2]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_int8 import DEV_PYTHON, peer_program  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OURS = ROOT / "build/src/app/text-generation-benchmark"
LAUNCHER = ROOT / "build/src/app/text-generation-launcher"
TOKENIZER = ROOT / "build/test-models/tokenizers/llama-spm"  # Llama-2's vocabulary (make fixtures-test)

HIDDEN, HEADS, INTERMEDIATE, VOCAB, GROUP = 4096, 32, 11008, 32000, 128
LINEARS = [("self_attn.q_proj", HIDDEN, HIDDEN), ("self_attn.k_proj", HIDDEN, HIDDEN),
           ("self_attn.v_proj", HIDDEN, HIDDEN), ("self_attn.o_proj", HIDDEN, HIDDEN),
           ("mlp.gate_proj", INTERMEDIATE, HIDDEN), ("mlp.up_proj", INTERMEDIATE, HIDDEN),
           ("mlp.down_proj", HIDDEN, INTERMEDIATE)]  # (name, N = out_features, K = in_features)
FOLDERS = ["gptq", "gptq-actorder", "awq"]
TESTS = {"pp64": (64, 0), "pp512": (512, 0), "tg128": (0, 128)}

QUANT_CONFIG = {
    "gptq": {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": False, "sym": True,
             "damp_percent": 0.01, "true_sequential": True, "checkpoint_format": "gptq"},
    "gptq-actorder": {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "desc_act": True, "sym": True,
                      "damp_percent": 0.01, "true_sequential": True, "checkpoint_format": "gptq"},
    "awq": {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm"},
}


def random_words(rng: np.random.Generator, shape) -> np.ndarray:
    """int32 words of 8 uniform nibbles each."""
    return rng.integers(0, 2**32, size=shape, dtype=np.uint32).view(np.int32)


def random_scales(rng: np.random.Generator, shape) -> np.ndarray:
    # |w| ~ scale * 8 ~ 0.02, as a trained 7B's weights
    return rng.uniform(0.0015, 0.003, size=shape).astype(np.float16)


def linear_tensors(kind: str, rng: np.random.Generator, n: int, k: int) -> dict:
    groups = k // GROUP
    if kind == "awq":
        return {"qweight": random_words(rng, (k, n // 8)), "qzeros": random_words(rng, (groups, n // 8)),
                "scales": random_scales(rng, (groups, n))}
    if kind == "gptq-actorder":
        g_idx = np.empty(k, dtype=np.int32)
        g_idx[rng.permutation(k)] = np.arange(k, dtype=np.int32) // GROUP
    else:
        g_idx = np.arange(k, dtype=np.int32) // GROUP
    # v1: the zero-point 8 of a symmetric 4-bit format stored as 8 - 1 in every nibble
    return {"qweight": random_words(rng, (k // 8, n)),
            "qzeros": np.full((groups, n // 8), 0x77777777, dtype=np.int32),
            "scales": random_scales(rng, (groups, n)), "g_idx": g_idx}


def make_folder(kind: str, out: Path, layers: int) -> None:
    from safetensors.numpy import save_file

    rng = np.random.default_rng(20 + FOLDERS.index(kind))
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    ones = np.ones(HIDDEN, dtype=np.float16)
    index = {}
    # one shard per layer keeps the writer's memory to a layer's bytes
    for i in range(layers):
        tensors = {f"model.layers.{i}.input_layernorm.weight": ones,
                   f"model.layers.{i}.post_attention_layernorm.weight": ones}
        for name, n, k in LINEARS:
            for field, t in linear_tensors(kind, rng, n, k).items():
                tensors[f"model.layers.{i}.{name}.{field}"] = t
        shard = f"model-{i + 1:05d}-of-{layers + 1:05d}.safetensors"
        save_file(tensors, str(tmp / shard), metadata={"format": "pt"})
        index.update({name: shard for name in tensors})
    tensors = {"model.embed_tokens.weight": (rng.standard_normal((VOCAB, HIDDEN), dtype=np.float32) * 0.02)
               .astype(np.float16),
               "lm_head.weight": (rng.standard_normal((VOCAB, HIDDEN), dtype=np.float32) * 0.02).astype(np.float16),
               "model.norm.weight": ones}
    shard = f"model-{layers + 1:05d}-of-{layers + 1:05d}.safetensors"
    save_file(tensors, str(tmp / shard), metadata={"format": "pt"})
    index.update({name: shard for name in tensors})
    (tmp / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": index}, indent=1))
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
              "intermediate_size": INTERMEDIATE, "num_attention_heads": HEADS, "num_key_value_heads": HEADS,
              "num_hidden_layers": layers, "vocab_size": VOCAB, "max_position_embeddings": 4096,
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
              "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float16",
              "quantization_config": QUANT_CONFIG[kind]}
    (tmp / "config.json").write_text(json.dumps(config, indent=2))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZER / f, tmp / f)
    tmp.rename(out)


def ensure_checkpoints(work: Path, layers: int) -> dict[str, Path]:
    paths = {kind: work / f"llama7b{layers}l-random-{kind}" for kind in FOLDERS}
    for kind, path in paths.items():
        if not (path / "config.json").exists():
            print(f"writing {path}", flush=True)
            make_folder(kind, path, layers)
    gguf = work / f"llama7b{layers}l-random-Q4_0.gguf"
    if not gguf.exists():
        subprocess.run([sys.executable, str(ROOT / "scripts/bench/make_shaped_gguf.py"), "--shape", "llama7b",
                        "--type", "q4_0", "--layers", str(layers), "--out", str(gguf)], check=True)
    paths["q4_0"] = gguf
    return paths


def decode_read_bytes(path: Path) -> int:
    """Bytes one decode step reads as the checkpoint stores them (see the module's docstring)."""
    total = 0
    if path.suffix == ".gguf":
        import gguf

        for t in gguf.GGUFReader(str(path)).tensors:
            if t.name != "token_embd.weight":
                total += int(t.n_bytes)
        return total
    from safetensors import safe_open

    for f in sorted(path.glob("*.safetensors")):
        with safe_open(str(f), framework="numpy") as st:
            for name in st.keys():
                if name == "model.embed_tokens.weight" or name.endswith(".g_idx"):
                    continue
                sl = st.get_slice(name)
                total += int(np.prod(sl.get_shape())) * {"F16": 2, "I32": 4, "F32": 4, "BF16": 2}[sl.get_dtype()]
    return total


def held_bytes(path: Path, env: dict) -> int:
    out = subprocess.run([str(LAUNCHER), "--model-id", str(path), "--dry-run", "--json-output"], capture_output=True,
                         text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])["memory"]["weights_bytes"]


def run_ours(path: Path, threads: int, test: str, env: dict, isa: str) -> float:
    n_prompt, n_gen = TESTS[test]
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        args = [str(OURS), "--model-id", str(path), "--num-threads", str(threads), "-b", "1", "-r", "1", "-w", "1",
                "--output", f.name]
        args += ["-s", str(n_prompt), "-d", "1"] if n_gen == 0 else ["-s", "1", "-d", str(n_gen + 1)]
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, env=env)
        doc = json.load(open(f.name))
    if isa != "auto" and doc["kernels"] != isa:
        sys.exit(f"ours ran {doc['kernels']} kernels, not {isa}")
    key = "prefill_tokens_per_second" if n_gen == 0 else "decode_tokens_per_second"
    return float(doc["cases"][0][key]["mean"])


def measure_load(path: Path, threads: int, env: dict) -> dict:
    """Seconds and peak resident memory of a process that loads the checkpoint and runs one token."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(OURS), "--model-id", str(path), "--num-threads", str(threads), "-b", "1", "-s", "1",
                             "-d", "1", "-r", "1", "-w", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"ours failed to load {path}")
    return {"seconds": round(time.perf_counter() - start, 2), "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def measure_bandwidth(path: Path, threads: int, env: dict) -> float:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([str(OURS), "--model-id", str(path), "--num-threads", str(threads), "-b", "1", "-s", "1",
                        "-d", "1", "-r", "1", "-w", "0", "--measure-machine", "--output", f.name], check=True,
                       stdout=subprocess.DEVNULL, env=env)
        return float(json.load(open(f.name))["machine"]["read_bytes_per_second"])


# transformers on a GPTQ folder, loaded by gptqmodel (transformers' own GPTQ loader also wants
# optimum, and hands the Linears to gptqmodel's kernels): its default backend and dtype for a CPU,
# the model a transformers LlamaForCausalLM whose generate() is timed.
PEER = peer_program("""
from gptqmodel import GPTQModel
model = GPTQModel.load(model_dir, device="cpu").model.eval()
print("kernel:", sorted({type(m).__name__ for m in model.modules() if hasattr(m, "qweight")}),
      next(model.parameters()).dtype, file=sys.stderr)
""")


def run_peer(path: Path, threads: int, tokens: int) -> dict:
    out = subprocess.run([DEV_PYTHON, "-c", PEER, str(path), str(threads), str(tokens), "1", "64",
                          "The history of the printing press"], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"transformers failed on {path}:\n{out.stderr[-3000:]}")
    kernel = [line for line in out.stderr.splitlines() if line.startswith("kernel:")]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    return {"decode": res["decode"][0], "prefill": res["prefill"][0], "kernel": kernel[0] if kernel else None}


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--isa", default="auto", help="CPU_ISA for ours (e.g. avx2); auto: the best level")
    ap.add_argument("--peer-tokens", type=int, default=8)
    ap.add_argument("--no-peer", action="store_true", help="skip transformers")
    ap.add_argument("--work", type=Path, default=ROOT / ".cache/models")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/issue20_gptq_awq.json")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.isa != "auto":
        env["CPU_ISA"] = args.isa
    if not args.no_peer and not Path(DEV_PYTHON).exists():
        sys.exit(f"{DEV_PYTHON} missing: make dev-venv (with gptqmodel, see scripts/requirements-dev.txt), "
                 "or --no-peer")
    args.work.mkdir(parents=True, exist_ok=True)
    paths = ensure_checkpoints(args.work, args.layers)
    read = {kind: decode_read_bytes(p) for kind, p in paths.items()}
    held = {kind: held_bytes(p, env) for kind, p in paths.items()}
    for kind in paths:
        print(f"{kind:14s} decode reads {read[kind] / 1e9:.3f} GB as stored; weights held {held[kind] / 1e9:.3f} GB",
              flush=True)
    load_start = os.getloadavg()
    runs = {kind: {test: [] for test in TESTS} for kind in paths}
    loads = {kind: [] for kind in paths}
    bandwidth = {kind: [] for kind in paths}  # measured just before each tg128 run
    peer = []
    for r in range(args.rounds):
        kinds = list(paths) if r % 2 == 0 else list(reversed(paths))
        for kind in kinds:
            loads[kind].append(measure_load(paths[kind], args.threads, env))
            print(f"round {r}: {kind:14s} load {loads[kind][-1]['seconds']} s, peak RSS "
                  f"{loads[kind][-1]['peak_rss_mib']} MiB", flush=True)
            for test in TESTS:
                if test == "tg128":
                    bandwidth[kind].append(measure_bandwidth(paths["q4_0"], args.threads, env))
                v = run_ours(paths[kind], args.threads, test, env, args.isa)
                runs[kind][test].append(round(v, 3))
                print(f"round {r}: {kind:14s} {test}: {v:8.2f} tok/s", flush=True)
        if not args.no_peer:
            peer.append(run_peer(paths["gptq"], args.threads, args.peer_tokens))
            print(f"round {r}: transformers gptq: decode {peer[-1]['decode']:.3f} tok/s, prefill "
                  f"{peer[-1]['prefill']:.2f} tok/s ({peer[-1]['kernel']})", flush=True)
    rows = {}
    for kind in paths:
        roofline = [b / read[kind] for b in bandwidth[kind]]
        tg = runs[kind]["tg128"]
        row = {"decode_read_bytes_as_stored": read[kind], "weights_bytes_held": held[kind],
               "tokens_per_second": runs[kind], "load": loads[kind],
               "read_bandwidth_bytes_per_second": bandwidth[kind],
               "bandwidth_roofline_tokens_per_second": [round(x, 3) for x in roofline],
               "decode_fraction_of_roofline": spread([t / rf for t, rf in zip(tg, roofline)])}
        if kind != "q4_0":
            for test in ("pp64", "pp512"):
                row[f"{test}_over_q4_0"] = spread([a / b for a, b in zip(runs[kind][test], runs["q4_0"][test])])
        rows[kind] = row
    if peer:
        for kind in ("gptq", "gptq-actorder", "awq"):
            rows[kind]["decode_over_transformers_gptq"] = spread(
                [a / p["decode"] for a, p in zip(runs[kind]["tg128"], peer)])
            rows[kind]["pp64_over_transformers_gptq"] = spread(
                [a / p["prefill"] for a, p in zip(runs[kind]["pp64"], peer)])
    for kind, row in rows.items():
        print(f"{kind:14s} decode {statistics.median(row['tokens_per_second']['tg128']):6.2f} tok/s = "
              f"{row['decode_fraction_of_roofline']['median']:.0%} of the roofline of its stored bytes "
              + (f"| pp512 / q4_0 {row['pp512_over_q4_0']['median']:.2f}" if "pp512_over_q4_0" in row else "")
              + (f" | decode / transformers {row['decode_over_transformers_gptq']['median']:.1f}x"
                 if "decode_over_transformers_gptq" in row else ""), flush=True)
    doc = {"what": "issue 20: GPTQ/AWQ 4-bit g128 checkpoints at Llama-2-7B's shape: decode vs the bandwidth "
                   "roofline of their stored bytes, prefill vs our Q4_0, and vs transformers on the same GPTQ "
                   "checkpoint",
           "tool": "scripts/bench/gptq_awq.py", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "command": " ".join(sys.argv), "isa": args.isa, "threads": args.threads, "layers": args.layers,
           "rounds": args.rounds, "loadavg_start": load_start, "loadavg_end": os.getloadavg(),
           "rows": rows,
           "transformers_gptq": peer, "transformers_tokens": args.peer_tokens}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
