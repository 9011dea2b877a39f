# The two commands a new user runs: `make demo` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps configure build test test-sanitize demo examples bench fuzz clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The whole suite again under AddressSanitizer + UndefinedBehaviorSanitizer, in a build
# folder of its own (ccache keeps rebuilds short). Any report fails the test that made it.
# Without precompiled headers, so that it also checks every file includes what it uses.
# -O1 with line tables only (-g1) compiles in half the time of -O2 -g and still gives each
# report's stack its files and lines.
SANITIZE_BUILD ?= build-asan
test-sanitize: deps
	cmake -S . -B $(SANITIZE_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBATON_SANITIZE=ON \
	      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DBATON_BENCH=OFF -DBATON_PCH=OFF $(CMAKE_FLAGS)
	cmake --build $(SANITIZE_BUILD) -j $(JOBS)
	cd $(SANITIZE_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# The main job: train the default CNN on Fashion-MNIST for 2 epochs (about a minute on
# 2 cores), write it as ONNX and print the test accuracy; then describe the deployable
# model. The examples run as part of `make test`.
demo: build
	$(BUILD)/bin/baton train --export $(BUILD)/cnn.onnx
	$(BUILD)/bin/baton info $(BUILD)/cnn.onnx

examples: build
	@for ex in $(BUILD)/bin/0*_*; do echo "== $$(basename $$ex)"; $$ex || exit 1; echo; done

bench: build
	$(BUILD)/bin/baton-bench

# libFuzzer targets (clang 16, ASan + UBSan) in build-fuzz, each run for FUZZ_SECONDS over
# its corpus; see fuzz/README.md. FUZZ_TARGETS picks some (graph_text checkpoint idx cli).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
fuzz: deps
	FUZZ_BUILD=build-fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_TARGETS="$(FUZZ_TARGETS)" JOBS=$(JOBS) fuzz/run.sh

clean:
	rm -rf $(BUILD)
