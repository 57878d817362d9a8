#!/usr/bin/env bash
# Run HERE (the development machine) before a device check: copies Debian's GoogleTest sources
# into .cache/googletest so the GPU machine, which has no -dev packages, can build them. The
# device tool's `run` must then carry ".cache/googletest" (it is git-ignored).
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${GOOGLETEST_SRC:-/usr/src/googletest}
if [[ ! -f $src/CMakeLists.txt ]]; then
  echo "prepare_carry: no GoogleTest sources at $src (apt-get install googletest)" >&2
  exit 1
fi
rm -rf .cache/googletest
mkdir -p .cache
cp -r "$src" .cache/googletest
echo "prepare_carry: .cache/googletest ready ($(du -sh .cache/googletest | cut -f1))"
