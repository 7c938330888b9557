# wgllm front door. `make demo` and `make test` are the README quick start.
# The Vulkan loader environment is computed inside each recipe (after setup has installed the
# software driver on CPU-only machines), see scripts/vulkan_env.sh.
BUILD ?= build
JOBS ?= $(shell nproc)
PROMPT ?= What is the capital of France? Answer in one sentence.

.PHONY: setup build test demo clean fuzz
.NOTPARALLEL:

setup:
	scripts/setup.sh

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

test: setup build
	cd $(BUILD) && env $$($(CURDIR)/scripts/vulkan_env.sh) ctest --output-on-failure -j $(JOBS) --timeout 1200

demo: setup build
	env $$(scripts/vulkan_env.sh) $(BUILD)/wgllm run -p "$(PROMPT)" -n 64

fuzz:
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DWGLLM_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzz_gguf fuzz_safetensors

clean:
	rm -rf $(BUILD) build-fuzz
