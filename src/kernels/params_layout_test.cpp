// C++ kernel parameter structs vs their WGSL `struct P` (kernels/params_layout.h). No GPU.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/params_layout.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {
namespace {

TEST(ParamsLayout, EveryKernelStructMatchesItsWgslStructP) {
  const auto all = all_params_layouts();
  ASSERT_GT(all.size(), 30u);
  for (const auto& l : all)
    for (const auto& p : params_layout_problems(l)) ADD_FAILURE() << p;
}

// Every compiled kernel (a file no other file includes) that has a `struct P` has a C++ layout.
TEST(ParamsLayout, EveryKernelWithAStructPIsRegistered) {
  std::set<std::string> included, registered;
  for (const auto& [name, src] : wgsl_sources())
    for (size_t b = src.find("#include "); b != std::string_view::npos; b = src.find("#include ", b + 1))
      included.insert(std::string(src.substr(b + 9, src.find_first_of(" \r\n", b + 9) - b - 9)));
  for (const auto& l : all_params_layouts()) registered.insert(l.kernel);
  EXPECT_TRUE(included.count("quant") && included.count("gdn_params"));
  for (const auto& [name, src] : wgsl_sources()) {
    if (!included.count(name) && src.find("struct P ") != std::string_view::npos) {
      EXPECT_TRUE(registered.count(name)) << name << ".wgsl has a struct P but no C++ layout (WGLLM_LAYOUT)";
    }
  }
}

// Deliberately wrong C++ structs for rope.wgsl's P { T, H, HD, rot, pos0, off, stride, table_pairs: u32 }.
struct SwappedRope { uint32_t T, H, HD, rot, pos0, stride, off, table_pairs; };
WGLLM_PARAMS(SwappedRope, T, H, HD, rot, pos0, stride, off, table_pairs);
struct FloatRope { uint32_t T, H, HD, rot, pos0, off, stride; float table_pairs; };
WGLLM_PARAMS(FloatRope, T, H, HD, rot, pos0, off, stride, table_pairs);
struct ShortRope { uint32_t T, H, HD, rot, pos0, off, stride; };
WGLLM_PARAMS(ShortRope, T, H, HD, rot, pos0, off, stride);
struct LongRope { uint32_t T, H, HD, rot, pos0, off, stride, table_pairs, extra; };
WGLLM_PARAMS(LongRope, T, H, HD, rot, pos0, off, stride, table_pairs, extra);
struct PaddedRope { uint32_t T, H, HD, rot, pos0, off, stride, table_pairs, pad0, pad1; };
WGLLM_PARAMS(PaddedRope, T, H, HD, rot, pos0, off, stride, table_pairs, pad0, pad1);
// A field list that does not describe its struct: one left out, two out of order.
struct Three { uint32_t a, b, c; };
WGLLM_PARAMS(Three, a, c);
struct Two { uint32_t a, b; };
WGLLM_PARAMS(Two, b, a);

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

TEST(ParamsLayout, WrongStructsAreCaught) {
  EXPECT_TRUE(params_layout_problems(WGLLM_LAYOUT(PaddedRope, "rope")).empty()) << "trailing pad* fields are allowed";
  const std::string swapped = joined(params_layout_problems(WGLLM_LAYOUT(SwappedRope, "rope")));
  EXPECT_NE(swapped.find("field 5: C++ stride: u32 @20, WGSL off: u32 @20"), std::string::npos) << swapped;
  const std::string fl = joined(params_layout_problems(WGLLM_LAYOUT(FloatRope, "rope")));
  EXPECT_NE(fl.find("C++ table_pairs: f32 @28, WGSL table_pairs: u32 @28"), std::string::npos) << fl;
  const std::string shrt = joined(params_layout_problems(WGLLM_LAYOUT(ShortRope, "rope")));
  EXPECT_NE(shrt.find("C++ lacks WGSL field 7 'table_pairs'"), std::string::npos) << shrt;
  EXPECT_NE(shrt.find("sizeof 28 < WGSL size 32"), std::string::npos) << shrt;
  const std::string lng = joined(params_layout_problems(WGLLM_LAYOUT(LongRope, "rope")));
  EXPECT_NE(lng.find("C++ field 'extra' beyond WGSL's last field"), std::string::npos) << lng;
  // The right struct for the wrong kernel (kv_store: T, kv_dim, pos0, ...).
  EXPECT_FALSE(params_layout_problems(WGLLM_LAYOUT(PaddedRope, "kv_store")).empty());
  // The variant matters: attention_flash's P gains B, S, qb0, ntb with GATHER=1.
  for (const auto& l : all_params_layouts())
    if (l.kernel == "attention_flash") {
      ParamsLayout other = l;
      other.defines["GATHER"] = l.defines.at("GATHER") == "1" ? "0" : "1";
      EXPECT_FALSE(params_layout_problems(other).empty()) << l.cpp_struct;
    }
}

TEST(ParamsLayout, FieldListMustDescribeItsStruct) {
  const std::string three = joined(params_layout_problems(WGLLM_LAYOUT(Three, "argmax")));
  EXPECT_NE(three.find("C++ field 'c' at byte 8, expected 4"), std::string::npos) << three;
  const std::string two = joined(params_layout_problems(WGLLM_LAYOUT(Two, "argmax")));
  EXPECT_NE(two.find("C++ field 'b' at byte 4, expected 0"), std::string::npos) << two;
}

}  // namespace
}  // namespace wgllm::kernels
