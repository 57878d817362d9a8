#!/usr/bin/env bash
# Run HERE (the development machine) before a device check (scripts/gpu/device_check.sh, whose
# GPU machine has nvcc but none of Debian's -dev packages). Makes the two git-ignored files the
# device tool's run must carry:
#   .cache/googletest          Debian's GoogleTest sources, for the kernels-only build there;
#   .cache/gpu-bundle.tar.xz   the launcher and the CUDA runner's tests built here (BUILD_DIR,
#                              default build, configured with CUDA), stripped, with the shared
#                              libraries they need beyond glibc and CUDA's own (libcudart,
#                              cuBLAS: the GPU machine's toolkit has them), and the Llama-2
#                              tokenizer the 7B-shaped benchmark checkpoint uses.
# Usage: scripts/gpu/prepare_carry.sh  (then: run(command="scripts/gpu/device_check.sh",
#        carry=[".cache/googletest", ".cache/gpu-bundle.tar.xz"], timeout_s=540))
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

BUILD_DIR=${BUILD_DIR:-build}
if ! grep -q "LM_WITH_CUDA" "$BUILD_DIR/src/kernels/cuda/CMakeFiles/lm_kernels_cuda.dir/flags.make" \
     2>/dev/null; then
  echo "prepare_carry: $BUILD_DIR is not a CUDA build (configure it with nvcc on the PATH)" >&2
  exit 1
fi
tokenizer=$BUILD_DIR/test-models/tokenizers/llama-spm
[[ -f $tokenizer/tokenizer.json ]] || make fixtures-test
cmake --build "$BUILD_DIR" -j "$(nproc)" --target text-generation-launcher runtime_cuda_tests
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/gpu-bundle/bin" "$stage/gpu-bundle/lib" "$stage/gpu-bundle/tokenizer"
binaries=("$BUILD_DIR/src/app/text-generation-launcher" "$BUILD_DIR/tests/runtime_cuda_tests")
for b in "${binaries[@]}"; do
  strip -o "$stage/gpu-bundle/bin/$(basename "$b")" "$b"
done
# Every library the binaries load but glibc's (the GPU machine's own must be used) and CUDA's.
for lib in $(ldd "${binaries[@]}" | awk '/=>/ { print $3 }' | sort -u); do
  case $(basename "$lib") in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libresolv.so* | ld-linux* | \
      libcu*) continue ;;
  esac
  cp -L "$lib" "$stage/gpu-bundle/lib/"
done
cp "$tokenizer"/tokenizer*.json "$stage/gpu-bundle/tokenizer/"
tar -C "$stage" -cJf .cache/gpu-bundle.tar.xz gpu-bundle
echo "prepare_carry: .cache/gpu-bundle.tar.xz ready ($(du -h .cache/gpu-bundle.tar.xz | cut -f1))"
