#!/usr/bin/env bash
# XGrammar's C++ core (constrained decoding, src/grammar/) from its pinned PyPI sdist: downloaded
# once into .cache/, checked against the sha256 below, unpacked to .cache/xgrammar-0.2.8 and
# patched with scripts/patches/xgrammar-0.2.8/*.patch (in name order: gaps in what it enforces,
# each patch says which), which CMake builds as a static library (no Python bindings). Idempotent;
# nothing of it is committed.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.2.8
SHA256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
URL=https://files.pythonhosted.org/packages/03/0f/29f521535729be740779c2c98b630ef6607cf28be9b669895dd2b821ff63/xgrammar-${VERSION}.tar.gz
SDIST=.cache/xgrammar-${VERSION}.tar.gz
DEST=.cache/xgrammar-${VERSION}
shopt -s nullglob
PATCHES=(scripts/patches/xgrammar-${VERSION}/*.patch)

# The marker holds a hash of the sdist's pin and the patches (names and contents): a copy unpacked
# or patched otherwise (a CI cache, an older checkout) is unpacked and patched again.
STAMP=$({
  echo "$SHA256"
  if ((${#PATCHES[@]})); then sha256sum "${PATCHES[@]}"; fi
} | sha256sum | cut -d' ' -f1)
[ -f "$DEST/.unpacked" ] && [ "$(cat "$DEST/.unpacked")" = "$STAMP" ] && exit 0
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
echo "setup: unpacking and patching xgrammar-${VERSION}"
# Unpacked and patched beside the destination, then moved into place: an interrupted run or a
# patch that fails leaves no half-patched tree under the name the build uses.
TMP=.cache/xgrammar-${VERSION}.unpacking
rm -rf "$TMP"
mkdir -p "$TMP"
# -m: every file gets the time of this unpack, so the build recompiles the whole library (ccache
# hits for unchanged files) rather than keeping objects of a file a patch no longer changes.
tar -xzmf "$SDIST" -C "$TMP"
# --fuzz=0: a patch applies where its context matches exactly or the script fails (no marker).
for p in "${PATCHES[@]}"; do
  patch -d "$TMP/xgrammar-${VERSION}" -p1 --forward --fuzz=0 --quiet <"$p"
done
echo "$STAMP" >"$TMP/xgrammar-${VERSION}/.unpacked"
rm -rf "$DEST"
mv "$TMP/xgrammar-${VERSION}" "$DEST"
rm -rf "$TMP"
