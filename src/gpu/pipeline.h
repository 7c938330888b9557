// Compute pipelines with explicit bind group layouts, created once and cached by variant key.
// An explicit layout (not "auto") makes a binding the shader forgets to use a validation error
// instead of a silently dropped binding that turns a kernel into a no-op.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <memory>
#include <string>
#include <vector>

#include "gpu/webgpu.h"

namespace wgllm::gpu {

class Context;

enum class Bind : uint8_t { ReadOnly, ReadWrite, Uniform };

/// A kernel ready to compile: `key` names the variant uniquely (it is the cache key and the
/// pipeline label), `wgsl` is the specialised source, `bindings` lists @binding(0..n-1) of
/// @group(0) in order. By convention the last binding is the Uniform parameter block.
struct KernelSpec {
  std::string key;
  std::string wgsl;
  std::vector<Bind> bindings;
  std::string entry = "main";
};

class Pipeline {
 public:
  Pipeline(Context& ctx, const KernelSpec& spec);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  WGPUComputePipeline handle() const { return pipe_; }
  WGPUBindGroupLayout layout() const { return bgl_; }
  const std::string& key() const { return key_; }
  size_t n_bindings() const { return kinds_.size(); }
  const std::vector<Bind>& kinds() const { return kinds_; }

 private:
  WGPUComputePipeline pipe_ = nullptr;
  WGPUBindGroupLayout bgl_ = nullptr;
  WGPUPipelineLayout pl_ = nullptr;
  std::string key_;
  std::vector<Bind> kinds_;
};

class PipelineCache {
 public:
  explicit PipelineCache(Context& ctx) : ctx_(ctx) {}
  /// Returns the cached pipeline for spec.key, compiling it on first use (the WGSL source is only
  /// built by `make_spec` on a miss). Throws wgllm::Error with the compiler log on failure.
  template <class F>
  const Pipeline& get(const std::string& key, F&& make_spec) {
    auto it = cache_.find(key);
    if (it != cache_.end()) return *it->second;
    KernelSpec spec = make_spec();
    spec.key = key;
    return *cache_.emplace(key, std::make_unique<Pipeline>(ctx_, spec)).first->second;
  }
  size_t size() const { return cache_.size(); }

  /// A memo in front of get() for the hot decode kernels: `sig` lists every input that determines
  /// a call site's variant (kernel, weight format, launch shape, switches), so a step's hundreds of
  /// dispatches find their pipeline without building the define map and its key string (which
  /// took ~0.3-0.5 us of the host's ~2.6 us per dispatch on lavapipe; host recording bounds decode
  /// of small models). The caller must put in `sig` everything its defines depend on.
  using Signature = std::array<uint32_t, 24>;
  const Pipeline* memo(const Signature& sig) const {
    auto it = memo_.find(sig);
    return it == memo_.end() ? nullptr : it->second;
  }
  void set_memo(const Signature& sig, const Pipeline& p) { memo_[sig] = &p; }

 private:
  struct SigHash {
    size_t operator()(const Signature& s) const {
      uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the words
      for (uint32_t v : s) h = (h ^ v) * 0x100000001b3ull;
      return size_t(h);
    }
  };
  Context& ctx_;
  std::map<std::string, std::unique_ptr<Pipeline>> cache_;
  std::unordered_map<Signature, const Pipeline*, SigHash> memo_;
};

}  // namespace wgllm::gpu
