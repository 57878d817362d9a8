"""A seeded tiny random-weight Llama over SmolLM2's real tokenizer (49,152 tokens), written as an HF
folder: its unconstrained output is garbage, so a grammar test on it fails unless the mask alone
makes the output valid."""

import json
import shutil

import numpy as np
from safetensors.numpy import save_file

from conftest import LAUNCHER

SMOLLM2_TOKENIZER = LAUNCHER.parents[2] / "test-models" / "tokenizers" / "smollm2"
VOCAB_SIZE = 49152  # SmolLM2's tokenizer


def write_model(folder, chat_template=None):
    """Writes the model into `folder` (with `chat_template` replacing the tokenizer's, if given);
    returns its tokenizer_config."""
    hidden, inter, layers, heads, kv_heads = 64, 128, 2, 4, 2
    head_dim = hidden // heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": hidden, "intermediate_size": inter, "num_hidden_layers": layers,
        "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "rope_scaling": None, "tie_word_embeddings": True, "torch_dtype": "float32",
        "vocab_size": VOCAB_SIZE, "bos_token_id": 1, "eos_token_id": 2,
    }
    rng = np.random.default_rng(19)

    def w(*shape):
        return rng.normal(0.0, 0.3, size=shape).astype(np.float32)

    tensors = {"model.embed_tokens.weight": w(VOCAB_SIZE, hidden),
               "model.norm.weight": np.ones(hidden, np.float32)}
    for i in range(layers):
        p = f"model.layers.{i}."
        tensors.update({
            p + "self_attn.q_proj.weight": w(heads * head_dim, hidden),
            p + "self_attn.k_proj.weight": w(kv_heads * head_dim, hidden),
            p + "self_attn.v_proj.weight": w(kv_heads * head_dim, hidden),
            p + "self_attn.o_proj.weight": w(hidden, heads * head_dim),
            p + "mlp.gate_proj.weight": w(inter, hidden),
            p + "mlp.up_proj.weight": w(inter, hidden),
            p + "mlp.down_proj.weight": w(hidden, inter),
            p + "input_layernorm.weight": np.ones(hidden, np.float32),
            p + "post_attention_layernorm.weight": np.ones(hidden, np.float32),
        })
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    (folder / "generation_config.json").write_text(
        json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    shutil.copy(SMOLLM2_TOKENIZER / "tokenizer.json", folder / "tokenizer.json")
    tokenizer_config = json.loads((SMOLLM2_TOKENIZER / "tokenizer_config.json").read_text())
    if chat_template is not None:
        tokenizer_config["chat_template"] = chat_template
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    return tokenizer_config
