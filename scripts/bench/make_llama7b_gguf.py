#!/usr/bin/env python3
"""Writes a Llama-2-7B-shaped GGUF with seeded random weights (32 layers, hidden 4096, 32 heads,
intermediate 11008, vocab 32000) for CPU speed benchmarks: the shapes and the bytes per token of
the real model, without downloading it. The vocabulary is Llama-2's (llama.cpp's
ggml-vocab-llama-spm.gguf, fetched by scripts/fetch_models.sh), so both engines tokenize normally.

  --type q4_0    every matrix Q4_0, output.weight Q6_K (as llama.cpp's Q4_0 files)
  --type q4_k_m  llama.cpp's Q4_K_M mix: Q4_K, with Q6_K for output.weight and for attn_v /
                 ffn_down on the layers llama.cpp gives more bits (first and last eighth, every
                 third in between)

Blocks are random bytes with small fp16 scales (|w| ~ 0.02): the values are meaningless, the
memory traffic and arithmetic are those of the real model. Runs with the light .venv (numpy, gguf).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import gguf
import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType as Q

REPO_ROOT = Path(__file__).resolve().parents[2]
LAYERS, HIDDEN, HEADS, INTERMEDIATE, VOCAB = 32, 4096, 32, 11008, 32000

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


def more_bits(layer: int) -> bool:
    return layer < LAYERS // 8 or layer >= 7 * LAYERS // 8 or (layer - LAYERS // 8) % 3 == 2


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--type", choices=["q4_0", "q4_k_m"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab", type=Path, default=REPO_ROOT / "models/vocab/ggml-vocab-llama-spm.gguf")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    base = Q.Q4_0 if args.type == "q4_0" else Q.Q4_K

    w = gguf.GGUFWriter(str(args.out) + ".tmp", "llama")
    w.add_name(f"llama-2-7b-shaped-random-{args.type}")
    w.add_context_length(4096)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(INTERMEDIATE)
    w.add_block_count(LAYERS)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0 if args.type == "q4_0" else gguf.LlamaFileType.MOSTLY_Q4_K_M)
    vocab = gguf.GGUFReader(str(args.vocab))
    w.add_tokenizer_model("llama")
    w.add_token_list([bytes(vocab.fields["tokenizer.ggml.tokens"].parts[i]) for i in vocab.fields["tokenizer.ggml.tokens"].data])
    w.add_token_scores([float(vocab.fields["tokenizer.ggml.scores"].parts[i][0]) for i in vocab.fields["tokenizer.ggml.scores"].data])
    w.add_token_types([int(vocab.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in vocab.fields["tokenizer.ggml.token_type"].data])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def add(name: str, qtype: Q, rows: int, cols: int) -> None:
        w.add_tensor(name, random_blocks(rng, qtype, rows, cols), raw_dtype=qtype)

    def norm() -> np.ndarray:
        return (1.0 + 0.05 * rng.standard_normal(HIDDEN)).astype(np.float32)

    add("token_embd.weight", base, VOCAB, HIDDEN)
    for i in range(LAYERS):
        p = f"blk.{i}."
        heavy = Q.Q6_K if args.type == "q4_k_m" and more_bits(i) else base
        w.add_tensor(p + "attn_norm.weight", norm())
        add(p + "attn_q.weight", base, HIDDEN, HIDDEN)
        add(p + "attn_k.weight", base, HIDDEN, HIDDEN)
        add(p + "attn_v.weight", heavy, HIDDEN, HIDDEN)
        add(p + "attn_output.weight", base, HIDDEN, HIDDEN)
        w.add_tensor(p + "ffn_norm.weight", norm())
        add(p + "ffn_gate.weight", base, INTERMEDIATE, HIDDEN)
        add(p + "ffn_up.weight", base, INTERMEDIATE, HIDDEN)
        add(p + "ffn_down.weight", heavy, HIDDEN, INTERMEDIATE)
    w.add_tensor("output_norm.weight", norm())
    add("output.weight", Q.Q6_K, VOCAB, HIDDEN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    Path(str(args.out) + ".tmp").replace(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e9:.2f} GB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
