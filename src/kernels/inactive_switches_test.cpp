// kernels::inactive_switches (kernels/inactive_switches.h): each note is checked against what the
// kernels do. The matmul notes against a prefill matmul's output (T = 48, Q4_1 and F16 weights) with
// and without the switch: where the switch is reported as having no effect, the bits are the
// switch-off bits; where it is not, they differ (the int8 and f16 forms round differently from the
// f32 tiled kernel). The flash notes against the attention routing (attention_flash_used).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "kernels/inactive_switches.h"
#include "kernels/kernel_test_env.h"
#include "kernels/matmul_tiled.h"

using namespace wgllm;
using namespace wgllm::kernels;
using namespace wgllm::kernels::testing;

namespace {

bool mentions(const std::vector<std::string>& notes, const std::string& flag) {
  return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.rfind(flag + " ", 0) == 0; });
}

// y = W x for T = 48 tokens through kernels::matmul (the prefill entry) with the options as given.
std::vector<float> prefill_matmul(const KernelOptions& ko, DType t) {
  auto& e = env();
  const uint32_t K = 128, N = 24, T = 48;  // above --matvec-max-tokens (32)
  auto x = randn(size_t(T) * K, 4);
  auto xb = e.upload(x.data(), x.size() * 4);
  auto blocks = random_blocks(t, K, N, 9);
  if (t == DType::F16)
    for (size_t i = 0; i < blocks.size(); i += 2) put_f16(&blocks[i], float(int(i % 13) - 6) * 0.01f);
  auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
  std::vector<float> z(size_t(T) * N);
  auto yb = e.upload(z.data(), z.size() * 4);
  OpContext o = e.op(ko);
  e.rec.begin();
  matmul(o, W, {xb, 0}, K, {yb, 0}, N, T, true);
  e.rec.submit();
  return e.download<float>(yb, z.size());
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

}  // namespace

TEST(InactiveSwitches, NoneAtTheDefaults) {
  auto& e = env();
  EXPECT_TRUE(inactive_switches(OpContext{*e.ctx, e.cache, e.rec, KernelOptions{}}).empty());
}

// --matmul-int8 (1) under each --matmul-tiled setting: reported iff the prefill matmul keeps the
// bits it has without int8. On a software adapter the tiled default (2) is off: reported there.
TEST(InactiveSwitches, MatmulInt8MatchesWhatTheMatmulDoes) {
  auto& e = env();
  for (uint8_t tiled : {0, 1, 2}) {
    KernelOptions off, on;
    off.matmul_tiled = on.matmul_tiled = tiled;
    off.matmul_int8 = 0;
    on.matmul_int8 = 1;
    const auto notes = inactive_switches(OpContext{*e.ctx, e.cache, e.rec, on});
    const bool no_effect = same_bits(prefill_matmul(on, DType::Q4_1), prefill_matmul(off, DType::Q4_1));
    EXPECT_EQ(mentions(notes, "--matmul-int8"), no_effect) << "matmul_tiled " << int(tiled);
    if (tiled == 2) {
      EXPECT_EQ(no_effect, e.ctx->info().is_software()) << "the tiled kernel's adapter default";
    }
    if (tiled == 0) {
      EXPECT_TRUE(mentions(notes, "--matmul-int8"));
    }
    EXPECT_TRUE(inactive_switches(OpContext{*e.ctx, e.cache, e.rec, off}).empty());
  }
}

// --matmul-tiled-f16 on F16 weights (int8 off, so only the f16 form can change the bits): reported
// as having no effect iff the bits are the f32 tiled kernel's.
TEST(InactiveSwitches, MatmulTiledF16MatchesWhatTheMatmulDoes) {
  auto& e = env();
  for (uint8_t tiled : {0, 1}) {
    KernelOptions off, on;
    off.matmul_tiled = on.matmul_tiled = tiled;
    off.matmul_int8 = on.matmul_int8 = 0;
    on.matmul_tiled_f16 = true;
    const auto notes = inactive_switches(OpContext{*e.ctx, e.cache, e.rec, on});
    const bool no_effect = same_bits(prefill_matmul(on, DType::F16), prefill_matmul(off, DType::F16));
    EXPECT_EQ(mentions(notes, "--matmul-tiled-f16"), no_effect) << "matmul_tiled " << int(tiled);
    EXPECT_EQ(no_effect, tiled == 0 || !e.ctx->has_feature(WGPUFeatureName_ShaderF16));
  }
  // With int8 on as well, quantized weights take int8: the f16 form is named as partial.
  KernelOptions both;
  both.matmul_tiled = both.matmul_int8 = 1;
  both.matmul_tiled_f16 = true;
  EXPECT_TRUE(mentions(inactive_switches(OpContext{*e.ctx, e.cache, e.rec, both}), "--matmul-tiled-f16"));
}

// --matmul-coop on the shared test device (created without the cooperative-matrix wish, so it never has
// them): named as having no effect, with the bits of the product without it; its tile knobs likewise.
// (Where the device has them, matmul_coop_test checks that the kernel runs and changes the bits.)
TEST(InactiveSwitches, MatmulCoopWithoutTheDeviceFeature) {
  auto& e = env();
  ASSERT_FALSE(e.ctx->coop_matrix_f16());
  for (uint8_t tiled : {0, 1}) {
    KernelOptions off, on;
    off.matmul_tiled = on.matmul_tiled = tiled;
    on.matmul_coop = true;
    const auto notes = inactive_switches(OpContext{*e.ctx, e.cache, e.rec, on});
    EXPECT_TRUE(mentions(notes, "--matmul-coop")) << "matmul_tiled " << int(tiled);
    EXPECT_TRUE(same_bits(prefill_matmul(on, DType::Q4_1), prefill_matmul(off, DType::Q4_1)));
  }
  KernelOptions tile;
  tile.matmul_coop_tile_n = 128;
  EXPECT_TRUE(mentions(inactive_switches(OpContext{*e.ctx, e.cache, e.rec, tile}), "--matmul-coop-tile-n"));
}

// The lanes flash kernel's tile knobs without the kernel, and a lane count the adapter cannot take; each
// note checked against attention_flash_lanes_tile().
TEST(InactiveSwitches, FlashLanesKnobsWithoutTheLanesKernel) {
  auto& e = env();
  auto says = [](const std::vector<std::string>& notes, const std::string& text) {
    return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.find(text) != std::string::npos; });
  };
  KernelOptions ko;
  ko.attention_flash_lanes_rows = 1;
  ko.attention_flash_lanes = 0;
  {
    const OpContext o{*e.ctx, e.cache, e.rec, ko};
    EXPECT_EQ(attention_flash_lanes_tile(o, 256).bc, 0u);
    EXPECT_TRUE(says(inactive_switches(o), "--attn-flash-lanes-threads / -rows / -keys have no effect"));
  }
  ko.attention_flash_lanes = kFlashLanesAuto;
  {
    const OpContext o{*e.ctx, e.cache, e.rec, ko};
    const bool named = says(inactive_switches(o), "-rows / -keys have no effect");
    EXPECT_EQ(named, e.ctx->info().is_software()) << "auto is off exactly on software adapters";
    if (!e.ctx->info().is_software() && e.ctx->has_subgroups() && e.ctx->measured_subgroup_sizes().first >= 8) {
      EXPECT_NE(attention_flash_lanes_tile(o, 256).bc, 0u);
    }
  }
  ko.attention_flash_lanes_rows = 0;
  ko.attention_flash_lanes = 32;
  const OpContext o{*e.ctx, e.cache, e.rec, ko};
  const uint32_t lo = e.ctx->has_subgroups() ? e.ctx->measured_subgroup_sizes().first : 0;
  EXPECT_EQ(says(inactive_switches(o), "--attn-flash-lanes 32 has no effect"), lo < 32);
  EXPECT_EQ(attention_flash_lanes_tile(o, 256).bc != 0, lo >= 32);
}

// The flash kernel's sub-switches under --no-attn-flash, each note checked against the routing
// functions: a long prefill from an empty cache (never the flash kernel under --no-attn-flash) and a
// chat turn's chunk over a long cache (the flash kernel only through --attn-chunk).
TEST(InactiveSwitches, FlashSubSwitchesWithoutFlash) {
  auto& e = env();
  KernelOptions ko;
  ko.attention_flash = 0;
  EXPECT_TRUE(inactive_switches(OpContext{*e.ctx, e.cache, e.rec, ko}).empty())
      << "switches at their defaults (wide heads and windows are on by default) are never named";
  ko.attention_flash_unroll = 1;
  ko.attention_flash_split_tiles = 4;
  const AttentionShape prefill{300, 0, 4, 2, 64, 1.0f}, chunk{40, 200, 4, 2, 64, 1.0f};
  for (uint8_t c : {0, 2, 1}) {
    ko.attention_chunk = c;
    const OpContext o{*e.ctx, e.cache, e.rec, ko};
    ASSERT_FALSE(attention_flash_used(o, prefill));
    const bool via_chunk = attention_flash_used(o, chunk);
    EXPECT_EQ(via_chunk, c == 1) << "--attn-chunk's adapter default (2) is off";
    const auto notes = inactive_switches(o);
    ASSERT_EQ(notes.size(), 2u) << "attn_chunk " << int(c);
    for (const auto& n : notes)
      EXPECT_EQ(n.find("has no effect") == std::string::npos, via_chunk) << n;
    EXPECT_TRUE(mentions(notes, "--attn-flash-unroll") && mentions(notes, "--attn-flash-split-tiles"));
  }
  // Block-sparse prefill gathers into attention_flash.wgsl (unrolled as --attn-flash-unroll says)
  // whatever --attn-flash says; it has no key split.
  ko.attention_chunk = 0;
  ko.sparse_attn = true;
  auto notes = inactive_switches(OpContext{*e.ctx, e.cache, e.rec, ko});
  ASSERT_EQ(notes.size(), 2u);
  for (const auto& n : notes)
    EXPECT_EQ(n.find("block-sparse") != std::string::npos, n.rfind("--attn-flash-unroll ", 0) == 0) << n;
  // The split length without the key split, with the flash kernel on.
  ko = KernelOptions{};
  ko.attention_flash_split_tiles = 4;
  EXPECT_TRUE(inactive_switches(OpContext{*e.ctx, e.cache, e.rec, ko}).empty());
  ko.attention_prefill_split = false;
  notes = inactive_switches(OpContext{*e.ctx, e.cache, e.rec, ko});
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_TRUE(mentions(notes, "--attn-flash-split-tiles"));
}
