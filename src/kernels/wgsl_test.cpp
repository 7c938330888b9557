// Checks of the WGSL specialiser and of every kernel's `// defines:` declaration (kernels/wgsl.h).
// Text processing only: no GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {
namespace {

// Expects `f` to throw wgllm::Error whose message names every string of `parts`.
template <class F>
void expect_error(F&& f, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one naming " << parts.front();
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(Wgsl, EveryKernelDeclaresItsDefines) {
  ASSERT_GT(wgsl_sources().size(), 30u);
  for (const auto& [name, src] : wgsl_sources())
    for (const auto& p : wgsl_declaration_problems(name)) ADD_FAILURE() << p;
}

namespace {
// For each flag tested by `#if` in kernel `name` or the files it includes: the flags G such that every
// `#if F` line lies in the then-branch of an `#if G` block of the same file. With G = 0 such an F
// selects nothing (its blocks are dropped with G's), so the combinations with G = 0 and F = 1 specialise
// to the same text as F = 0 and are skipped below. (Per file: a file included inside an `#if` gives
// its flags no parent, which only enumerates more.)
std::map<std::string, std::set<std::string>> nested_flags(const std::string& name) {
  std::map<std::string, std::set<std::string>> parents;
  std::set<std::string> seen;
  std::vector<std::string> files{name};
  while (!files.empty()) {
    const std::string f = files.back();
    files.pop_back();
    if (!seen.insert(f).second) continue;
    std::vector<std::pair<std::string, bool>> stack;  // (flag, in its then-branch)
    std::string src(wgsl_source(f));
    size_t pos = 0;
    while (pos < src.size()) {
      size_t end = src.find('\n', pos);
      if (end == std::string::npos) end = src.size();
      std::string l = src.substr(pos, end - pos);
      pos = end + 1;
      l.erase(0, l.find_first_not_of(" \t"));
      if (l.rfind("#include ", 0) == 0) {
        files.push_back(l.substr(9, l.find_first_of(" \t\r", 9) - 9));
      } else if (l.rfind("#if ", 0) == 0) {
        const std::string flag = l.substr(4, l.find_first_of(" \t\r", 4) - 4);
        std::set<std::string> enclosing;
        for (const auto& [g, then] : stack)
          if (then) enclosing.insert(g);
        auto it = parents.find(flag);
        if (it == parents.end()) {
          parents[flag] = enclosing;
        } else {
          std::set<std::string> both;
          for (const auto& g : it->second)
            if (enclosing.count(g)) both.insert(g);
          it->second = both;
        }
        stack.push_back({flag, true});
      } else if (l.rfind("#else", 0) == 0 && !stack.empty()) {
        stack.back().second = false;
      } else if (l.rfind("#endif", 0) == 0 && !stack.empty()) {
        stack.pop_back();
      }
    }
  }
  return parents;
}
}  // namespace

// The nesting the enumeration below relies on is read from the files: matvec.wgsl's second part (P2)
// exists only with int8 activations, and matmul_io's NEOX / BIAS only inside its ROPE epilogue.
TEST(Wgsl, NestedFlagsAreFound) {
  const auto n = nested_flags("matvec");
  ASSERT_TRUE(n.count("P2") && n.count("NEOX") && n.count("I8"));
  EXPECT_TRUE(n.at("P2").count("I8"));
  EXPECT_TRUE(n.at("NEOX").count("ROPE"));
  EXPECT_TRUE(n.at("I8").empty());
}

// Every combination of a kernel's flags (each member of a one-hot group in turn; value defines "1",
// optional ones given) specialises: balanced #if/#endif, every reached {{NAME}} declared. At most
// 2^18 flag combinations x group members per kernel (matvec: 2^18 x 7, since its P2 second part of
// 2026-12-06); combinations that set a flag whose every `#if` lies inside a block of a flag that is
// off give the same text as that flag off and are skipped (nested_flags).
TEST(Wgsl, EveryFlagCombinationSpecialises) {
  size_t variants = 0;
  for (const auto& [name, src] : wgsl_sources()) {
    const DeclaredDefines d = declared_defines(name);
    std::vector<std::string> flags;
    Defines base;
    for (const auto& r : d.required) {
      if (d.flags.count(r)) flags.push_back(r);
      else base[r] = std::string(1, '1');
    }
    for (const auto& o : d.optional) base[o] = std::string(1, '1');
    ASSERT_LE(flags.size(), 18u) << name;
    ASSERT_LE(d.one_hot.size(), 1u) << name;  // one group (FMT_*) today; extend the loop for more
    const std::vector<std::string> members = d.one_hot.empty() ? std::vector<std::string>{""} : d.one_hot[0];
    // flags[i] may be 1 only where each of its parents is 1: masks of the parents' bits.
    const auto nested = nested_flags(name);
    std::vector<uint32_t> need(flags.size(), 0);
    for (size_t i = 0; i < flags.size(); ++i)
      if (auto it = nested.find(flags[i]); it != nested.end())
        for (size_t j = 0; j < flags.size(); ++j)
          if (it->second.count(flags[j])) need[i] |= 1u << j;
    for (const auto& m : members)
      for (uint32_t bits = 0; bits < (1u << flags.size()); ++bits) {
        bool redundant = false;
        for (size_t i = 0; i < flags.size() && !redundant; ++i) redundant = (bits >> i & 1) && (bits & need[i]) != need[i];
        if (redundant) continue;
        Defines defs = base;
        if (!m.empty()) defs[m] = std::string(1, '1');
        for (size_t i = 0; i < flags.size(); ++i) defs[flags[i]] = std::string(1, (bits >> i) & 1 ? '1' : '0');
        try {
          specialize(name, defs);
        } catch (const Error& e) {
          FAIL() << variant_key(name, defs) << ": " << e.what();
        }
        ++variants;
      }
  }
  EXPECT_GT(variants, 1000u);
}

TEST(Wgsl, MisspelledMissingOrBadDefinesThrow) {
  EXPECT_NE(specialize("rope", {{"NEOX", "1"}}).find("fn main"), std::string::npos);
  expect_error([] { specialize("rope", {{"NEOX", "1"}, {"NEXO", "1"}}); }, {"rope.wgsl", "unknown define 'NEXO'"});
  expect_error([] { specialize("rope", {{"NEXO", "1"}}); }, {"rope.wgsl", "NEXO"});
  expect_error([] { specialize("rope", {}); }, {"rope.wgsl", "missing define 'NEOX'"});
  expect_error([] { specialize("rope", {{"NEOX", "2"}}); }, {"rope.wgsl", "flag 'NEOX' must be 0 or 1"});
  expect_error([] { specialize("argmax", {{"SPLIT", "0"}}); }, {"argmax.wgsl", "unknown define 'SPLIT'"});
  expect_error([] { specialize("no_such_kernel", {}); }, {"no_such_kernel"});
}

TEST(Wgsl, IncludedFilesContributeTheirDefines) {
  // embed.wgsl declares BE BE16 BE32; the FMT_* group comes from quant.wgsl, which it includes.
  const Defines ok{{"FMT_Q4_1", "1"}, {"BE", "32"}, {"BE16", "0"}, {"BE32", "1"}, {"MAGIC", "1"}};
  const std::string s = specialize("embed", ok);
  EXPECT_NE(s.find("fn lo4"), std::string::npos) << "quant.wgsl's code is inserted";
  Defines none = ok;
  none.erase("FMT_Q4_1");
  expect_error([&] { specialize("embed", none); }, {"embed.wgsl", "exactly one of the group 'FMT_F32|...' must be 1, got 0"});
  Defines two = ok;
  two["FMT_Q8_0"] = "1";
  expect_error([&] { specialize("embed", two); }, {"embed.wgsl", "got 2"});
  Defines typo = ok;
  typo["FMT_Q5_K"] = "1";
  expect_error([&] { specialize("embed", typo); }, {"embed.wgsl", "unknown define 'FMT_Q5_K'"});
}

TEST(Wgsl, OptionalValuesOnlyWhereReached) {
  EXPECT_NO_THROW(specialize("gdn_step", {{"NORM", "0"}}));  // WG? and DV? are read only by NORM=1
  EXPECT_NO_THROW(specialize("gdn_step", {{"NORM", "1"}, {"WG", "64"}, {"DV", "128"}}));
  expect_error([] { specialize("gdn_step", {{"NORM", "1"}, {"WG", "64"}}); }, {"gdn_step.wgsl", "{{DV}}"});
}

TEST(Wgsl, WgslSideErrorsNameFileAndDefine) {
  expect_error([] { specialize("k", "fn main() {}\n", {}); }, {"k.wgsl", "first line must declare"});
  expect_error([] { specialize("k", "// defines: A\n#if B\n#endif\n", {{"A", "1"}}); }, {"k.wgsl", "`#if B` on an undeclared"});
  expect_error([] { specialize("k", "// defines: A\nlet x = {{C}};\n", {{"A", "1"}}); }, {"k.wgsl", "{{C}} on an undeclared"});
  expect_error([] { specialize("k", "// defines: A?\n#if A\n#endif\n", {}); }, {"k.wgsl", "optional"});
  expect_error([] { specialize("k", "// defines: A\n#if A\n", {{"A", "0"}}); }, {"k.wgsl", "#if without #endif"});
  expect_error([] { specialize("k", "// defines: a-b\n", {}); }, {"k.wgsl", "malformed define 'a-b'"});
  // An include's errors name the included file.
  expect_error([] { specialize("k", "// defines: none\n#include quant\n", {{"BE32", "0"}, {"MAGIC", "0"}}); }, {"k.wgsl", "FMT_F32|"});
  EXPECT_EQ(specialize("k", "// defines: A V\n#if A\nx {{V}}\n#else\ny\n#endif\n", {{"A", "1"}, {"V", "7"}}),
            "// defines: A V\nx 7\n");
}

}  // namespace
}  // namespace wgllm::kernels
