#!/usr/bin/env bash
# Long fuzzing runs: builds the fuzz targets (tests/fuzz/) with clang, libFuzzer, ASan and UBSan
# in their own build folder and runs each for SECONDS (default 300).
#
#   scripts/fuzz/run.sh [SECONDS] [TARGET...]      (no TARGET: all of them)
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_PARALLEL (targets run at once, default
# 1), FUZZ_KEEP_GOING=1 (libFuzzer's fork mode: record a finding and keep fuzzing instead of
# stopping at the first one).
# Under $FUZZ_BUILD_DIR/fuzz/: corpus/<target>/ (the corpus libFuzzer grows, kept between runs;
# not tracked), seeds/<target>/ (the committed seeds and fixtures of tests/fuzz/corpus, copied
# afresh each run), artifacts/<target>/ (crash-*, leak-*, timeout-*, oom-* inputs: replay one with
# `$FUZZ_BUILD_DIR/tests/fuzz/fuzz_<target> FILE`), logs/<target>.log, and results.json: per target
# the seconds run, the inputs executed and the findings.
set -euo pipefail
cd "$(dirname "$0")/../.."

ALL_TARGETS=(gguf safetensors torch_bin tokenizer_json tokenizer_encode chat_template tgi_request
  openai_request http_router)
seconds=${1:-300}
shift || true
targets=("$@")
((${#targets[@]})) || targets=("${ALL_TARGETS[@]}")
build=${FUZZ_BUILD_DIR:-build-fuzz}
parallel=${FUZZ_PARALLEL:-1}

# Longest input per target: each format's seeds fit with room to grow.
max_len() {
  case "$1" in
    torch_bin) echo 65536 ;;
    tokenizer_json | chat_template) echo 16384 ;;
    tokenizer_encode | tgi_request) echo 4096 ;;
    *) echo 8192 ;;
  esac
}

if ! command -v clang++ >/dev/null; then
  if [ "$(id -u)" = 0 ]; then scripts/setup.sh --fuzz; else
    echo "run.sh: needs clang (as root: scripts/setup.sh --fuzz)" >&2
    exit 2
  fi
fi
[ -x .venv/bin/python ] || scripts/setup.sh --fuzz

echo "run.sh: building ${targets[*]} in $build (clang, libFuzzer, ASan, UBSan)"
CC=clang CXX=clang++ cmake -S . -B "$build" -DLM_LIBFUZZER=ON -DLM_SANITIZE=address,undefined \
  -DLM_CUDA=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

out=$build/fuzz
mkdir -p "$out/logs"

# Seeds: the committed folder and the paths its .seeds file lists, flattened into one folder.
collect_seeds() {
  local target=$1 dir=$out/seeds/$1 path f
  local -a paths=()
  rm -rf "$dir" && mkdir -p "$dir"
  if [ -d "tests/fuzz/corpus/$target" ]; then paths+=("tests/fuzz/corpus/$target"); fi
  while read -r path; do
    if [ -n "$path" ]; then paths+=("$path"); fi
  done < <(grep -v '^#' "tests/fuzz/corpus/$target.seeds" || true)
  for path in "${paths[@]}"; do
    if [ ! -e "$path" ]; then
      echo "run.sh: $target: seed $path is missing" >&2
      continue
    fi
    while IFS= read -r f; do
      cp "$f" "$dir/$(sha1sum "$f" | cut -c1-16)"
    done < <(find "$path" -type f)
  done
}

run_target() {
  local target=$1 corpus=$out/corpus/$1 artifacts=$out/artifacts/$1 log=$out/logs/$1.log
  local -a mode=()
  mkdir -p "$corpus" "$artifacts"
  collect_seeds "$target"
  [ "${FUZZ_KEEP_GOING:-0}" = 1 ] && mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  local start end rc=0
  start=$(date +%s)
  "$build/tests/fuzz/fuzz_$target" "${mode[@]}" -max_total_time="$seconds" -timeout=25 \
    -rss_limit_mb=4096 -malloc_limit_mb=2048 -max_len="$(max_len "$target")" \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "$corpus" "$out/seeds/$target" \
    >"$log" 2>&1 || rc=$?
  end=$(date +%s)
  echo "$target $rc $((end - start)) $start" >"$out/logs/$target.status"
  echo "run.sh: $target: exit $rc after $((end - start)) s (log: $log)"
}

running=0
for target in "${targets[@]}"; do
  run_target "$target" &
  running=$((running + 1))
  if ((running >= parallel)); then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true

# One record per target: seconds, inputs executed, corpus size, findings (artifact files and the
# sanitizer's summary line).
.venv/bin/python - "$out" "${targets[@]}" <<'EOF'
import json, os, re, sys, time
out, targets = sys.argv[1], sys.argv[2:]
results_path = os.path.join(out, "results.json")
results = json.load(open(results_path)) if os.path.exists(results_path) else {"runs": []}
for target in targets:
    _, rc, secs, start = open(os.path.join(out, "logs", target + ".status")).read().split()
    log = open(os.path.join(out, "logs", target + ".log"), errors="replace").read()
    execs = re.findall(r"stat::number_of_executed_units: (\d+)", log) or re.findall(r"^#(\d+)", log, re.M)
    art_dir = os.path.join(out, "artifacts", target)
    artifacts = sorted(f for f in os.listdir(art_dir) if not f.startswith("slow-unit-")
                       and os.path.getmtime(os.path.join(art_dir, f)) >= int(start))
    summaries = sorted(set(re.findall(r"^SUMMARY: .*$", log, re.M)))
    record = {
        "target": target, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": int(secs), "exit_code": int(rc),
        "executions": int(execs[-1]) if execs else None,
        "corpus_files": len(os.listdir(os.path.join(out, "corpus", target))),
        "findings": artifacts, "sanitizer_summaries": summaries,
    }
    results["runs"].append(record)
    print(json.dumps(record))
json.dump(results, open(results_path, "w"), indent=2)
print("run.sh: results in " + results_path)
EOF
