// Helpers for model parity tests: fixtures, model loading per backend, logit comparison.
#pragma once
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/model.h"
#include "models/source.h"

namespace wgllm::test {

/// The test-only WGLLM_TEST_MAX_BINDING_BYTES hook (models/gpu_common.h GpuModel::embedding) set
/// to max_bytes (nullptr: left unset) while this object lives: WebGPU models created meanwhile take
/// the paths for weights over one storage binding. Unset again however the scope ends.
struct ScopedBindingCap {
  explicit ScopedBindingCap(const char* max_bytes) : set(max_bytes != nullptr) {
    if (set) setenv("WGLLM_TEST_MAX_BINDING_BYTES", max_bytes, 1);
  }
  ~ScopedBindingCap() {
    if (set) unsetenv("WGLLM_TEST_MAX_BINDING_BYTES");
  }
  ScopedBindingCap(const ScopedBindingCap&) = delete;
  ScopedBindingCap& operator=(const ScopedBindingCap&) = delete;
  bool set;
};

// WGLLM_SOURCE_DIR / WGLLM_CACHE in the environment override the build-time paths (a test binary
// run on another machine, e.g. the H200 device machine, from a copy of the repository).
inline std::string env_or(const char* name, const char* def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}
inline std::string fixture(const std::string& rel) { return env_or("WGLLM_SOURCE_DIR", WGLLM_SOURCE_DIR) + "/tests/fixtures/" + rel; }
inline std::string cache_file(const std::string& rel) { return env_or("WGLLM_CACHE", WGLLM_CACHE_DIR) + "/" + rel; }

/// Options of a GPU model compared with the f32 CPU reference at f32 tolerances: the int8 activation
/// switches (KernelOptions::matvec_int8 / matmul_int8, on by default for hardware GPUs since
/// 2026-12-02, off on software adapters) pinned off, so that the same tests hold on a GPU (the H200
/// parity recipe). switch_combinations_test and the int8 kernel tests cover int8 with its bounds.
inline ModelOptions& f32_activations(ModelOptions& o) {
  o.kernels.matvec_int8 = 0;
  o.kernels.matmul_int8 = 0;
  return o;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("missing fixture " + path);
  return nlohmann::json::parse(in);
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw std::runtime_error("missing fixture " + path);
  std::vector<float> v(size_t(in.tellg()) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * 4));
  return v;
}

/// Largest |a - b| over all entries, and the largest |b|.
struct Diff {
  float max_abs = 0, ref_max = 0;
  size_t argmax_a = 0, argmax_b = 0;
};
inline Diff diff(const std::vector<float>& a, const std::vector<float>& b) {
  Diff d;
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const float e = std::fabs(a[i] - b[i]);
    d.max_abs = std::isnan(e) ? INFINITY : std::max(d.max_abs, e);
    d.ref_max = std::max(d.ref_max, std::fabs(b[i]));
    if (a[i] > a[d.argmax_a]) d.argmax_a = i;
    if (b[i] > b[d.argmax_b]) d.argmax_b = i;
  }
  return d;
}

inline std::vector<int32_t> ids_of(const nlohmann::json& p) { return p["ids"].get<std::vector<int32_t>>(); }

/// Greedy continuation of `prompt` for n steps (EOS not special), starting from an empty sequence.
inline std::vector<int32_t> greedy(Model& m, const std::vector<int32_t>& prompt, int n) {
  auto seq = m.new_sequence();
  std::vector<int32_t> out;
  int32_t t = m.forward_argmax(*seq, prompt);
  for (int i = 0; i < n; ++i) {
    out.push_back(t);
    if (i + 1 < n) t = m.forward_argmax(*seq, std::span<const int32_t>(&t, 1));
  }
  return out;
}

/// Logits a prefill of ids returns on a new sequence of m (the last position's).
inline std::vector<float> last_logits(Model& m, std::span<const int32_t> ids) {
  auto seq = m.new_sequence();
  std::vector<float> l;
  m.forward(*seq, ids, &l);
  return l;
}

/// Logits of a prompt's prefill and then of n greedy one-token decode steps, concatenated.
inline std::vector<float> decode_trace(Model& m, std::span<const int32_t> prompt, int n) {
  auto seq = m.new_sequence();
  std::vector<float> all, l;
  m.forward(*seq, prompt, &l);
  for (int i = 0; i < n; ++i) {
    all.insert(all.end(), l.begin(), l.end());
    const int32_t t = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    m.forward(*seq, std::span<const int32_t>(&t, 1), &l);
  }
  all.insert(all.end(), l.begin(), l.end());
  return all;
}

}  // namespace wgllm::test
