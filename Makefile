# The README's two commands: `make run` (the main job) and `make test`. Both install what is
# missing, configure, build and run.
PRESET ?= release
BUILD_DIR := build/$(PRESET)

.PHONY: run test test-asan deps configure build bench format install-test clean

run: build
	./$(BUILD_DIR)/examples/tensor-basics/tensor-basics

test: build
	ctest --preset $(PRESET) -j2

test-asan:
	$(MAKE) test PRESET=asan

deps:
	@bash scripts/install-deps.sh

configure: deps
	@test -f $(BUILD_DIR)/CMakeCache.txt || cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET)

bench: build
	bash bench/run.sh

format:
	find include src tests examples bench -name '*.h' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf build
