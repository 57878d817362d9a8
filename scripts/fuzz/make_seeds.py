#!/usr/bin/env python3
"""Writes the small hand-made seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/.

The seeds are committed; this script documents how they were made and rewrites them. Larger seeds
(fixtures, the chat templates, llama.cpp's tokenizer texts) are listed by path in
tests/fuzz/corpus/<target>.seeds instead. Needs the project's .venv (gguf, numpy).
"""
import json
import os
import sys
import tempfile

import numpy as np
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")


def write(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def gguf_bytes(build):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "seed.gguf")
        w = gguf.GGUFWriter(path, "llama")
        build(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as f:
            return f.read()


def gguf_seeds():
    def every_type(w):
        w.add_uint8("t.u8", 7)
        w.add_int8("t.i8", -7)
        w.add_uint16("t.u16", 700)
        w.add_int16("t.i16", -700)
        w.add_uint32("t.u32", 70000)
        w.add_int32("t.i32", -70000)
        w.add_float32("t.f32", 1.5)
        w.add_uint64("t.u64", 1 << 40)
        w.add_int64("t.i64", -(1 << 40))
        w.add_float64("t.f64", 2.25)
        w.add_bool("t.bool", True)
        w.add_string("t.str", "hello")
        w.add_array("t.arr", [1, 2, 3])
        w.add_array("t.strs", ["a", "b"])
        w.add_uint32("general.alignment", 32)
        w.add_tensor("a", np.arange(8, dtype=np.float32).reshape(2, 4))
        w.add_tensor("b", np.ones((3,), dtype=np.float16))

    tokens = ["<unk>", "<s>", "</s>", "a", "b", "c", " ", "ab", "abc", "\u0120a", "<0x41>", "\u2581a"]

    def bpe_vocab(w):
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("llama-bpe")
        w.add_token_list(tokens)
        w.add_token_types([3, 3, 3] + [1] * (len(tokens) - 3))
        w.add_token_merges(["a b", "ab c"])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(True)
        w.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")

    def spm_vocab(w):
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -0.5, -0.2, -5.0, -6.0, -0.1])
        w.add_token_types([2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6, 1])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        w.add_add_space_prefix(True)
        w.add_tensor("w", np.zeros((2, 32), dtype=np.float32))

    write("gguf", "every_type.gguf", gguf_bytes(every_type))
    write("gguf", "bpe_vocab.gguf", gguf_bytes(bpe_vocab))
    write("gguf", "spm_vocab.gguf", gguf_bytes(spm_vocab))


def tokenizer_json_seeds():
    byte_level = {
        "version": "1.0",
        "added_tokens": [
            {"id": 5, "content": "<|end|>", "special": True, "lstrip": False, "rstrip": False,
             "normalized": False, "single_word": False},
            {"id": 6, "content": "tool", "special": False, "lstrip": True, "rstrip": True,
             "normalized": True, "single_word": True},
        ],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True}]},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<|end|>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<|end|>": {"id": "<|end|>", "ids": [5]}}},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "unk_token": None, "byte_fallback": False, "fuse_unk": False,
                  "ignore_merges": True,
                  "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4, "1": 7},
                  "merges": ["a b", ["\u0120", "ab"]]},
    }
    spm = {
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "BertProcessing", "cls": ["<s>", 1], "sep": ["</s>", 2]},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True,
                  "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "a": 4, "\u2581a": 5,
                            "<0x41>": 6, "<0xC3>": 7, "<0xA9>": 8},
                  "merges": ["\u2581 a"]},
    }
    metaspace = {
        "model": {"vocab": {"\u2581x": 0, "x": 1, "\u2581": 2}, "merges": [["\u2581", "x"]]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                          "split": True},
        "normalizer": {"type": "Lowercase"},
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"},
    }
    config = {"bos_token": "<s>", "eos_token": {"content": "</s>"},
              "chat_template": "{{ messages }}"}
    write("tokenizer_json", "byte_level.json",
          json.dumps(byte_level) + "\0" + json.dumps({"eos_token": "<|end|>"}) +
          "\0ab 123 <|end|>tool\u00e9")
    write("tokenizer_json", "spm.json",
          json.dumps(spm) + "\0" + json.dumps(config) + "\0a A \u00e9 \u4e2d")
    write("tokenizer_json", "metaspace.json", json.dumps(metaspace) + "\0\0X x xx")


def tokenizer_encode_seeds():
    texts = ["Hello world", " leading and  double  spaces ", "numbers 1234567 and 3.14",
             "<|begin_of_text|>special<|eot_id|> <s>x</s>", "\u00e9\u4e2d\u6587 emoji \U0001F600",
             "tabs\tand\nnewlines\r\n", "'s 've 're contractions", "\ufffd\u200b zero-width"]
    for i, text in enumerate(texts):
        for flags in (0x00, 0x31, 0x52, 0xE0):
            write("tokenizer_encode", f"text{i}_{flags:02x}", bytes([flags]) + text.encode())
    write("tokenizer_encode", "invalid_utf8", b"\x11ab\xff\xc3(\xe2\x82")


def chat_template_seeds():
    write("chat_template", "loops.jinja",
          "{% set ns = namespace(n=0) %}{% for m in messages if m.role != 'system' %}"
          "{{ loop.index }}:{{ m.role|upper }} {{ m.content|string|trim }}{% set ns.n = ns.n + 1 %}"
          "{% if loop.last %}{{ ns.n }}{% endif %}{% endfor %}{{ messages|tojson(indent=2) }}")
    write("chat_template", "macros.jinja",
          "{% macro f(x, y=2) %}{{ x * y }}{{ caller() if caller else '' }}{% endmacro %}"
          "{{ f(3) }}{% call f('ab') %}in{% endcall %}{{ range(3)|list }}{{ 'a,b'.split(',') }}"
          "{{ [3,1,2]|sort|join('-') }}{{ {'k': 1}.items()|list }}{{ 'x' ~ 1 ~ none }}"
          "{{ messages[1:3]|map(attribute='role')|join }}{{ 7 // 2 }}{{ 2 ** 10 }}{{ 'abc'[::-1] }}")
    write("chat_template", "with_messages.jinja",
          "{{ messages[0].content }}{{ tools|length }}\0"
          + json.dumps([{"role": "user", "content": "x", "n": [1, 2.5, None, True]}])
          + "\0" + json.dumps([{"type": "function", "function": {"name": "f"}}]))


def tgi_request_seeds():
    bodies = [
        {"inputs": "Hello"},
        {"inputs": "x", "parameters": {"max_new_tokens": 5, "temperature": 0.5, "top_k": 10,
                                       "top_p": 0.9, "typical_p": 0.5, "repetition_penalty": 1.2,
                                       "frequency_penalty": 0.1, "stop": ["a", "b"],
                                       "seed": 42, "do_sample": True, "details": True,
                                       "decoder_input_details": True, "top_n_tokens": 2,
                                       "truncate": 3, "return_full_text": True,
                                       "watermark": False, "best_of": 2}},
        {"inputs": "x", "parameters": {"grammar": {"type": "json",
                                                   "value": {"properties": {"a": {"type": "integer"}}}}}},
        {"inputs": "x", "parameters": {"grammar": {"type": "regex", "value": "[a-z]+"}},
         "stream": True},
        {"inputs": "x", "parameters": None},
    ]
    for i, body in enumerate(bodies):
        for flags in (0, 3, 6):
            write("tgi_request", f"body{i}_{flags}", bytes([flags]) + json.dumps(body).encode())
    write("tgi_request", "malformed", b"\x00{\"inputs\": \"x\", \"parameters\": {\"max_new_tokens\": -1}")


def openai_request_seeds():
    chat = [
        {"model": "tgi", "messages": [{"role": "user", "content": "Hi"}]},
        {"messages": [{"role": "system", "content": "s"},
                      {"role": "user", "content": [{"type": "text", "text": "a"},
                                                   {"type": "image_url", "image_url": {"url": "u"}}]},
                      {"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
                                                            "function": {"name": "f",
                                                                         "arguments": "{}"}}]},
                      {"role": "tool", "tool_call_id": "1", "content": "r"}],
         "max_tokens": 5, "temperature": 0, "top_p": 0.5, "n": 2, "stop": "x", "stream": True,
         "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 2,
         "seed": 1, "presence_penalty": 0.5, "frequency_penalty": 0.5,
         "logit_bias": {"5": 10.0}},
        {"messages": [{"role": "user", "content": "w"}],
         "tools": [{"type": "function", "function": {"name": "get", "description": "d",
                                                     "parameters": {"type": "object",
                                                                    "properties": {"a": {"type": "string"}}}}}],
         "tool_choice": "required", "parallel_tool_calls": True, "tool_prompt": "use"},
        {"messages": [{"role": "user", "content": "j"}],
         "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object"}}}},
        {"messages": [{"role": "user", "content": "j"}], "response_format": {"type": "json_object"}},
    ]
    completion = [
        {"prompt": "Hi", "max_tokens": 3},
        {"prompt": ["a", "b"], "echo": True, "logprobs": 2, "n": 2, "stop": ["x"], "seed": 3,
         "temperature": 0.7, "top_p": 0.9, "repetition_penalty": 1.1, "stream": True,
         "logit_bias": {"1": -100}},
        {"prompt": [1, 2, 3]},
        {"prompt": [[1, 2], [3]], "suffix": "s"},
    ]
    for i, body in enumerate(chat):
        for flags in (0x00, 0x12, 0x26):
            write("openai_request", f"chat{i}_{flags:02x}", bytes([flags]) + json.dumps(body).encode())
    for i, body in enumerate(completion):
        for flags in (0x01, 0x15):
            write("openai_request", f"completion{i}_{flags:02x}",
                  bytes([flags]) + json.dumps(body).encode())


def http_router_seeds():
    def req(method, path, body=None, headers=None):
        lines = [f"{method} {path}"]
        hs = dict(headers or {})
        if body is not None:
            hs.setdefault("Content-Type", "application/json")
        lines += [f"{k}: {v}" for k, v in hs.items()]
        text = "\n".join(lines) + "\n\n"
        if body is not None:
            text += body if isinstance(body, str) else json.dumps(body)
        return text

    seeds = {
        "generate": req("POST", "/generate", {"inputs": "Hello", "parameters": {"max_new_tokens": 5,
                                                                               "details": True,
                                                                               "top_n_tokens": 2}}),
        "generate_stream": req("POST", "/generate_stream",
                               {"inputs": "Hi", "parameters": {"max_new_tokens": 8, "stop": ["a"]}}),
        "compat": req("POST", "/", {"inputs": "x", "stream": True}),
        "best_of": req("POST", "/generate", {"inputs": "x", "parameters": {
            "best_of": 2, "do_sample": True, "max_new_tokens": 3, "decoder_input_details": True,
            "details": True}}),
        "invocations": req("POST", "/invocations", {"messages": [{"role": "user", "content": "c"}]}),
        "chat": req("POST", "/v1/chat/completions",
                    {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6,
                     "logprobs": True, "top_logprobs": 2, "n": 2}),
        "chat_stream": req("POST", "/v1/chat/completions",
                           {"messages": [{"role": "system", "content": "s"},
                                         {"role": "user", "content": "<|im_end|>"}],
                            "stream": True, "stream_options": {"include_usage": True}}),
        "chat_tools": req("POST", "/v1/chat/completions",
                          {"messages": [{"role": "user", "content": "w"}],
                           "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}),
        "completions": req("POST", "/v1/completions",
                           {"prompt": ["a", "b"], "max_tokens": 4, "echo": True, "logprobs": 1}),
        "completions_ids": req("POST", "/v1/completions", {"prompt": [[1, 2, 3]], "stream": True}),
        "chat_tokenize": req("POST", "/chat_tokenize",
                             {"messages": [{"role": "user", "content": "t"}]}),
        "tokenize": req("POST", "/tokenize", {"inputs": "token ize"}),
        "health": req("GET", "/health"),
        "info": req("GET", "/info", headers={"Origin": "http://x"}),
        "metrics": req("GET", "/metrics"),
        "models": req("GET", "/v1/models"),
        "openapi": req("GET", "/api-doc/openapi.json"),
        "docs": req("HEAD", "/docs/index.html"),
        "options": req("OPTIONS", "/generate"),
        "wrong_type": req("POST", "/generate", "{}", {"Content-Type": "text/plain"}),
        "not_found": req("GET", "/nope?x=1"),
    }
    for name, text in seeds.items():
        write("http_router", name, text)


def loader_seeds():
    import collections
    import pickle
    import struct

    write("torch_bin", "plain.pkl",
          pickle.dumps({"a": (1, -2, 2.5, "x", b"y", [None, True, False]), "b": 1 << 40}, protocol=2))
    write("torch_bin", "ordered_dict.pkl",
          pickle.dumps(collections.OrderedDict([("w", (1, 2)), ("v", [3])]), protocol=2))
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                         "b": {"dtype": "I64", "shape": [1, 1], "data_offsets": [4, 12]},
                         "c": {"dtype": "F32", "shape": [0, 3], "data_offsets": [12, 12]}}).encode()
    write("safetensors", "three.safetensors", struct.pack("<Q", len(header)) + header + bytes(12))
    write("safetensors", "index.json",
          json.dumps({"metadata": {"total_size": 8},
                      "weight_map": {"a": "model-00001-of-00002.safetensors",
                                     "b": "model-00002-of-00002.safetensors"}}))


def main():
    loader_seeds()
    gguf_seeds()
    tokenizer_json_seeds()
    tokenizer_encode_seeds()
    chat_template_seeds()
    tgi_request_seeds()
    openai_request_seeds()
    http_router_seeds()
    return 0


if __name__ == "__main__":
    sys.exit(main())
