#!/usr/bin/env bash
# One-time set-up on a fresh Debian 12 machine (run as root; `make` calls it). Installs what is
# missing and nothing else: Debian build dependencies, a project-local Python virtualenv (.venv)
# with the light test-time tools, XGrammar's pinned sdist (constrained decoding, built by CMake),
# the default model and the reference vocabularies.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential cmake ccache pkg-config patch clang-format python3-venv unzip curl
  nlohmann-json3-dev libspdlog-dev libfmt-dev libpcre2-dev libicu-dev libgtest-dev libgmock-dev
  libcli11-dev libboost-dev libcurl4-openssl-dev libssl-dev)
# `setup.sh --fuzz` (scripts/fuzz/run.sh) adds clang, whose libFuzzer and sanitizer runtimes the
# long fuzzing runs link; `make test` builds everything, fuzz targets included, with g++.
FUZZ_PACKAGES=(clang)
if [ "${1:-}" = --fuzz ]; then APT_PACKAGES+=("${FUZZ_PACKAGES[@]}"); fi

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Test-time Python tools (no torch): numpy/safetensors/gguf write the seeded test checkpoints,
# tokenizers is only used to cross-check fixtures, never by the server.
if [ ! -x .venv/bin/python ] || [ scripts/requirements-test.txt -nt .venv/.stamp ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r scripts/requirements-test.txt
  touch .venv/.stamp
fi

scripts/fetch_xgrammar.sh
scripts/fetch_models.sh
