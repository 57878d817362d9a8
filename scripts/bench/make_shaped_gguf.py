#!/usr/bin/env python3
"""Writes GGUFs with the shapes of real models and seeded random weights, for CPU speed benchmarks:
the shapes and the bytes per token of the real models, without downloading them.

  --shape llama7b    Llama-2-7B (32 layers, hidden 4096, 32 heads, intermediate 11008, vocab 32000)
  --shape mixtral4l  Mixtral-8x7B's layers (hidden 4096, 32 heads / 8 KV heads, 8 experts of
                     14336, top-2, vocab 32000), 4 of its 32 layers: per layer and per token the
                     real model's work (a 47B file does not fit the benchmark machine's time)
  --shape gemma2-2b  Gemma-2-2B (26 layers, hidden 2304, 8 heads / 4 KV heads of 256, GeGLU 9216,
                     vocab 256000, tied, sandwich norms, soft-caps, local/global layers with a
                     4096 window)

  --type q4_0    every matrix Q4_0, output (or the tied embedding) Q6_K, as llama.cpp's Q4_0 files
  --type q4_k_m  llama.cpp's Q4_K_M mix: Q4_K, with Q6_K for the output and for attn_v / ffn_down
                 on the layers llama.cpp gives more bits (first and last eighth, every third in
                 between)
  --type f16, --type bf16
                 every matrix, output and embedding included, in 16 bits (normal values, std 0.02)

  --layers N     only the first N of the shape's layers (per layer and per token the real model's
                 work; e.g. a 7B-shaped F16 file of 8 layers is 3.7 GB instead of 13.5)

The vocabulary is Llama-2's (llama.cpp's ggml-vocab-llama-spm.gguf, fetched by
scripts/fetch_models.sh), padded with unused tokens to Gemma's 256000, so both engines tokenize
normally. Blocks are random bytes with small fp16 scales (|w| ~ 0.02): the values are meaningless,
the memory traffic and arithmetic are those of the real model. MoE routers stay F32 (llama.cpp's
quantizer leaves ffn_gate_inp alone). Tensors are generated one at a time as they are written, so
a file larger than memory can be made. Runs with the light .venv (numpy, gguf).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as Q

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Shape:
    arch: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    experts: int = 0
    experts_used: int = 0


SHAPES = {
    "llama7b": Shape("llama", 32, 4096, 32, 32, 128, 11008, 32000),
    "mixtral4l": Shape("llama", 4, 4096, 32, 8, 128, 14336, 32000, experts=8, experts_used=2),
    "gemma2-2b": Shape("gemma2", 26, 2304, 8, 4, 256, 9216, 256000),
}

# Byte offsets of each block's fp16 scales and the largest scale drawn for them.
SCALES = {
    Q.Q4_0: ([0], 0.004),
    Q.Q4_K: ([0, 2], 5e-5),
    Q.Q6_K: ([208], 1e-5),
}


def random_blocks(rng: np.random.Generator, qtype: Q, rows: int, cols: int) -> np.ndarray:
    block_size, block_bytes = GGML_QUANT_SIZES[qtype]
    blocks = rows * cols // block_size
    raw = rng.integers(0, 256, size=(blocks, block_bytes), dtype=np.uint8)
    offsets, hi = SCALES[qtype]
    for off in offsets:
        raw[:, off : off + 2] = rng.uniform(hi / 4, hi, size=blocks).astype(np.float16).view(np.uint8).reshape(blocks, 2)
    return raw.reshape(rows, cols // block_size * block_bytes)


def random_halves(rng: np.random.Generator, qtype: Q, rows: int, cols: int) -> np.ndarray:
    values = (0.02 * rng.standard_normal((rows, cols), dtype=np.float32))
    if qtype == Q.F16:
        return values.astype(np.float16)
    bits = values.view(np.uint32)  # bf16: round to nearest even
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def more_bits(layer: int, layers: int) -> bool:
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def add_vocab(w: gguf.GGUFWriter, vocab_path: Path, size: int) -> None:
    vocab = gguf.GGUFReader(str(vocab_path))
    f = vocab.fields
    tokens = [bytes(f["tokenizer.ggml.tokens"].parts[i]) for i in f["tokenizer.ggml.tokens"].data]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
    for i in range(len(tokens), size):  # padding: never produced by the tokenizer
        tokens.append(f"<unused{i}>".encode())
        scores.append(0.0)
        types.append(int(gguf.TokenType.UNUSED))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama7b")
    ap.add_argument("--type", choices=["q4_0", "q4_k_m", "f16", "bf16"], required=True)
    ap.add_argument("--layers", type=int, help="only the first N layers of the shape")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab", type=Path, default=REPO_ROOT / "models/vocab/ggml-vocab-llama-spm.gguf")
    args = ap.parse_args()
    s = SHAPES[args.shape]
    if args.layers:
        s = dataclasses.replace(s, layers=args.layers)
    rng = np.random.default_rng(7)
    base = {"q4_0": Q.Q4_0, "q4_k_m": Q.Q4_K, "f16": Q.F16, "bf16": Q.BF16}[args.type]
    half = base in (Q.F16, Q.BF16)
    gemma = s.arch == "gemma2"
    q_dim, kv_dim = s.heads * s.head_dim, s.kv_heads * s.head_dim

    w = gguf.GGUFWriter(str(args.out) + ".tmp", s.arch)
    w.add_name(f"{args.shape}-shaped-random-{args.type}")
    w.add_context_length(8192 if gemma else 4096)
    w.add_embedding_length(s.hidden)
    w.add_feed_forward_length(s.intermediate)
    w.add_block_count(s.layers)
    w.add_head_count(s.heads)
    w.add_head_count_kv(s.kv_heads)
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_rope_dimension_count(s.head_dim)
    w.add_layer_norm_rms_eps(1e-6 if gemma else 1e-5)
    w.add_vocab_size(s.vocab)
    if s.experts:
        w.add_expert_count(s.experts)
        w.add_expert_used_count(s.experts_used)
        w.add_rope_freq_base(1e6)
    if gemma:  # Gemma-2-2B's soft-caps and window (the converter's keys)
        w.add_sliding_window(4096)
        w.add_attn_logit_softcapping(50.0)
        w.add_final_logit_softcapping(30.0)
    w.add_file_type({"q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M,
                     "f16": gguf.LlamaFileType.MOSTLY_F16, "bf16": gguf.LlamaFileType.MOSTLY_BF16}[args.type])
    add_vocab(w, args.vocab, s.vocab)
    # Each tensor's info now, its values when it is written (in the same order, so the same draws).
    makers = []

    def put(name: str, shape: tuple, dtype, raw_dtype, make) -> None:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        w.add_tensor_info(name, shape, np.dtype(dtype), nbytes, raw_dtype=raw_dtype)
        makers.append(make)

    def add(name: str, qtype: Q, rows: int, cols: int, count: int = 0) -> None:
        if half:  # 16-bit files keep every matrix in their type
            assert count == 0, "16-bit expert stacks are not made here"
            dtype = np.float16 if base == Q.F16 else np.uint16
            put(name, (rows, cols), dtype, None if base == Q.F16 else Q.BF16,
                lambda: random_halves(rng, base, rows, cols))
            return
        block_size, block_bytes = GGML_QUANT_SIZES[qtype]
        row_bytes = cols // block_size * block_bytes
        if count == 0:
            put(name, (rows, row_bytes), np.uint8, qtype, lambda: random_blocks(rng, qtype, rows, cols))
        else:  # an experts stack [count, rows, cols]
            put(name, (count, rows, row_bytes), np.uint8, qtype,
                lambda: random_blocks(rng, qtype, count * rows, cols).reshape(count, rows, row_bytes))

    def add_f32(name: str, make) -> None:
        put(name, (s.hidden,), np.float32, None, make)

    def norm() -> np.ndarray:
        return (1.0 + 0.05 * rng.standard_normal(s.hidden)).astype(np.float32)

    # A tied embedding is also the output: it gets the output's type (llama.cpp's quantizer).
    add("token_embd.weight", Q.Q6_K if gemma else base, s.vocab, s.hidden)
    for i in range(s.layers):
        p = f"blk.{i}."
        heavy = Q.Q6_K if args.type == "q4_k_m" and more_bits(i, s.layers) else base
        add_f32(p + "attn_norm.weight", norm)
        add(p + "attn_q.weight", base, q_dim, s.hidden)
        add(p + "attn_k.weight", base, kv_dim, s.hidden)
        add(p + "attn_v.weight", heavy, kv_dim, s.hidden)
        add(p + "attn_output.weight", base, s.hidden, q_dim)
        if gemma:
            add_f32(p + "post_attention_norm.weight", norm)
            add_f32(p + "post_ffw_norm.weight", norm)
        add_f32(p + "ffn_norm.weight", norm)
        if s.experts:
            put(p + "ffn_gate_inp.weight", (s.experts, s.hidden), np.float32, None,
                lambda: (rng.standard_normal((s.experts, s.hidden)) / np.sqrt(s.hidden)).astype(np.float32))
            add(p + "ffn_gate_exps.weight", base, s.intermediate, s.hidden, s.experts)
            add(p + "ffn_up_exps.weight", base, s.intermediate, s.hidden, s.experts)
            add(p + "ffn_down_exps.weight", heavy, s.hidden, s.intermediate, s.experts)
        else:
            add(p + "ffn_gate.weight", base, s.intermediate, s.hidden)
            add(p + "ffn_up.weight", base, s.intermediate, s.hidden)
            add(p + "ffn_down.weight", heavy, s.hidden, s.intermediate)
    add_f32("output_norm.weight", norm)
    if not gemma:
        add("output.weight", Q.Q6_K, s.vocab, s.hidden)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for make in makers:
        w.write_tensor_data(make())
    w.close()
    Path(str(args.out) + ".tmp").replace(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e9:.2f} GB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
