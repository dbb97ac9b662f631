# The two commands of the README: `make demo` and `make test`. Everything else is a helper.
BUILD ?= build
JOBS ?= $(shell nproc)
PROMPT ?= The old lighthouse keeper climbed the stairs and

.PHONY: demo test test-isa deps build fuzz sanitize clean

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/brisk run -p "$(PROMPT)" -n 64

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The model and engine tests again with the AVX2 kernels forced (`make test` runs the best
# ISA; the kernel tests loop over every ISA themselves); on a CPU whose best is AVX2,
# `make test` ran them already. BRISK_ISA=scalar passes too but takes ~7 minutes
# (docs/benchmarks.md, session 9).
test-isa: build
	@if $(BUILD)/brisk version | grep -q 'best on this CPU: avx512'; then \
	  BRISK_ISA=avx2 $(BUILD)/test_model --gtest_brief=1 && \
	  BRISK_ISA=avx2 $(BUILD)/test_engine --gtest_brief=1; \
	else echo "test-isa: $$($(BUILD)/brisk version | tail -1): make test ran the AVX2 kernels already"; fi

# clang build with ASan + UBSan: libFuzzer targets and the fast unit tests.
FUZZ_SECONDS ?= 60
SANITIZED_TESTS = test_util test_format test_tensor test_tokenizer test_kernels test_engine
build-fuzz/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRISK_FUZZ=ON -DBRISK_SANITIZE=ON -DBRISK_CUDA=OFF

fuzz: deps build-fuzz/build.ninja   # make fuzz FUZZ_SECONDS=60
	cmake --build build-fuzz -j $(JOBS) --target fuzz_gguf fuzz_tokenizer fuzz_safetensors fuzz_openai_request fuzz_model_metadata
	scripts/run-fuzzers.sh build-fuzz $(FUZZ_SECONDS)

# Left out under the sanitizers: a statistical test of 2,500 sampled generations (~2 of CI's
# minutes under ASan); its code paths run in the speculative tests that stay, and the test
# itself in `make test`. Each test binary runs as one shard a core (scripts/run-sharded-tests.sh).
SANITIZE_SKIP = Speculative.SampledDistributionMatchesPlain
sanitize: deps build-fuzz/build.ninja
	cmake --build build-fuzz -j $(JOBS) --target $(SANITIZED_TESTS)
	scripts/run-sharded-tests.sh $(JOBS) -$(SANITIZE_SKIP) $(addprefix build-fuzz/,$(SANITIZED_TESTS))

clean:
	rm -rf $(BUILD) build-fuzz
