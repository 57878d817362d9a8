#!/usr/bin/env bash
# The one prepared check for a GPU machine that has nvcc and CMake but none of Debian's -dev
# libraries (docs/gpu.md). Stage 1, the kernels: configures only the CUDA kernels, their CPU
# twins and their tests (-DLM_CUDA_KERNELS_ONLY=ON, GoogleTest built from .cache/googletest),
# builds them, runs the `cuda`-labelled tests (none may be skipped there) and the kernel bandwidth
# benchmark. Stage 2, the model (issue 25): unpacks the server and the CUDA runner's tests, built
# on the development machine (.cache/gpu-bundle.tar.xz: they link -dev libraries this machine
# lacks), regenerates the tiny fixture checkpoints (numpy), runs the runner against the
# transformers fixtures (greedy tokens identical, logits within the test's tolerance), then
# scripts/gpu/bench_7b.py: a served 7B-shaped BF16 checkpoint (the HTTP smoke test) against
# transformers on this GPU. scripts/gpu/prepare_carry.sh makes both carried files; the device
# tool's run must carry [".cache/googletest", ".cache/gpu-bundle.tar.xz"].
# $OUT (default ./gpu-out) gets summary.txt, bench.jsonl, bench_7b.json and logs.tar.gz (every
# step's log: the device tool brings back at most 8 files). Exits nonzero on any failure.
# Environment: OUT, BUILD_DIR (default build-gpu), JOBS (default 16), CUDA_ARCHS (default: the
# project's 80-real;89-real;90-real), SKIP_KERNELS=1 (stage 2 only), SKIP_BENCH=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-16}
mkdir -p "$OUT"
LOGS=$(mktemp -d)
summary="$OUT/summary.txt"
: > "$summary"
status=0
t0=$(date +%s)

log() { echo "[device_check] $*" | tee -a "$summary"; }

# step NAME COMMAND...: runs COMMAND with its output in $LOGS/NAME.log; on failure shows the tail.
step() {
  local name=$1 start rc
  shift
  log "== $name: $*"
  start=$(date +%s)
  "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]]; then
    log "   ok ($(($(date +%s) - start))s)"
  else
    log "   FAILED rc=$rc after $(($(date +%s) - start))s (see $name.log)"
    tail -n 60 "$LOGS/$name.log"
    status=1
  fi
  return $rc
}

finish() {
  log "total $(($(date +%s) - t0))s, status $status"
  tar -C "$LOGS" -czf "$OUT/logs.tar.gz" .
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
} > "$LOGS/machine.txt" 2>&1

if [[ -z ${SKIP_KERNELS:-} ]]; then
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
  --output-junit "$LOGS/ctest-cuda.xml") > "$LOGS/tests.log" 2>&1
rc=$?
tail -n 30 "$LOGS/tests.log"
if [[ $rc -ne 0 ]]; then
  log "== tests: FAILED rc=$rc (see tests.log)"
  status=1
elif grep -q "(Skipped)" "$LOGS/tests.log"; then
  log "== tests: some tests were SKIPPED on a GPU machine (no device visible?)"
  status=1
elif ! grep -q "tests passed" "$LOGS/tests.log"; then
  log "== tests: no test summary found"
  status=1
else
  log "== tests: $(grep 'tests passed' "$LOGS/tests.log")"
fi

if step bench "$BUILD_DIR/tests/kernels_cuda_bench" "$OUT/bench.jsonl"; then
  tee -a "$summary" < "$LOGS/bench.log"
fi
fi  # SKIP_KERNELS

# ---- stage 2: the model on the device --------------------------------------------------------
bundle=.cache/gpu-bundle.tar.xz
if [[ ! -f $bundle ]]; then
  log "no $bundle: run scripts/gpu/prepare_carry.sh on the dev machine and carry it"
  status=1
  finish
fi
mkdir -p "$BUILD_DIR"
step unpack tar -C "$BUILD_DIR" -xJf "$bundle" || finish
bin=$PWD/$BUILD_DIR/gpu-bundle/bin
# The bundle's libraries (Debian's, beside its binaries), then CUDA's own from this machine.
export LD_LIBRARY_PATH="$PWD/$BUILD_DIR/gpu-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
step test-models python3 scripts/fixtures/make_test_checkpoints.py --out "$BUILD_DIR/test-models" \
  || finish
export LM_TEST_REPO_ROOT=$PWD LM_TEST_MODELS=$PWD/$BUILD_DIR/test-models
if step runner "$bin/runtime_cuda_tests"; then
  if grep -q "SKIPPED \]" "$LOGS/runner.log"; then
    log "== runner: SKIPPED on a GPU machine (no device visible?)"
    status=1
  fi
fi
grep "\[ measured \]" "$LOGS/runner.log" | tee -a "$summary"
if [[ -z ${SKIP_BENCH:-} ]]; then
  if step bench_7b python3 scripts/gpu/bench_7b.py --launcher "$bin/text-generation-launcher" \
       --tokenizer "$PWD/$BUILD_DIR/gpu-bundle/tokenizer" --work "$BUILD_DIR/bench" \
       --out "$OUT/bench_7b.json"; then
    tail -n 20 "$LOGS/bench_7b.log" | tee -a "$summary"
  fi
  [[ -f $OUT/bench_7b.server.log ]] && mv "$OUT/bench_7b.server.log" "$LOGS/"
fi
finish
