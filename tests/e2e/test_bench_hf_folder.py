"""scripts/bench/hf_folder_from_gguf.py, which makes the HF folders of cpu_side_by_side.py's -hf
rows: a 16-bit Llama GGUF written back as the Hugging Face folder it would have been converted
from. A tiny Llama with grouped KV heads is made here in HF layout and written as llama.cpp's
converter writes it (Q and K rows permuted for its interleaved RoPE, HF names mapped); the script
must give back every tensor bit for bit under its HF name, in shards with an index, with a config
saying the shape, and our server must answer the same greedy tokens from the folder as from the
GGUF."""

import json
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, launch_server

sys.path.insert(0, str(ROOT / "scripts/bench"))
sys.path.insert(0, str(ROOT / "scripts/fixtures"))
import gguf  # noqa: E402
from make_shaped_gguf import add_vocab  # noqa: E402
from make_test_checkpoints import bf16_bits  # noqa: E402
from make_tiny_gguf import permute  # noqa: E402  (convert_hf_to_gguf.py's Q/K row order)

SCRIPT = ROOT / "scripts/bench/hf_folder_from_gguf.py"
VOCAB_GGUF = ROOT / "models/vocab/ggml-vocab-llama-spm.gguf"
HIDDEN, HEADS, KV_HEADS, INTERMEDIATE, LAYERS, VOCAB = 64, 4, 2, 128, 2, 32000
HEAD_DIM = HIDDEN // HEADS


def bits_of(values, dtype):
    """The stored 16-bit patterns."""
    return values.astype(np.float16).view(np.uint16) if dtype == "F16" else bf16_bits(values)


def hf_checkpoint(dtype):
    """HF name -> (safetensors dtype, stored values): 16-bit matrices as uint16 bits, F32 norms."""
    rng = np.random.default_rng(5)

    def matrix(rows, cols):
        return ("BF16" if dtype == "BF16" else "F16", bits_of(0.1 * rng.standard_normal((rows, cols)), dtype))

    def norm():
        return ("F32", (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))

    t = {"model.embed_tokens.weight": matrix(VOCAB, HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm()
        t[p + "self_attn.q_proj.weight"] = matrix(HEADS * HEAD_DIM, HIDDEN)
        t[p + "self_attn.k_proj.weight"] = matrix(KV_HEADS * HEAD_DIM, HIDDEN)
        t[p + "self_attn.v_proj.weight"] = matrix(KV_HEADS * HEAD_DIM, HIDDEN)
        t[p + "self_attn.o_proj.weight"] = matrix(HIDDEN, HEADS * HEAD_DIM)
        t[p + "post_attention_layernorm.weight"] = norm()
        t[p + "mlp.gate_proj.weight"] = matrix(INTERMEDIATE, HIDDEN)
        t[p + "mlp.up_proj.weight"] = matrix(INTERMEDIATE, HIDDEN)
        t[p + "mlp.down_proj.weight"] = matrix(HIDDEN, INTERMEDIATE)
    t["model.norm.weight"] = norm()
    t["lm_head.weight"] = matrix(VOCAB, HIDDEN)
    return t


GGUF_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
              "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
              "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down"}


def write_gguf(path, checkpoint, dtype):
    """The checkpoint as llama.cpp's converter lays it out."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(1024)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(INTERMEDIATE)
    w.add_block_count(LAYERS)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if dtype == "F16" else gguf.LlamaFileType.MOSTLY_BF16)
    add_vocab(w, VOCAB_GGUF, VOCAB)
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
           "lm_head.weight": "output.weight"}
    for name, (kind, values) in checkpoint.items():
        if name in top:
            gname = top[name]
        else:
            layer, module = name[len("model.layers."):-len(".weight")].split(".", 1)
            gname = f"blk.{layer}.{GGUF_NAMES[module]}.weight"
        if gname.endswith("attn_q.weight"):
            values = permute(values, HEADS, HEADS)
        elif gname.endswith("attn_k.weight"):
            values = permute(values, HEADS, KV_HEADS)
        if kind == "F32":
            w.add_tensor(gname, values)
        elif kind == "F16":
            w.add_tensor(gname, values.view(np.float16))
        else:
            w.add_tensor(gname, values, raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_folder(folder):
    """HF name -> (dtype, shape, raw bytes) over the index's shards."""
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    out = {}
    for shard in sorted(set(index["weight_map"].values())):
        data = (folder / shard).read_bytes()
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + size])
        header.pop("__metadata__", None)
        for name, info in header.items():
            begin, end = info["data_offsets"]
            out[name] = (info["dtype"], info["shape"], data[8 + size + begin : 8 + size + end])
            assert index["weight_map"][name] == shard
    return index, out


@pytest.mark.parametrize("dtype", ["F16", "BF16"])
def test_gguf_comes_back_as_its_hf_folder(tmp_path, dtype):
    checkpoint = hf_checkpoint(dtype)
    write_gguf(tmp_path / "model.gguf", checkpoint, dtype)
    folder = tmp_path / "hf"
    # Shards of ~2.5 MB: the 4 MB embedding and head each alone, the layers together.
    subprocess.run([sys.executable, str(SCRIPT), "--gguf", str(tmp_path / "model.gguf"), "--out", str(folder),
                    "--shard-bytes", str(2_500_000)], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    index, tensors = read_folder(folder)
    assert sorted(tensors) == sorted(checkpoint)
    assert len(set(index["weight_map"].values())) == 3
    assert index["metadata"]["total_size"] == sum(v.nbytes for _, v in checkpoint.values())
    for name, (kind, values) in checkpoint.items():
        assert tensors[name][0] == kind, name
        assert tensors[name][1] == list(values.shape), name
        assert tensors[name][2] == values.tobytes(), name
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert config["torch_dtype"] == {"F16": "float16", "BF16": "bfloat16"}[dtype]
    assert (config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]) == (
        HIDDEN, INTERMEDIATE, LAYERS)
    assert (config["num_attention_heads"], config["num_key_value_heads"]) == (HEADS, KV_HEADS)
    assert (config["vocab_size"], config["rms_norm_eps"], config["tie_word_embeddings"]) == (VOCAB, 1e-5, False)
    assert (config["rope_theta"], config["bos_token_id"], config["eos_token_id"]) == (10000.0, 1, 2)
    assert (folder / "tokenizer.json").exists()


def greedy(model):
    with launch_server(["--model-id", str(model), "--num-threads", "1"], use_flags_for_port=False) as server:
        r = server.post("/generate", {"inputs": "The capital of France is",
                                      "parameters": {"max_new_tokens": 12, "details": True}})
        assert r.status_code == 200, r.text
        return [(t["id"], t["logprob"]) for t in r.json()["details"]["tokens"]]


def test_the_server_answers_the_same_from_the_folder_as_from_the_gguf(tmp_path):
    write_gguf(tmp_path / "model.gguf", hf_checkpoint("F16"), "F16")
    subprocess.run([sys.executable, str(SCRIPT), "--gguf", str(tmp_path / "model.gguf"), "--out",
                    str(tmp_path / "hf")], check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    from_gguf, from_folder = greedy(tmp_path / "model.gguf"), greedy(tmp_path / "hf")
    assert [i for i, _ in from_folder] == [i for i, _ in from_gguf]
    # The same weights; RoPE on HF's row order and on llama.cpp's sums in another order.
    assert np.allclose([lp for _, lp in from_folder], [lp for _, lp in from_gguf], atol=1e-3)
