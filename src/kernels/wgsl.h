// WGSL source access and specialisation. Kernel variants are derived from one key: the same
// Defines produce both the specialised source and (via variant_key()) the pipeline cache key and label.
//
// Every WGSL file declares its variant defines on its FIRST line (machine-read, checked):
//   // defines: NAME NAME? A|B|C ...      or      // defines: none
//   NAME    a required define: every specialisation must give it. A name tested by `#if` is a
//           flag and must be "0" or "1".
//   NAME?   an optional value: only for `{{NAME}}` substitutions that some variants never reach
//           (e.g. a binding slot of a fused prologue); an active `{{NAME}}` without it still throws.
//   A|B|C   a one-hot group of flags (the weight format FMT_*): exactly one of them is "1", the
//           others may be left out (they read as 0).
// A file's declared set is its own line plus those of the files it `#include`s (transitively), so
// quant.wgsl's FMT_* group belongs to every kernel that includes it.
#pragma once
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace wgllm::kernels {

/// name (file stem under src/kernels/wgsl) -> source, embedded at build time.
const std::map<std::string, std::string_view>& wgsl_sources();
/// Throws wgllm::Error for an unknown name.
std::string_view wgsl_source(const std::string& name);

/// Replaces the one occurrence of `marker` (e.g. "/*TILE_STEP*/") in the source of kernel `name`
/// (`src`, being generated from wgsl_source(name)) with `with`. Throws wgllm::Error naming the
/// file and marker when the marker is missing (kernels whose inner loops are generated as
/// straight-line code: matmul_tiled, matmul_tiled_i8, attention_flash).
void replace_marker(std::string& src, const std::string& name, const std::string& marker, const std::string& with);

/// Ordered NAME -> value. Flags use "0"/"1".
using Defines = std::map<std::string, std::string>;

/// The declared defines of a kernel (its first line plus its includes', see above).
struct DeclaredDefines {
  std::set<std::string> required, optional;
  std::vector<std::vector<std::string>> one_hot;  // groups
  std::set<std::string> flags;  // the names `#if` tests in the file or its includes (values "0"/"1")
  bool declares(const std::string& n) const;
};
/// Parses kernel `name`'s declaration from `src` (its text) and its includes'. Throws wgllm::Error
/// naming the file for a missing or malformed first line.
DeclaredDefines declared_defines(const std::string& name, std::string_view src);
DeclaredDefines declared_defines(const std::string& name);

/// Specialises the embedded kernel `name`: lines `#if NAME` / `#else` / `#endif` (nestable) keep or
/// drop blocks by Defines[NAME] ("1" keeps); `{{NAME}}` is replaced by Defines[NAME]; `#include NAME`
/// inserts another embedded file, specialised the same way. Throws wgllm::Error naming the file and
/// the define for a define that `defs` lacks (missing) or the file does not declare (unknown,
/// e.g. misspelled), a flag other than "0"/"1", a one-hot group without exactly one "1", and a
/// `#if`/`{{}}` in the WGSL on an undeclared name. WGSL has no preprocessor and `override`
/// constants cannot size arrays or switch bindings, hence this small helper instead of a library.
std::string specialize(const std::string& name, const Defines& defs);
/// The same for `src`, an edited copy of kernel `name`'s text (matmul_tiled splices in its tile code).
std::string specialize(const std::string& name, std::string_view src, const Defines& defs);

/// Declaration problems of kernel `name` that no single specialisation shows: a `#if` or `{{}}` on an
/// undeclared name in any branch, an own declared define the file never uses, an optional define
/// used by `#if`. One message per problem (empty: clean). For the no-GPU test of all kernels.
std::vector<std::string> wgsl_declaration_problems(const std::string& name);

/// "name[A=1,B=32]": the pipeline key/label for a variant.
std::string variant_key(const std::string& name, const Defines& defs);

}  // namespace wgllm::kernels
