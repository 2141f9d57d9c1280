# The README's two commands: `make run` (the main job) and `make test`. Both install what is
# missing, configure, build and run.
PRESET ?= release
BUILD_DIR := build/$(PRESET)

.PHONY: run run-ddp test test-asan test-arm64 deps configure build bench fuzz format install-test clean onnx-conformance wasm test-wasm web-demo

run: build
	./$(BUILD_DIR)/examples/fashion-mnist/fashion-mnist

# The main job data-parallel on 2 processes of this machine (Open MPI's mpirun; docs/distributed.md
# has the cluster form with srun). Rank 0 prints and writes runs/fashion-mnist-ddp/.
MPIRUN ?= mpirun --allow-run-as-root --oversubscribe
DDP_RANKS ?= 2
run-ddp: build
	$(MPIRUN) -np $(DDP_RANKS) ./$(BUILD_DIR)/examples/fashion-mnist/fashion-mnist --ddp --plain --name fashion-mnist-ddp

# Failed tests run once more, alone, with their output printed last so that a log's tail shows
# why; one that passes then is reported as flaky, one that fails twice fails the target.
test: build
	bash scripts/ctest-retry.sh $(PRESET)

test-asan:
	$(MAKE) test PRESET=asan

# ARM64 Linux (docs/micro.md, "ARM64 Linux"; not part of `make test`, run by CI): the cross build of core,
# fusion, the CPU backend (portable kernels, Highway NEON/SVE/SVE2) and nn with the conformance
# suite and the unit tests of the kernels (tests/arm64/), run under qemu-user: everything at an
# SVE vector length of 128 bits, the conformance suite at 512 bits (the unit tests take about
# 18 minutes there under emulation; ARM64_CTEST_ARGS= runs them too).
ARM64_CTEST_ARGS ?= -R arm64_conformance
test-arm64:
	@bash scripts/install-deps.sh --arm64
	@test -f build/arm64/CMakeCache.txt || cmake --preset arm64
	cmake --build --preset arm64
	@echo "== ARM64 under qemu-user, SVE vector length 128 bits"
	KILN_SVE_VL=16 ctest --test-dir build/arm64 -j2 --output-on-failure
	@echo "== ARM64 under qemu-user, SVE vector length 512 bits"
	KILN_SVE_VL=64 ctest --test-dir build/arm64 -j2 --output-on-failure $(ARM64_CTEST_ARGS)

deps:
	@bash scripts/install-deps.sh

configure: deps
	@test -f $(BUILD_DIR)/CMakeCache.txt || cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET)

bench: build
	bash bench/run.sh

# Installs the build into a scratch prefix and builds and runs tests/install (an outside project
# that finds the package and links kiln::kiln, kiln::data and kiln::train) against it.
install-test: build
	ctest --preset $(PRESET) -R install_find_package

# The ONNX backend test cases through the run-time path and code generation (kiln-onnx + compile
# + run; slow, not part of `make test`), on Debian's libonnx-testdata and on the PyPI `onnx`
# wheel's newer set (pip-installed here when missing; skipped when that fails). Rewrites the
# table docs/onnx-ops.md.
onnx-conformance: build
	python3 scripts/onnx_codegen_conformance.py $(BUILD_DIR) --table docs/onnx-ops.md

# libFuzzer targets (tests/fuzz/fuzz_*.cpp), each run for FUZZ_SECONDS on its seed corpus
# tests/fuzz/corpus/<target>/; new inputs go to build/fuzz/corpus/<target>/ and crashing inputs
# to build/fuzz/crashers/<target>/ (fix, then copy them to tests/fuzz/crashers/<target>/).
FUZZ_SECONDS ?= 60
fuzz: deps
	@test -f build/fuzz/CMakeCache.txt || cmake --preset fuzz
	cmake --build --preset fuzz
	@set -e; for bin in build/fuzz/tests/fuzz/fuzz_*; do \
	  test -f $$bin -a -x $$bin || continue; \
	  t=$$(basename $$bin); mkdir -p build/fuzz/corpus/$$t build/fuzz/crashers/$$t; \
	  seeds=; test -d tests/fuzz/corpus/$$t && seeds=tests/fuzz/corpus/$$t; \
	  dict=; test -f tests/fuzz/$$t.dict && dict=-dict=tests/fuzz/$$t.dict; \
	  echo "== $$t ($(FUZZ_SECONDS) s)"; \
	  ASAN_OPTIONS=detect_leaks=1 $$bin -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 $$dict \
	    -artifact_prefix=build/fuzz/crashers/$$t/ build/fuzz/corpus/$$t $$seeds; \
	done

# The WebAssembly build (docs/web.md): installs emscripten when missing, configures build/wasm
# with the preset wasm and builds the unit subset and the README example; test-wasm runs them in
# node. KILN_WASM_THREADS=ON in the cache builds with -pthread.
# The ResNet page's generated code comes from the host's kiln-onnx (build/release's, built here).
KILN_ONNX_HOST := $(CURDIR)/build/release/tools/kiln-onnx/kiln-onnx
wasm:
	@bash scripts/install-deps.sh --wasm
	@test -f build/release/CMakeCache.txt || cmake --preset release
	cmake --build --preset release --target kiln-onnx
	@grep -qs '^KILN_ONNX_TOOL:FILEPATH=$(KILN_ONNX_HOST)$$' build/wasm/CMakeCache.txt || \
	  cmake --preset wasm -DKILN_ONNX_TOOL=$(KILN_ONNX_HOST)
	cmake --build --preset wasm

test-wasm: wasm
	ctest --preset wasm

# A demo page (examples/web/<DEMO>: fashion-mnist, resnet): builds it and serves it on
# http://127.0.0.1:$(WEB_PORT) until ^C; for fashion-mnist, with the model `make run` saved when
# there is one.
WEB_PORT ?= 8000
DEMO ?= fashion-mnist
WEB_DEMO := build/wasm/examples/web/$(DEMO)
web-demo: wasm
	@if [ "$(DEMO)" = fashion-mnist ]; then \
	  if [ -f runs/fashion-mnist/model.safetensors ]; then cp runs/fashion-mnist/model.safetensors $(WEB_DEMO)/; \
	  else echo "no runs/fashion-mnist/model.safetensors (make run trains it): the page starts untrained"; fi; fi
	@echo "serving $(WEB_DEMO) on http://127.0.0.1:$(WEB_PORT)"
	python3 -m http.server $(WEB_PORT) --bind 127.0.0.1 --directory $(WEB_DEMO)

# tests/data holds generated text compared byte for byte (the kernel renderers' golden files).
format:
	find include src tests examples bench -path tests/data -prune -o \( -name '*.h' -o -name '*.cpp' \) -print | \
	  xargs clang-format -i

clean:
	rm -rf build
