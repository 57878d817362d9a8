#!/usr/bin/env bash
# Builds llama.cpp's own tools (llama-server, llama-bench, llama-quantize) from the llama.cpp
# source tree inside the pinned llama-cpp-python sdist on PyPI, for side-by-side benchmarks.
# Not part of `make test`.
#
#   scripts/bench/build_llama_cpp.sh [--isa native|avx2|avx512|avx512-vnni|avx512-bf16] [--dry-run]
#
# --isa native (default): the best this machine runs, into $LLAMA_CPP_DIR/build/bin/. GGML_NATIVE
#   (-march=native) compiles in AMX wherever CPUID advertises it, and such a build dies with
#   SIGILL where the tiles do not run (some VMs). So AMX is tried first (a tiny C program asks
#   for the tile state and runs a tile instruction: amx_usable below); where it is advertised but
#   does not run, the build is GGML_NATIVE=OFF with the instruction sets /proc/cpuinfo lists (the
#   kernel drops those whose register state it does not enable), AMX off.
# --isa LEVEL: one of our --cpu-isa levels and nothing above it (GGML_NATIVE=OFF), into
#   $LLAMA_CPP_DIR/build-LEVEL/bin/, so that cpu_side_by_side.py --isa LEVEL compares like with
#   like (e.g. avx2: the peer an AVX2-only machine gets).
# --dry-run: print the decision and the CMake options, build nothing.
# LLAMA_CPP_DIR (default .cache/llama.cpp): where the sources are unpacked and the builds go.
# LLAMA_CPP_SRC: an llama.cpp source tree to build instead (e.g. another checkout's
#   .cache/llama.cpp/llama.cpp), so a worktree need not unpack its own.
set -euo pipefail
cd "$(dirname "$0")/../.."
ISA=native
DRY_RUN=0
while [ $# -gt 0 ]; do
  case "$1" in
    --isa) ISA="$2"; shift 2 ;;
    --isa=*) ISA="${1#--isa=}"; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    *) echo "usage: $0 [--isa native|avx2|avx512|avx512-vnni|avx512-bf16] [--dry-run]" >&2; exit 2 ;;
  esac
done
DIR=${LLAMA_CPP_DIR:-.cache/llama.cpp}
VERSION=0.3.36
SRC=${LLAMA_CPP_SRC:-$DIR/llama.cpp}

# 0 when the CPU advertises AMX and a tile instruction runs; 1 when it does not (or the compiler
# cannot build the probe); 2 when the CPU does not advertise AMX. The probe asks for the tile state
# as ggml does (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) and then executes tiles: the
# permission alone proves nothing (on the Sapphire Rapids VM this was written on, the prctl
# succeeds and XCR0 has the tile bits, yet tilezero raises SIGILL, as in ggml's AMX kernels).
amx_usable() {
  grep -qw amx_tile /proc/cpuinfo || return 2
  local tmp
  tmp=$(mktemp -d)
  cat > "$tmp/amx.c" <<'EOF'
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return 1; /* ARCH_REQ_XCOMP_PERM, XTILEDATA */
  unsigned char cfg[64];
  memset(cfg, 0, sizeof cfg);
  cfg[0] = 1;                 /* palette 1 */
  cfg[16] = 64; cfg[48] = 16; /* tile 0: 16 rows of 64 bytes */
  _tile_loadconfig(cfg);
  _tile_zero(0);
  _tile_release();
  return 0;
}
EOF
  local rc=1
  # (the braces' redirection also silences the shell's "Illegal instruction" report)
  { cc -O1 -mamx-tile -o "$tmp/amx" "$tmp/amx.c" && "$tmp/amx" && rc=0; } 2>/dev/null || true
  rm -rf "$tmp"
  return $rc
}

# GGML options for the instruction sets /proc/cpuinfo lists, AMX off.
cpuinfo_options() {
  local flags opts=(-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
  flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
  local pair
  for pair in sse4_2:SSE42 avx:AVX avx2:AVX2 fma:FMA f16c:F16C bmi2:BMI2 avx_vnni:AVX_VNNI \
      avx512f:AVX512 avx512vbmi:AVX512_VBMI avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
    if [[ "$flags" == *" ${pair%%:*} "* ]]; then opts+=("-DGGML_${pair#*:}=ON"); else opts+=("-DGGML_${pair#*:}=OFF"); fi
  done
  echo "${opts[@]}"
}

# GGML options for one of our levels (kernels/cpu/isa.h): its instruction sets and nothing above.
level_options() {
  local off_512="-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF"
  local base="-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_AVX_VNNI=OFF"
  local avx2="-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  case "$1" in
    avx2) echo "$base $avx2 $off_512" ;;
    avx512) echo "$base $avx2 -DGGML_AVX512=ON -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF" ;;
    avx512-vnni) echo "$base $avx2 -DGGML_AVX512=ON -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=OFF" ;;
    avx512-bf16) echo "$base $avx2 -DGGML_AVX512=ON -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON" ;;
    *) echo "unknown --isa $1 (native, avx2, avx512, avx512-vnni, avx512-bf16)" >&2; return 1 ;;
  esac
}

if [ "$ISA" = native ]; then
  BUILD=$DIR/build
  set +e; amx_usable; AMX=$?; set -e
  case $AMX in
    0) OPTIONS="-DGGML_NATIVE=ON"; WHY="native (AMX advertised and its tiles run)" ;;
    2) OPTIONS="-DGGML_NATIVE=ON"; WHY="native (no AMX advertised)" ;;
    *) OPTIONS=$(cpuinfo_options)
       WHY="AMX advertised but its tiles do not run here: GGML_NATIVE=OFF, /proc/cpuinfo's sets, AMX off" ;;
  esac
else
  BUILD=$DIR/build-$ISA
  OPTIONS=$(level_options "$ISA")
  WHY="--isa $ISA: that level's instruction sets only"
fi
echo "llama.cpp build: $BUILD ($WHY)"
echo "  options: $OPTIONS"
[ "$DRY_RUN" = 1 ] && exit 0

scripts/fetch_models.sh
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  mkdir -p "$DIR"
  tar -xzf ".cache/downloads/llama_cpp_python-$VERSION.tar.gz" -C "$DIR" --strip-components=2 \
    "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
# shellcheck disable=SC2086  # OPTIONS is a list of words
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release $OPTIONS -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_OPENSSL=OFF > /dev/null
cmake --build "$BUILD" -j "$(nproc)" --target llama-server llama-bench llama-quantize
ls -l "$BUILD/bin/"
