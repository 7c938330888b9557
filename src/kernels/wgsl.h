// WGSL source access and specialisation. Kernel variants are derived from one key: the same
// Defines produce both the specialised source and (via key()) the pipeline cache key and label.
#pragma once
#include <map>
#include <string>
#include <string_view>

namespace wgllm::kernels {

/// name (file stem under src/kernels/wgsl) -> source, embedded at build time.
const std::map<std::string, std::string_view>& wgsl_sources();
/// Throws wgllm::Error for an unknown name.
std::string_view wgsl_source(const std::string& name);

/// Ordered NAME -> value. Flags use "0"/"1".
using Defines = std::map<std::string, std::string>;

/// Specialises a WGSL template: lines `#if NAME` / `#else` / `#endif` (nestable) keep or drop
/// blocks by Defines[NAME] != "0" (missing = false); `{{NAME}}` is replaced by Defines[NAME]
/// (missing = error); `#include NAME` inserts another embedded file, specialised the same way. WGSL has no preprocessor and `override` constants cannot size arrays or
/// switch bindings, hence this ~40-line helper instead of a library.
std::string specialize(std::string_view src, const Defines& defs);

/// "name[A=1,B=32]": the pipeline key/label for a variant.
std::string variant_key(const std::string& name, const Defines& defs);

}  // namespace wgllm::kernels
