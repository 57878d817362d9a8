#!/usr/bin/env bash
# Builds llama.cpp's own tools (llama-server, llama-bench, llama-quantize) from the llama.cpp
# source tree inside the pinned llama-cpp-python sdist on PyPI, for side-by-side benchmarks.
# Output: .cache/llama.cpp/build/bin/. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/fetch_models.sh
VERSION=0.3.36
SRC=.cache/llama.cpp/llama.cpp
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  mkdir -p .cache/llama.cpp
  tar -xzf ".cache/downloads/llama_cpp_python-$VERSION.tar.gz" -C .cache/llama.cpp --strip-components=2 \
    "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
cmake -S "$SRC" -B .cache/llama.cpp/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF > /dev/null
cmake --build .cache/llama.cpp/build -j "$(nproc)" --target llama-server llama-bench llama-quantize
ls -l .cache/llama.cpp/build/bin/
