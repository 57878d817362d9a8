#!/usr/bin/env python3
"""Writes a 16-bit Llama GGUF as the Hugging Face folder it would have been converted from: the
same weights as sharded safetensors (model-0000i-of-0000n.safetensors + the index, shards of at
most --shard-bytes as `save_pretrained` cuts them), config.json (LlamaForCausalLM, torch_dtype
the file's), and tokenizer.json / tokenizer_config.json from the GGUF's own vocabulary
(scripts/fixtures/hf_tokenizer_from_gguf.py). For benchmarks that run us on the HF folder and
llama.cpp on the GGUF: the same model, so the same work.

Names and layout are transformers' (convert_hf_to_gguf.py's mapping read backwards): attn_q /
attn_k rows are put back from llama.cpp's rotary order (pairs of halves interleaved) into HF's
(first half, second half of each head), so both files compute the same logits. Matrices keep
their type (F16 or BF16); the norms stay F32, as in the GGUF (a checkpoint may keep them in
fp32; our loader reads either), so the two files hold the same values bit for bit.

  .venv/bin/python scripts/bench/hf_folder_from_gguf.py --gguf .cache/models/llama7b8l-random-F16.gguf \\
      --out .cache/models/llama7b8l-random-F16-hf

Runs with the light .venv (numpy, gguf). Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import sys
from pathlib import Path

import gguf
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts/fixtures"))
from hf_tokenizer_from_gguf import write_hf_tokenizer  # noqa: E402
from make_test_checkpoints import unpermute_rows  # noqa: E402  (llama.cpp's Q/K row order undone)

# GGUF tensor name pieces -> transformers' (LlamaForCausalLM).
TOP_LEVEL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
PER_LAYER = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
DTYPES = {gguf.GGMLQuantizationType.F32: "F32", gguf.GGMLQuantizationType.F16: "F16",
          gguf.GGMLQuantizationType.BF16: "BF16"}
VIEWS = {gguf.GGMLQuantizationType.F32: np.float32, gguf.GGMLQuantizationType.F16: np.float16,
         gguf.GGMLQuantizationType.BF16: np.uint16}


def hf_name(name: str) -> str:
    if name in TOP_LEVEL:
        return TOP_LEVEL[name]
    parts = name.split(".")
    if len(parts) != 4 or parts[0] != "blk" or parts[2] not in PER_LAYER or parts[3] != "weight":
        sys.exit(f"{name}: not a tensor of a plain Llama (biases, rope_freqs, experts are not written)")
    return f"model.layers.{parts[1]}.{PER_LAYER[parts[2]]}.weight"


def field(reader: gguf.GGUFReader, key: str):
    f = reader.fields[key]
    return f.parts[f.data[0]][0] if f.types[0] != gguf.GGUFValueType.STRING else bytes(f.parts[f.data[0]]).decode()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shard-bytes", type=int, default=2 * 10**9)
    args = ap.parse_args()
    reader = gguf.GGUFReader(str(args.gguf))
    arch = field(reader, "general.architecture")
    if arch != "llama":
        sys.exit(f"{args.gguf}: {arch}, only llama is written")
    if any(key.startswith("llama.rope.scaling.") for key in reader.fields):
        sys.exit(f"{args.gguf}: RoPE scaling is not written into config.json")
    heads = int(field(reader, "llama.attention.head_count"))
    kv_heads = int(field(reader, "llama.attention.head_count_kv"))
    tensors = []  # (hf name, dtype, shape, values as stored)
    matrix_types = set()
    for t in reader.tensors:
        if t.tensor_type not in DTYPES:
            sys.exit(f"{t.name}: {t.tensor_type.name}; only F32/F16/BF16 files are written")
        # gguf-py hands BF16 over as bytes: the values' own shape is the tensor's (GGUF order reversed).
        values = np.asarray(t.data).view(VIEWS[t.tensor_type]).reshape([int(d) for d in reversed(t.shape)])
        if t.name.endswith("attn_q.weight"):
            values = unpermute_rows(values, heads)
        elif t.name.endswith("attn_k.weight"):
            values = unpermute_rows(values, kv_heads)
        if values.ndim == 2:
            matrix_types.add(DTYPES[t.tensor_type])
        tensors.append((hf_name(t.name), DTYPES[t.tensor_type], list(values.shape), values))
    if len(matrix_types) != 1 or matrix_types == {"F32"}:
        sys.exit(f"matrices in {sorted(matrix_types)}: one 16-bit type expected")
    torch_dtype = {"F16": "float16", "BF16": "bfloat16"}[matrix_types.pop()]

    shards, size = [[]], 0
    for entry in tensors:
        if shards[-1] and size + entry[3].nbytes > args.shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(entry)
        size += entry[3].nbytes
    tmp = args.out.with_name(args.out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        header, offset = {"__metadata__": {"format": "pt"}}, 0
        for name, dtype, shape, values in shard:
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + values.nbytes]}
            offset += values.nbytes
            weight_map[name] = file
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(tmp / file, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text)
            for _, _, _, values in shard:
                f.write(np.ascontiguousarray(values).tobytes())
        total += offset
    (tmp / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2) + "\n")
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": torch_dtype,
        "hidden_size": int(field(reader, "llama.embedding_length")),
        "intermediate_size": int(field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(field(reader, "llama.block_count")),
        "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "max_position_embeddings": int(field(reader, "llama.context_length")),
        # as written (1e-05), not its float32 value
        "rms_norm_eps": float(f"{field(reader, 'llama.attention.layer_norm_rms_epsilon'):.7g}"),
        "rope_theta": float(field(reader, "llama.rope.freq_base") if "llama.rope.freq_base" in reader.fields
                            else 10000.0),
        "vocab_size": len(reader.fields["tokenizer.ggml.tokens"].data),
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "tie_word_embeddings": "output.weight" not in {t.name for t in reader.tensors},
        "hidden_act": "silu",
    }
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_hf_tokenizer(str(args.gguf), str(tmp))
    shutil.rmtree(args.out, ignore_errors=True)
    tmp.rename(args.out)
    print(f"wrote {args.out} ({len(shards)} shard(s), {total / 1e9:.2f} GB, {torch_dtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
