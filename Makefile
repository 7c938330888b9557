# wgllm front door. `make demo` and `make test` are the README quick start.
# The Vulkan loader environment is computed inside each recipe (after setup has installed the
# software driver on CPU-only machines), see scripts/vulkan_env.sh.
BUILD ?= build
FUZZ_TARGETS = fuzz_gguf fuzz_safetensors fuzz_tokenizer_json fuzz_gguf_tokenizer fuzz_chat_template fuzz_session_file
JOBS ?= $(shell nproc)
PROMPT ?= What is the capital of France? Answer in one sentence.

.PHONY: setup build cli test demo clean fuzz fuzz-ci web web-serve web-test plots
.NOTPARALLEL:

# `make setup MODELS="qwen2.5-coder-1.5b gemma-3-270m"` also installs those registry models
# (scripts/models.json; `wgllm models` lists them); the default model is always installed.
MODELS ?=
setup:
	MODELS="$(MODELS)" scripts/setup.sh

# ccache (when installed) makes rebuilds in several worktrees and clean CI checkouts cheap.
CCACHE_FLAGS = $(if $(shell command -v ccache),-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

build:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CCACHE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# The CLI alone (what `make demo` runs; `build` also builds every test).
cli:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CCACHE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS) --target wgllm

test: setup build web
	cd $(BUILD) && env $$($(CURDIR)/scripts/vulkan_env.sh) ctest --output-on-failure -j $(JOBS) --timeout 1200
	$(MAKE) web-test
	$(MAKE) fuzz-ci

demo: setup cli
	env $$(scripts/vulkan_env.sh) $(BUILD)/wgllm run -p "$(PROMPT)" -n 64

# PNG plots of a `wgllm bench --json` result: `make plots RESULT=r.json` writes r_latency.png
# (per-token trace with p50/p90/p99) and r_traffic.png (bytes per kernel by category, % of the
# measured copy bandwidth). Without RESULT, a short product-config bench (with --traffic) on this
# machine's GPU is measured first into $(BUILD)/bench.json.
RESULT ?=
plots:
	scripts/setup_plots.sh
	$(if $(RESULT),,test -x $(BUILD)/wgllm || { echo "make plots: run make build first, or give RESULT=r.json"; exit 1; }; \
	  env $$(scripts/vulkan_env.sh) $(BUILD)/wgllm bench --prompt-lengths 128 --gen 32 --reps 1 --traffic --allow-busy --json $(BUILD)/bench.json)
	python3 tools/plots/plot_bench.py $(or $(RESULT),$(BUILD)/bench.json) $(basename $(or $(RESULT),$(BUILD)/bench.json))

# Browser build (web/protocol.md): the engine compiled to WebAssembly with Debian's Emscripten.
# NODE_PATH lets Emscripten's JS optimiser find Debian's acorn.
WASM_BUILD ?= build-wasm
# Not 8080: `wgllm serve` listens there by default.
PORT ?= 8000
web: setup
	test -f $(WASM_BUILD)/build.ninja || NODE_PATH=/usr/share/nodejs emcmake cmake -S . -B $(WASM_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release
	NODE_PATH=/usr/share/nodejs cmake --build $(WASM_BUILD) -j $(JOBS)

web-serve: web
	node web/serve.mjs --port $(PORT) --wasm-dir $(WASM_BUILD)/web

# Headless Chromium test: native vs browser greedy tokens, OPFS reload, two-turn chat, errors,
# screenshot in $(WASM_BUILD)/web-test/web-demo.png. Then the Dawn-in-Node harness's smoke test
# (web/node: adapter check, the page JS + wasm under Node, a tiny model's streamed load; seconds).
web-test:
	node web/tests/browser_test.mjs --wgllm $(BUILD)/wgllm --wasm-dir $(WASM_BUILD)/web --out $(WASM_BUILD)/web-test
	env $$(scripts/vulkan_env.sh) node web/tests/node_smoke_test.mjs --wasm-dir $(WASM_BUILD)/web

# libFuzzer targets (fuzz/README.md): clang + ASan + UBSan build in build-fuzz, seed corpora from the
# test fixtures in build-fuzz/corpus. `make fuzz FUZZ_SECONDS=N` then fuzzes each target for N s;
# `make fuzz-ci` (run by `make test`) does a short fixed-time session per target and fails on any
# crash, leak, timeout or out-of-memory.
FUZZ_SECONDS ?= 0
FUZZ_CI_SECONDS ?= 20
fuzz: setup
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DWGLLM_FUZZ=ON \
	  $(CCACHE_FLAGS)
	cmake --build build-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	fuzz/make_seeds.py build-fuzz
	$(if $(filter-out 0,$(FUZZ_SECONDS)),fuzz/run.sh build-fuzz $(FUZZ_SECONDS))

fuzz-ci:
	$(MAKE) fuzz FUZZ_SECONDS=$(FUZZ_CI_SECONDS)

clean:
	rm -rf $(BUILD) build-fuzz $(WASM_BUILD)
