#!/usr/bin/env bash
# The one prepared check for a GPU machine that has nvcc and CMake but none of Debian's -dev
# libraries: configures only the CUDA kernels, their CPU twins and their tests
# (-DLM_CUDA_KERNELS_ONLY=ON, GoogleTest built from .cache/googletest, which
# scripts/gpu/prepare_carry.sh makes and the device tool must carry), builds them, runs the
# `cuda`-labelled tests (none may be skipped there) and the kernel bandwidth benchmark.
# Everything lands under $OUT (default ./gpu-out). Exits nonzero on any failure.
# Environment: OUT, BUILD_DIR (default build-gpu), JOBS (default 16), CUDA_ARCHS (default: the
# project's 80-real;89-real;90-real).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: > "$summary"
status=0
t0=$(date +%s)

log() { echo "[device_check] $*" | tee -a "$summary"; }

# step NAME COMMAND...: runs COMMAND with its output in $OUT/NAME.log; on failure shows the tail.
step() {
  local name=$1 start rc
  shift
  log "== $name: $*"
  start=$(date +%s)
  "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]]; then
    log "   ok ($(($(date +%s) - start))s)"
  else
    log "   FAILED rc=$rc after $(($(date +%s) - start))s (see $name.log)"
    tail -n 60 "$OUT/$name.log"
    status=1
  fi
  return $rc
}

finish() {
  log "total $(($(date +%s) - t0))s, status $status"
  exit $status
}

if ! command -v nvcc > /dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

{
  nvidia-smi || true
  nvcc --version || true
  cmake --version || true
  nproc
} > "$OUT/machine.txt" 2>&1

if [[ ! -f .cache/googletest/CMakeLists.txt ]]; then
  log "no .cache/googletest: run scripts/gpu/prepare_carry.sh on the dev machine and pass"
  log "carry [\".cache/googletest\"] to the device tool"
  status=1
  finish
fi

configure=(cmake -S . -B "$BUILD_DIR" -DLM_CUDA_KERNELS_ONLY=ON -DLM_WERROR=ON
           -DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [[ -n ${CUDA_ARCHS:-} ]]; then
  configure+=("-DCMAKE_CUDA_ARCHITECTURES=$CUDA_ARCHS")
fi
step configure "${configure[@]}" || finish
step build cmake --build "$BUILD_DIR" -j "$JOBS" || finish

# Tests: every `cuda` test must run (a skip here means the device was not seen: a failure).
(cd "$BUILD_DIR" && ctest -L cuda --output-on-failure --timeout 600 \
  --output-junit "$OUT/ctest-cuda.xml") > "$OUT/tests.log" 2>&1
rc=$?
tail -n 30 "$OUT/tests.log"
if [[ $rc -ne 0 ]]; then
  log "== tests: FAILED rc=$rc (see tests.log)"
  status=1
elif grep -q "(Skipped)" "$OUT/tests.log"; then
  log "== tests: some tests were SKIPPED on a GPU machine (no device visible?)"
  status=1
elif ! grep -q "tests passed" "$OUT/tests.log"; then
  log "== tests: no test summary found"
  status=1
else
  log "== tests: $(grep 'tests passed' "$OUT/tests.log")"
fi

if step bench "$BUILD_DIR/tests/kernels_cuda_bench" "$OUT/bench.jsonl"; then
  tee -a "$summary" < "$OUT/bench.log"
fi
finish
