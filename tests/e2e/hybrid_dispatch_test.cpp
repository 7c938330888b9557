// Dispatches of one decode step of the hybrid models (LFM2 ShortConv layers, Qwen3.5 Gated
// DeltaNet layers) on the tiny fixtures, with the decode fusions of the recurrent layers on and
// off (KernelOptions::fuse_conv_state, gdn_fuse_prep, gdn_fuse_norm, gdn_fuse_decode). Prints the per-label counts
// of the step (the deterministic local metric for decode speed: each dispatch costs ~5-10 us on
// the H200 whatever its size) and checks the recurrent mixers' counts per layer:
//   LFM2 conv layer mixer: in_proj, conv (+ state update unless fused; none with fuse_conv_in on the
//                          matrix-vector kernel), out_proj
//   Qwen3.5 DeltaNet mixer: in-projection, [conv, conv state, l2norm, gates] or [decode_prep],
//                           [step, gated_rmsnorm] or [step_norm] (or all of them: [gdn_decode]), out_proj
// and the attention layers' and input norms' fusions (fuse_norm, ModelOptions::fuse_qkv, fuse_qk_norm):
//   LFM2 attention layer: [operator_norm], attn_qkv or attn_q/k/v, [attn_q_norm, attn_k_norm, rope_kv_store]
//                         or qk_norm_rope_kv, attention, attn_output, ffn_gate_up, ffn_down
//   Qwen3.5 attention layer: [attn_norm], attn_qgkv, [attn_q_norm, attn_k_norm, rope_kv_store] or
//                         qk_norm_rope_kv, attention, sigmoid_gate, attn_output, ffn_gate_up, ffn_down
// and the Qwen2 attention layer (fuse_qkv_rope_kv; biases in the QKV epilogue): attn_qkv, or attn_qk
// and attn_v where V has another weight type, [attn_qkv_bias, rope_kv_store]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "parity_util.h"
#include "runtime/warmup.h"
#include "tiny_gguf_util.h"

using namespace wgllm;
using namespace wgllm::test;
using wgllm::kernels::KernelOptions;

namespace {

// fx: a fixture's name, or a path (written by the test).
std::map<std::string, uint32_t> decode_step_labels(const std::string& fx, const KernelOptions& k, bool fuse_qkv = true) {
  auto src = ModelSource::open(fx.starts_with("/") ? fx : fixture(fx));
  ModelOptions o;
  o.context_length = 64;
  o.kernels = k;
  o.fuse_qkv = fuse_qkv;
  auto m = create_model(*src, o);
  auto seq = m->new_sequence();
  const std::vector<int32_t> prompt = {5, 6, 7, 8};
  int32_t t = m->forward_argmax(*seq, prompt);
  m->set_profiling(true);
  m->forward_argmax(*seq, std::span<const int32_t>(&t, 1));
  m->set_profiling(false);
  std::map<std::string, uint32_t> n;
  for (auto& d : m->last_dispatches()) ++n[d.label];
  uint32_t total = 0;
  std::printf("%s decode step (fuse_conv_state %d, gdn_fuse_prep %d, gdn_fuse_norm %d, gdn_fuse_decode %d, fuse_norm %d, "
              "fuse_qkv %d, fuse_qk_norm %d, fuse_rope_kv %d):\n", fx.c_str(), k.fuse_conv_state, k.gdn_fuse_prep,
              k.gdn_fuse_norm, k.gdn_fuse_decode, k.fuse_norm, fuse_qkv, k.fuse_qk_norm, k.fuse_rope_kv);
  for (auto& [l, c] : n) {
    std::printf("  %-22s %u\n", l.c_str(), c);
    total += c;
  }
  std::printf("  %-22s %u\n", "total", total);
  return n;
}

uint32_t sum(const std::map<std::string, uint32_t>& n, const std::set<std::string>& labels) {
  uint32_t s = 0;
  for (auto& [l, c] : n) s += labels.count(l) ? c : 0;
  return s;
}

}  // namespace

TEST(HybridDispatch, Lfm2ConvLayerDecode) {
  for (bool fused : {false, true}) {
    KernelOptions k;
    k.fuse_conv_state = fused;
    k.fuse_conv_in = false;  // (when on, hardware GPUs would take the conv into the in-projection)
    auto n = decode_step_labels("lfm2_tiny/hf", k);
    const uint32_t layers = n["shortconv_in_proj"];
    ASSERT_GT(layers, 0u);
    EXPECT_EQ(n["shortconv_out_proj"], layers);
    EXPECT_EQ(sum(n, {"shortconv_conv", "causal_conv_state"}), layers * (fused ? 1 : 2)) << "fused " << fused;
  }
  // --fuse-conv-in (default off) on the matrix-vector kernel (forced: software adapters default it
  // off): the conv is the in-projection's epilogue, no conv dispatch at all.
  KernelOptions k;
  k.matvec_subgroup = 1;
  k.fuse_conv_in = true;
  auto n = decode_step_labels("lfm2_tiny/hf", k);
  ASSERT_GT(n["shortconv_in_proj"], 0u);
  EXPECT_EQ(sum(n, {"shortconv_conv", "causal_conv_state"}), 0u);
  k.fuse_conv_in = false;
  EXPECT_EQ(sum(decode_step_labels("lfm2_tiny/hf", k), {"shortconv_conv", "causal_conv_state"}), n["shortconv_in_proj"]);
}

TEST(HybridDispatch, Qwen35DeltaNetLayerDecode) {
  const std::set<std::string> mixer = {"gdn_conv",  "causal_conv_state", "gdn_l2norm",    "gdn_gates",
                                       "gdn_step", "gated_rmsnorm",     "gdn_decode_prep", "gdn_step_norm",
                                       "gdn_decode"};
  for (int combo : {0, 1, 2, 4, 6, 8, 15}) {  // off, each switch alone, prep + norm, all (parity tests cover all 16)
    KernelOptions k;
    k.fuse_conv_state = combo & 1;
    k.gdn_fuse_prep = combo & 2;
    k.gdn_fuse_norm = combo & 4;
    k.gdn_fuse_decode = combo & 8;
    auto n = decode_step_labels("qwen35_tiny", k);
    const uint32_t layers = n["gdn_in"];
    ASSERT_GT(layers, 0u);
    EXPECT_EQ(n["gdn_out"], layers);
    const uint32_t prep = k.gdn_fuse_prep ? 1 : (k.fuse_conv_state ? 3 : 4), step = k.gdn_fuse_norm ? 1 : 2;
    EXPECT_EQ(sum(n, mixer), layers * (k.gdn_fuse_decode ? 1 : prep + step)) << "combo " << combo;
  }
}

// The attention layers and input norms of both hybrids: every fusion on (the default), then each off.
TEST(HybridDispatch, AttentionLayersAndInputNormsDecode) {
  for (const char* fx : {"lfm2_tiny/hf", "qwen35_tiny"}) {
    const bool lfm2 = std::string(fx) == "lfm2_tiny/hf";
    const char* in_norm = lfm2 ? "operator_norm" : "attn_norm";
    for (int off : {0, 1, 2, 3, 4}) {  // none, fuse_norm, fuse_qkv, fuse_qk_norm, fuse_rope_kv
      KernelOptions k;
      k.fuse_norm = off != 1;
      k.fuse_qk_norm = off != 3;
      k.fuse_rope_kv = off != 4;
      auto n = decode_step_labels(fx, k, off != 2);
      const uint32_t mixers = lfm2 ? n["shortconv_in_proj"] : n["gdn_in"];
      const uint32_t attn = n["attn_output"];
      ASSERT_GT(attn, 0u) << fx;
      ASSERT_GT(mixers, 0u) << fx;
      const uint32_t layers = attn + mixers;
      EXPECT_EQ(n["ffn_gate_up"], layers) << fx << " off " << off;
      EXPECT_EQ(n[in_norm], k.fuse_norm ? 0u : layers) << fx << " off " << off;
      if (lfm2) {
        EXPECT_EQ(n["attn_qkv"], off == 2 ? 0u : attn) << "off " << off;
        EXPECT_EQ(n["attn_k"], off == 2 ? attn : 0u) << "off " << off;
        EXPECT_EQ(n["attn_v"], off == 2 ? attn : 0u) << "off " << off;
      }
      const bool folded = k.fuse_qk_norm && k.fuse_rope_kv;
      EXPECT_EQ(n["qk_norm_rope_kv"], folded ? attn : 0u) << fx << " off " << off;
      EXPECT_EQ(n["attn_q_norm"] + n["attn_k_norm"], folded ? 0u : 2 * attn) << fx << " off " << off;
      EXPECT_EQ(n["rope_kv_store"], !folded && k.fuse_rope_kv ? attn : 0u) << fx << " off " << off;
    }
  }
}

// --fused-decode (KernelOptions::fused_decode): the attention launch does the QK-norm, RoPE and KV
// store, whatever --fuse-qk-norm / --fuse-rope-kv say: one dispatch fewer per attention layer than
// the default step, and none of the unfused forms' labels.
TEST(HybridDispatch, FusedDecodeAttentionLayers) {
  for (const char* fx : {"lfm2_tiny/hf", "qwen35_tiny"}) {
    const auto base = decode_step_labels(fx, KernelOptions{});
    uint32_t base_total = 0;
    for (auto& [l, c] : base) base_total += c;
    for (int off : {0, 3, 4}) {  // none, fuse_qk_norm, fuse_rope_kv
      KernelOptions k;
      k.fused_decode = true;
      k.fuse_qk_norm = off != 3;
      k.fuse_rope_kv = off != 4;
      auto n = decode_step_labels(fx, k);
      const uint32_t attn = n["attn_output"];
      ASSERT_GT(attn, 0u) << fx;
      uint32_t total = 0;
      for (auto& [l, c] : n) total += c;
      EXPECT_EQ(total, base_total - attn) << fx << " off " << off;
      EXPECT_EQ(n["attention"], attn) << fx << " off " << off;
      EXPECT_EQ(n["qk_norm_rope_kv"] + n["attn_q_norm"] + n["attn_k_norm"] + n["rope_kv_store"] + n["rope_q"] + n["rope_k"] +
                    n["kv_store"],
                0u)
          << fx << " off " << off;
    }
  }
}

// Qwen2 (tiny, 2 layers; layer 1's V f32, its Q and K Q8_0): with fuse_qkv_rope_kv the biases,
// RoPE and the KV store are the epilogue of one QKV dispatch per part (layer 0: attn_qkv; layer 1:
// attn_qk and attn_v); without it they take attn_qkv_bias and rope_kv_store per layer.
TEST(HybridDispatch, Qwen2AttentionLayerDecode) {
  TinyLlamaSpec s;
  s.q8_projections = true, s.f32_last_v = true;
  const std::string path = write_tiny_gguf("qwen2_dispatch.gguf", tiny_llama_family_doc("qwen2", s));
  for (bool fused : {true, false}) {
    KernelOptions k;
    k.fuse_qkv_rope_kv = fused;
    auto n = decode_step_labels(path, k);
    EXPECT_EQ(n["attn_output"], 2u);
    EXPECT_EQ(n["attn_qkv"], 1u) << "fused " << fused;
    EXPECT_EQ(n["attn_qk"], 1u) << "fused " << fused;
    EXPECT_EQ(n["attn_v"], 1u) << "fused " << fused;
    EXPECT_EQ(n["attn_qkv_bias"], fused ? 0u : 2u);
    EXPECT_EQ(n["rope_kv_store"], fused ? 0u : 2u);
  }
}

// Qwen2 (tiny, 2 layers of d 256; layer 1's V in Q6_K, its Q and K Q8_0, as Q4_K_M files' mixed
// layers), int8 activations on the matrix-vector kernel (forced: software adapters default both
// off): with --fuse-qkv-formats layer 1's two parts are one attn_qkv launch; without, attn_qk and
// attn_v. The logits of a prompt, a 5-token forward and decode steps are bit-identical either way.
TEST(HybridDispatch, Qwen2QkvTwoFormatsInOneLaunch) {
  TinyLlamaSpec s;
  s.d = 256, s.head_dim = 64, s.q8_projections = true, s.q6k_last_v = true;
  const std::string path = write_tiny_gguf("qwen2_q6k_v.gguf", tiny_llama_family_doc("qwen2", s));
  std::vector<float> logits[2];
  for (bool fused : {true, false}) {
    KernelOptions k;
    k.matvec_subgroup = 1, k.matvec_int8 = 1;
    k.fuse_qkv_formats = fused;
    auto n = decode_step_labels(path, k);
    EXPECT_EQ(n["attn_qkv"], fused ? 2u : 1u) << "fused " << fused;
    EXPECT_EQ(n["attn_qk"], fused ? 0u : 1u) << "fused " << fused;
    EXPECT_EQ(n["attn_v"], fused ? 0u : 1u) << "fused " << fused;
    auto src = ModelSource::open(path);
    ModelOptions o;
    o.context_length = 64;
    o.kernels = k;
    auto m = create_model(*src, o);
    auto seq = m->new_sequence();
    std::vector<float> l;
    m->forward(*seq, std::vector<int32_t>{3, 9, 27, 81, 115, 5, 6, 7, 8, 9, 10}, nullptr);
    m->forward(*seq, std::vector<int32_t>{11, 12, 13, 14, 15}, &l);
    std::vector<float>& all = logits[fused];
    all = l;
    for (int i = 0; i < 4; ++i) {
      const int32_t t = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
      m->forward(*seq, std::span<const int32_t>(&t, 1), &l);
      all.insert(all.end(), l.begin(), l.end());
    }
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  EXPECT_EQ(std::memcmp(logits[0].data(), logits[1].data(), logits[0].size() * 4), 0)
      << "--fuse-qkv-formats changed the logits bits";
}

// The warm-up compiles every kernel variant a conversation of the hybrids uses, including both
// forms of causal_conv (one dispatch for <= 8 tokens, two for longer prefills) and the fused
// DeltaNet decode: a conversation afterwards compiles no pipeline.
TEST(HybridDispatch, WarmupCompilesEveryVariantAConversationUses) {
  for (const char* fx : {"lfm2_tiny/hf", "qwen35_tiny"}) {
    auto src = ModelSource::open(fixture(fx));
    ModelOptions o;
    o.context_length = 256;
    auto m = create_model(*src, o);
    warm_up(*m);
    const size_t compiled = m->pipeline_count();
    ASSERT_GT(compiled, 0u);
    auto seq = m->new_sequence();
    std::vector<float> logits;
    for (uint32_t n : {30u, 1u, 1u, 5u, 1u, 20u, 1u}) {  // prompt, decode, short turn, decode, turn, decode
      const std::vector<int32_t> ids(n, 7);
      m->forward(*seq, ids, n == 5 ? &logits : nullptr);
      m->forward_argmax(*seq, ids);
      EXPECT_EQ(m->pipeline_count(), compiled) << fx << " after a forward of " << n << " tokens";
    }
  }
}

// A model whose context is shorter than the warm-up's forwards (9 + 2 + 1 tokens) skips the
// warm-up instead of failing with "context length exceeded" before the user's prompt; it runs.
TEST(HybridDispatch, WarmupOfAModelWithATinyContext) {
  TinyLlamaSpec s;
  s.context = 8;
  const std::string path = write_tiny_gguf("llama_ctx8.gguf", tiny_llama_family_doc("llama", s));
  auto src = ModelSource::open(path);
  auto m = create_model(*src, ModelOptions{});
  EXPECT_NO_THROW(warm_up(*m));
  auto seq = m->new_sequence();
  ASSERT_EQ(seq->context_length(), 8u);
  const std::vector<int32_t> prompt = {5, 6, 7};
  int32_t t = m->forward_argmax(*seq, prompt);
  EXPECT_GE(t, 0);
  EXPECT_GE(m->forward_argmax(*seq, std::span<const int32_t>(&t, 1)), 0);
}
