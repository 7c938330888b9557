// C++ kernel parameter structs, described for the check against their WGSL `struct P`.
//
// Every C++ struct passed as a kernel's uniform is a named struct of 4-byte scalars, followed by
// one line listing its fields in order:
//   struct RopeParams { uint32_t T, H, HD, rot, pos0, off, stride, table_pairs; };
//   WGLLM_PARAMS(RopeParams, T, H, HD, rot, pos0, off, stride, table_pairs);
// The list is checked against the struct itself (each field's type from decltype, its offset from
// offsetof: a field left out, reordered or retyped breaks the list) and, by params_layout_test
// (no GPU), against the `struct P` of each kernel the file registers in its `*_params_layouts()`
// below: same names, order, WGSL types and offsets (WGSL uniform layout), C++ trailing fields
// beyond P named pad*.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "kernels/wgsl.h"

namespace wgllm::kernels {

/// One C++ field: name, WGSL type ("u32", "i32", "f32"), byte offset and size.
struct ParamField {
  std::string_view name, type;
  uint32_t offset, size;
};

/// A kernel's uniform as C++ lays it out. `defines`: the ones the WGSL `struct P` depends on (e.g.
/// attention_flash GATHER=1); the check gives the kernel's other declared defines any valid value.
struct ParamsLayout {
  std::string kernel;
  Defines defines;
  std::string cpp_struct;
  std::vector<ParamField> fields;
  uint32_t size;  // sizeof, bytes written to the uniform
};

template <class T>
constexpr std::string_view wgsl_type_of() {
  if constexpr (std::is_same_v<T, uint32_t>) return "u32";
  else if constexpr (std::is_same_v<T, int32_t>) return "i32";
  else if constexpr (std::is_same_v<T, float>) return "f32";
  else static_assert(!sizeof(T), "parameter fields are u32/i32/f32 scalars (add the WGSL type here)");
}

// WGLLM_PARAMS(S, f...): defines param_fields(const S*) -> the ParamField list of f... in order (at
// most 64 fields: the depth of WGLLM_PARAMS_EXPAND).
#define WGLLM_PARAMS_FIELD(S, f) \
  ::wgllm::kernels::ParamField{#f, ::wgllm::kernels::wgsl_type_of<decltype(S::f)>(), offsetof(S, f), sizeof(S::f)},
#define WGLLM_PARAMS_PARENS ()
#define WGLLM_PARAMS_EXPAND(...) WGLLM_PARAMS_E3(WGLLM_PARAMS_E3(WGLLM_PARAMS_E3(WGLLM_PARAMS_E3(__VA_ARGS__))))
#define WGLLM_PARAMS_E3(...) WGLLM_PARAMS_E2(WGLLM_PARAMS_E2(WGLLM_PARAMS_E2(WGLLM_PARAMS_E2(__VA_ARGS__))))
#define WGLLM_PARAMS_E2(...) WGLLM_PARAMS_E1(WGLLM_PARAMS_E1(WGLLM_PARAMS_E1(WGLLM_PARAMS_E1(__VA_ARGS__))))
#define WGLLM_PARAMS_E1(...) __VA_ARGS__
#define WGLLM_PARAMS_EACH(S, f, ...) WGLLM_PARAMS_FIELD(S, f) __VA_OPT__(WGLLM_PARAMS_AGAIN WGLLM_PARAMS_PARENS(S, __VA_ARGS__))
#define WGLLM_PARAMS_AGAIN() WGLLM_PARAMS_EACH
#define WGLLM_PARAMS(S, ...)                                                          \
  [[maybe_unused]] inline std::vector<::wgllm::kernels::ParamField> param_fields(const S*) { \
    return {WGLLM_PARAMS_EXPAND(WGLLM_PARAMS_EACH(S, __VA_ARGS__))};                   \
  }                                                                                     \
  static_assert(std::is_standard_layout_v<S>)

/// The layout of S (described by WGLLM_PARAMS) for `kernel`.
template <class S>
ParamsLayout params_layout(std::string kernel, std::string cpp_struct, Defines defines = {}) {
  return {std::move(kernel), std::move(defines), std::move(cpp_struct), param_fields(static_cast<const S*>(nullptr)),
          uint32_t(sizeof(S))};
}
#define WGLLM_LAYOUT(S, kernel, ...) ::wgllm::kernels::params_layout<S>(kernel, #S __VA_OPT__(, ) __VA_ARGS__)

// Each kernel source file's layouts (defined beside its structs), and all of them.
std::vector<ParamsLayout> ops_params_layouts();
std::vector<ParamsLayout> gdn_ops_params_layouts();
std::vector<ParamsLayout> sparse_attention_params_layouts();
std::vector<ParamsLayout> matmul_tiled_params_layouts();
std::vector<ParamsLayout> nll_params_layouts();
std::vector<ParamsLayout> bandwidth_probe_params_layouts();
std::vector<ParamsLayout> dispatch_probe_params_layouts();
std::vector<ParamsLayout> all_params_layouts();

/// Mismatches between `l` and the `struct P` of its kernel specialised with l.defines (other
/// declared defines: flags 0, values 1, a one-hot group's first member), one message each; empty:
/// they agree. Also checks that l.fields cover the C++ struct exactly (no gap, no overlap). No GPU.
std::vector<std::string> params_layout_problems(const ParamsLayout& l);

}  // namespace wgllm::kernels
