#!/usr/bin/env bash
# XGrammar's C++ core (constrained decoding, src/grammar/) from its pinned PyPI sdist: downloaded
# once into .cache/, checked against the sha256 below and unpacked to .cache/xgrammar-0.2.8, which
# CMake builds as a static library (no Python bindings). Idempotent; nothing of it is committed.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.2.8
SHA256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
URL=https://files.pythonhosted.org/packages/03/0f/29f521535729be740779c2c98b630ef6607cf28be9b669895dd2b821ff63/xgrammar-${VERSION}.tar.gz
SDIST=.cache/xgrammar-${VERSION}.tar.gz
DEST=.cache/xgrammar-${VERSION}

[ -f "$DEST/.unpacked" ] && exit 0
mkdir -p .cache
if [ ! -f "$SDIST" ] || ! echo "$SHA256  $SDIST" | sha256sum -c --quiet - 2>/dev/null; then
  echo "setup: downloading xgrammar-${VERSION} sdist"
  curl -fsSL --retry 3 -o "$SDIST.part" "$URL"
  mv "$SDIST.part" "$SDIST"
fi
if ! echo "$SHA256  $SDIST" | sha256sum -c --quiet -; then
  echo "setup: $SDIST does not match its pinned sha256 $SHA256" >&2
  rm -f "$SDIST"
  exit 1
fi
rm -rf "$DEST"
tar -xzf "$SDIST" -C .cache
touch "$DEST/.unpacked"
