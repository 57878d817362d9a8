# Front door. `make test` and `make run` work on a fresh Debian 12 machine as root: they install
# what is missing (scripts/setup.sh), build, and then test or serve.
BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DLM_WERROR=ON
MODEL ?= models/SmolLM2-135M-Instruct.Q4_1.gguf

ASAN_DIR ?= build-asan
TSAN_DIR ?= build-tsan
# The layers whose tests run under TSan: where the threads, locks and atomics are (thread pool and
# work queue, the engine thread, the HTTP server and its transport). `TSAN_LAYERS="... runtime"`
# adds the model executor (it builds the whole model stack under TSan).
TSAN_LAYERS ?= base engine server
# The layers whose tests CI runs under ASan+UBSan (`make sanitize-ci`, after `make test`): the
# hand-written parsers (loader, tokenizer, template, hub) and the serving path (grammar, engine,
# server), with every fuzz target over its seeds. The model stack (kernels, ops, model, runtime)
# and the e2e suite run instrumented in `make sanitize-address` only: they would not fit CI's time.
SANITIZE_CI_LAYERS ?= base tensor loader tokenizer template hub grammar engine server

.PHONY: all setup build test run fixtures-test dev-venv fixtures format format-check clean \
	sanitize asan-tree sanitize-address sanitize-thread sanitize-ci fuzz

all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS) > /dev/null
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Test-time data made from seeded generators (checkpoints in real HF layouts) under build/.
fixtures-test: setup
	@.venv/bin/python scripts/fixtures/make_test_checkpoints.py --out $(BUILD_DIR)/test-models
	@.venv/bin/python scripts/fixtures/make_kquant_checkpoint.py --out $(BUILD_DIR)/test-models/kquant-gguf
	@.venv/bin/python scripts/fixtures/make_tiny_gguf.py --out $(BUILD_DIR)/test-models
	@for t in smollm2:models/SmolLM2-135M-Instruct.Q4_1.gguf llama-spm:models/vocab/ggml-vocab-llama-spm.gguf \
	    llama-bpe:models/vocab/ggml-vocab-llama-bpe.gguf; do \
	  out=$(BUILD_DIR)/test-models/tokenizers/$${t%%:*}; \
	  [ -f $$out/tokenizer.json ] && [ $$out/tokenizer.json -nt scripts/fixtures/hf_tokenizer_from_gguf.py ] || \
	    .venv/bin/python scripts/fixtures/hf_tokenizer_from_gguf.py --gguf $${t#*:} --out $$out || exit 1; \
	done

test: build fixtures-test format-check
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 900
	@TGI_LAUNCHER=$(abspath $(BUILD_DIR))/src/app/text-generation-launcher .venv/bin/python -m pytest -q tests/e2e
	@# The image (Dockerfile) under podman: opt-in, it builds the image (minutes) and needs podman.
	@if [ "$${IMAGE_TESTS:-0}" = 1 ]; then scripts/deploy/test_image.sh; fi

# Sanitizers (cmake/sanitizers.cmake): ASan+UBSan on the whole project, every ctest test and the
# e2e suite against the instrumented launcher; TSan on the threaded layers' tests. Test data is
# $(BUILD_DIR)'s (fixtures-test), linked into the sanitizer trees.
sanitize: sanitize-address sanitize-thread

# The ASan+UBSan tree, configured, with $(BUILD_DIR)'s test data linked in.
asan-tree: fixtures-test
	@cmake -S . -B $(ASAN_DIR) $(CMAKE_FLAGS) -DLM_SANITIZE=address,undefined > /dev/null
	@ln -sfn $(abspath $(BUILD_DIR))/test-models $(ASAN_DIR)/test-models

sanitize-address: asan-tree
	@cmake --build $(ASAN_DIR) -j $(JOBS)
	@cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 1800 -LE cpu_isa
	@LM_E2E_SANITIZER=address,undefined TGI_LAUNCHER=$(abspath $(ASAN_DIR))/src/app/text-generation-launcher \
	  .venv/bin/python -m pytest -q tests/e2e

sanitize-ci: asan-tree
	@cmake --build $(ASAN_DIR) -j $(JOBS) --target $(addsuffix _tests,$(SANITIZE_CI_LAYERS)) \
	  fuzz_targets
	@cd $(ASAN_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 1800 \
	  -L '^($(subst $() ,|,$(strip $(SANITIZE_CI_LAYERS) fuzz)))$$'

sanitize-thread: fixtures-test
	@cmake -S . -B $(TSAN_DIR) $(CMAKE_FLAGS) -DLM_SANITIZE=thread > /dev/null
	@cmake --build $(TSAN_DIR) -j $(JOBS) --target $(addsuffix _tests,$(TSAN_LAYERS))
	@ln -sfn $(abspath $(BUILD_DIR))/test-models $(TSAN_DIR)/test-models
	@cd $(TSAN_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 1800 \
	  -L '^($(subst $() ,|,$(strip $(TSAN_LAYERS))))$$'

# Long fuzzing runs (scripts/fuzz/run.sh): every fuzz target under clang's libFuzzer with ASan and
# UBSan in build-fuzz/, FUZZ_SECONDS each (`make test` runs them for seconds with g++).
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?=
fuzz:
	@scripts/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Serves the default model with TGI's API on :8080 (Ctrl-C or SIGTERM drains and exits).
run: build
	$(BUILD_DIR)/src/app/text-generation-launcher --model-id $(MODEL) --port 8080

# Development only: the heavy reference tools (torch, transformers, llama-cpp-python).
dev-venv:
	python3 -m venv .venv-dev && .venv-dev/bin/pip install -q -r scripts/requirements-dev.txt

fixtures: build
	scripts/fixtures/regenerate_all.sh

format:
	@git ls-files '*.h' '*.cc' | xargs clang-format -i

format-check:
	@git ls-files '*.h' '*.cc' | xargs -r clang-format --dry-run --Werror

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(TSAN_DIR) build-fuzz
