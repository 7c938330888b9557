// Model::forward_batch (continuous batching) against each sequence run alone, on WebGPU, for
// every architecture with a batched forward: tiny random llama, qwen2 (Q/K/V biases; also with
// the embedding and the head split in row blocks) and gemma3 (sliding window
// 8, crossed by the prompts) GGUFs written here, the tiny LFM2 (attention + ShortConv) and
// Qwen3.5 (attention + Gated DeltaNet) fixtures, and SmolLM2-135M Q4_1 when
// WGLLM_REAL_MODEL_TESTS=1 (slow on lavapipe: ~4 min; passes bit-identical there too).
//   - Decode: sequences prefilled alone, then decoded together (one token each, T = rows <= 8):
//     greedy tokens identical and logits BIT-IDENTICAL to decoding each alone (the T <= 8 kernels
//     compute every row alike whatever T is).
//   - Many sequences (T = 10 rows > kernels::kFusedMaxTokens): greedy tokens identical, logits
//     within kManyTol. Bit-identical with the software-adapter defaults (matmul.wgsl for every T);
//     with the hardware kernels and --matvec-max-tokens 8 (llama_gpu_kernels: matvec.wgsl for T <= 8,
//     the tiled matmul past 8) a step of more than 8 rows sums in another order than a decode alone
//     (the default 32 keeps steps of up to 32 rows on matvec.wgsl: bit-identical, llama_mv16).
//   - Mixed steps: prompts of different lengths prefilled in one forward, a sequence joining
//     (prefill) while the others decode, Out::Argmax / Logits / None mixed: tokens identical,
//     logits within kManyTol, argmax == the solo logits' argmax.
//   - The comparison can fail: two sequences swapped between steps (each then continues the
//     other's state) give other tokens than the reference.
//   - Bad batches (a sequence twice, an id out of range) throw and change no sequence.
//   - The warm-up with `batched` (wgllm serve) compiles the batched variants; without it (every
//     other command) a batched step compiles pipelines of its own.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "core/error.h"
#include "parity_util.h"
#include "runtime/warmup.h"
#include "formats/st_test_writer.h"
#include "tiny_gguf_util.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

constexpr float kManyTol = 1e-3f;  // max |logit difference| allowed where rows > 8 (tiled matmul)
constexpr int kSteps = 5;          // decode steps per sequence

/// A tiny random llama-family GGUF (tiny_gguf_util.h defaults: 2 layers, d 64, 4 query / 2 KV
/// heads of 16, FFN 96, vocab 128, f32; gemma3 sliding window 8).
std::string tiny_llama_family(const std::string& arch) {
  return write_tiny_gguf(arch + "_batch_tiny.gguf", tiny_llama_family_doc(arch, TinyLlamaSpec{}));
}

std::string path_of(const std::string& model) {
  if (model == "smollm2") return cache_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (model == "lfm2") return fixture("lfm2_tiny/lfm2_tiny.f32.gguf");
  if (model == "qwen35") return fixture("qwen35_tiny");
  if (model == "qwen2_split") return tiny_llama_family("qwen2");
  if (model == "llama_gpu_kernels" || model == "llama_mv16" || model.rfind("llama_split", 0) == 0)
    return tiny_llama_family("llama");
  return tiny_llama_family(model);
}

std::vector<int32_t> prompt_of(uint32_t i, uint32_t vocab) {
  std::vector<int32_t> p;
  const uint32_t n = 3 + (i * 5) % 13;  // 3 .. 15 tokens: some past 8 (the prefill kernels)
  for (uint32_t k = 0; k < n; ++k) p.push_back(int32_t((k * 37 + i * 101 + 11) % std::min<uint32_t>(vocab, 280)));
  return p;
}

int32_t argmax_of(const std::vector<float>& l) { return int32_t(std::max_element(l.begin(), l.end()) - l.begin()); }

/// One sequence run alone: the logits after its prompt and after each of kSteps greedy tokens.
struct Solo {
  std::vector<int32_t> tokens;              // greedy token after the prompt, then after each step
  std::vector<std::vector<float>> logits;   // logits[0]: after the prompt; logits[s]: after step s
};

Solo run_alone(Model& m, const std::vector<int32_t>& prompt) {
  Solo r;
  auto seq = m.new_sequence(128);
  std::vector<float> l;
  m.forward(*seq, prompt, &l);
  for (int s = 0;; ++s) {
    r.logits.push_back(l);
    r.tokens.push_back(argmax_of(l));
    if (s == kSteps) break;
    m.forward(*seq, std::span<const int32_t>(&r.tokens.back(), 1), &l);
  }
  return r;
}

struct Fixture {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<Model> model;
  std::map<uint32_t, Solo> solo;  // by prompt index
  const Solo& alone(uint32_t i) {
    auto it = solo.find(i);
    if (it == solo.end()) it = solo.emplace(i, run_alone(*model, prompt_of(i, src->config.vocab))).first;
    return it->second;
  }
};
Fixture& fixture_for(const std::string& name) {
  static std::map<std::string, Fixture> all;
  Fixture& f = all[name];
  if (!f.model) {
    f.src = ModelSource::open(path_of(name));
    if (name == "qwen2_split") {  // 16 KiB bindings: embedding and head in row blocks
      f.model = create_gpu_with_binding_cap(*f.src, 128, "16384");
    } else {
      ModelOptions o;
      o.context_length = 128;
      if (name == "llama_gpu_kernels") {  // the hardware-GPU kernels: matvec.wgsl for T <= 8, tiled matmul past 8
        o.kernels.matvec_subgroup = 1;
        o.kernels.matmul_tiled = 1;
        o.kernels.matvec_max_tokens = 8;  // (the default 32 would keep 10 rows on matvec: llama_mv16's case)
      }
      if (name == "llama_mv16") {  // --matvec-max-tokens 16: steps of up to 16 rows on matvec.wgsl
        o.kernels.matvec_subgroup = 1;
        o.kernels.matmul_tiled = 1;
        o.kernels.matvec_max_tokens = 16;
      }
      if (name.rfind("llama_split", 0) == 0) {  // decode attention split every 4 keys (hardware GPUs split)
        o.kernels.attention_decode_split_min = 0;
        o.kernels.attention_decode_split_len = 4;
      }
      if (name == "llama_split_unbatched") o.kernels.batch_rope_kv = o.kernels.batch_decode_attn = false;
      f.model = create_model(*f.src, o);
    }
  }
  return f;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

/// n sequences prefilled alone, then kSteps decode steps all in one forward_batch each.
/// swap_at >= 0: sequences 0 and 1 trade places at that step (the test must then fail).
/// Returns the greedy tokens per sequence; checks logits (bit-identical or within tol) unless
/// swapped; *swap_diff: the largest |logit diff| vs alone of sequences 0 and 1 (swapped runs).
/// pooled: the sequences from Model::new_sequences (KV pools where the backend makes them).
std::vector<std::vector<int32_t>> decode_together(Fixture& f, uint32_t n, bool bit_identical, int swap_at = -1,
                                                  float* swap_diff = nullptr, bool pooled = false) {
  Model& m = *f.model;
  std::vector<std::unique_ptr<Sequence>> seqs;
  if (pooled) seqs = m.new_sequences(n, 128);
  std::vector<std::vector<int32_t>> toks(n);
  for (uint32_t i = 0; i < n; ++i) {
    if (!pooled) seqs.push_back(m.new_sequence(128));
    std::vector<float> l;
    m.forward(*seqs[i], prompt_of(i, f.src->config.vocab), &l);
    toks[i].push_back(argmax_of(l));
  }
  float worst = 0;
  for (int s = 1; s <= kSteps; ++s) {
    if (s == swap_at) std::swap(seqs[0], seqs[1]);
    std::vector<std::vector<float>> logits(n);
    std::vector<BatchItem> items(n);
    for (uint32_t i = 0; i < n; ++i) {
      items[i].seq = seqs[i].get();
      items[i].tokens = std::span<const int32_t>(&toks[i].back(), 1);
      items[i].out = BatchItem::Out::Logits;
      items[i].logits = &logits[i];
    }
    m.forward_batch(items);
    for (uint32_t i = 0; i < n; ++i) {
      toks[i].push_back(argmax_of(logits[i]));
      const Solo& ref = f.alone(i);
      if (swap_at >= 0) {
        if (i < 2 && swap_diff) *swap_diff = std::max(*swap_diff, max_diff(logits[i], ref.logits[s]));
        continue;
      }
      if (bit_identical) {
        EXPECT_TRUE(same_bits(logits[i], ref.logits[s])) << "sequence " << i << " step " << s << ": max diff "
                                                          << max_diff(logits[i], ref.logits[s]);
      }
      worst = std::max(worst, max_diff(logits[i], ref.logits[s]));
    }
  }
  if (swap_at < 0) {
    EXPECT_LE(worst, kManyTol);
    std::printf("[ batch ] %u sequences decoded together: max |logit diff| vs alone = %g\n", n, worst);
  }
  return toks;
}

}  // namespace

class BatchForward : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "smollm2" && env_or("WGLLM_REAL_MODEL_TESTS", "") != "1")
      GTEST_SKIP() << "SmolLM2 on lavapipe is slow: set WGLLM_REAL_MODEL_TESTS=1";
  }
};

TEST_P(BatchForward, DecodeTogetherIsBitIdenticalToAlone) {
  Fixture& f = fixture_for(GetParam());
  ASSERT_TRUE(f.model->batched_forward());
  const auto toks = decode_together(f, 4, true);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(toks[i], f.alone(i).tokens) << "sequence " << i;
}

// Sequences made together (Model::new_sequences: on WebGPU llama / Qwen2 / Gemma 3 their caches
// are views of one KV pool per layer, so RoPE + KV store and decode attention run once per layer for
// all of them, --batch-rope-kv / --batch-decode-attn): still bit-identical to each alone; the swap
// check shows the comparison can fail here too.
TEST_P(BatchForward, PooledDecodeTogetherIsBitIdenticalToAlone) {
  Fixture& f = fixture_for(GetParam());
  if (f.src->config.arch != "lfm2" && f.src->config.arch != "qwen35") {  // every layer attention: pooled
    const auto seqs = f.model->new_sequences(2, 128);
    EXPECT_TRUE(seqs[0]->kv(0).keys().pooled() && seqs[1]->kv(0).keys().pooled()) << "not in a KV pool";
  }
  const auto toks = decode_together(f, 4, true, -1, nullptr, true);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(toks[i], f.alone(i).tokens) << "sequence " << i;
  float d = 0;
  decode_together(f, 4, false, 2, &d, true);
  EXPECT_GT(d, 100 * kManyTol) << "swapping two pooled sequences' states went unnoticed";
}

TEST_P(BatchForward, ManySequencesPastEightRows) {
  Fixture& f = fixture_for(GetParam());
  const auto toks = decode_together(f, 10, false);
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(toks[i], f.alone(i).tokens) << "sequence " << i;
}

TEST_P(BatchForward, SwappedStatesAreCaught) {
  Fixture& f = fixture_for(GetParam());
  float d = 0;
  decode_together(f, 4, false, 2, &d);
  // From step 2 on sequence 0 continues sequence 1's state with its own token and vice versa: its
  // logits leave the reference by far more than kManyTol (the tiny models may repeat one greedy
  // token, so the logits are compared rather than the tokens).
  EXPECT_GT(d, 100 * kManyTol) << "swapping two sequences' states went unnoticed: the comparison cannot fail";
}

TEST_P(BatchForward, MixedPrefillDecodeJoinLeave) {
  Fixture& f = fixture_for(GetParam());
  Model& m = *f.model;
  const uint32_t vocab = f.src->config.vocab;
  // Sequences 0..2 prefill together; sequence 3 joins with its prefill at step 2 while the others
  // decode; sequence 0 leaves after step 3. Out kinds rotate over Logits, Argmax.
  // Pooled sequences (Model::new_sequences): the batched launches serve the prefill rows (RoPE + KV
  // store) and the decoding sequences (attention) while the joining one takes its own attention.
  std::vector<std::unique_ptr<Sequence>> seqs = m.new_sequences(4, 128);
  std::vector<std::vector<int32_t>> toks(4), prompts(4);
  for (uint32_t i = 0; i < 4; ++i) prompts[i] = prompt_of(i, vocab);
  float worst = 0;
  for (int step = 0; step <= kSteps + 2; ++step) {
    std::vector<BatchItem> items;
    std::vector<uint32_t> who;
    std::vector<std::vector<float>> logits(4);
    for (uint32_t i = 0; i < 4; ++i) {
      const int start = i == 3 ? 2 : 0;  // the step of its prefill
      if (step < start || (i == 0 && step > 3) || int(toks[i].size()) > kSteps) continue;
      BatchItem it;
      it.seq = seqs[i].get();
      it.tokens = step == start ? std::span<const int32_t>(prompts[i]) : std::span<const int32_t>(&toks[i].back(), 1);
      it.out = (i + step) % 2 ? BatchItem::Out::Argmax : BatchItem::Out::Logits;
      it.logits = &logits[i];
      items.push_back(it);
      who.push_back(i);
    }
    if (items.empty()) break;
    m.forward_batch(items);
    for (size_t k = 0; k < items.size(); ++k) {
      const uint32_t i = who[k];
      const Solo& ref = f.alone(i);
      const size_t s = toks[i].size();  // logits index of this result
      if (items[k].out == BatchItem::Out::Argmax) {
        EXPECT_EQ(items[k].argmax, ref.tokens[s]) << "sequence " << i << " result " << s;
        toks[i].push_back(items[k].argmax);
      } else {
        worst = std::max(worst, max_diff(logits[i], ref.logits[s]));
        toks[i].push_back(argmax_of(logits[i]));
      }
      EXPECT_EQ(seqs[i]->n_past(), prompts[i].size() + s);
    }
  }
  for (uint32_t i = 0; i < 4; ++i) {
    const auto& ref = f.alone(i).tokens;
    ASSERT_GE(toks[i].size(), 3u) << "sequence " << i;
    EXPECT_TRUE(std::equal(toks[i].begin(), toks[i].end(), ref.begin())) << "sequence " << i;
  }
  EXPECT_LE(worst, kManyTol);
  std::printf("[ batch ] mixed prefill/decode: max |logit diff| vs alone = %g\n", worst);
}

TEST_P(BatchForward, BadBatchThrowsAndChangesNothing) {
  Fixture& f = fixture_for(GetParam());
  Model& m = *f.model;
  auto a = m.new_sequence(128), b = m.new_sequence(128);
  const std::vector<int32_t> one{1}, bad{int32_t(f.src->config.vocab)};
  std::vector<BatchItem> twice{{a.get(), one}, {a.get(), one}};
  EXPECT_THROW(m.forward_batch(twice), Error);
  std::vector<BatchItem> out_of_range{{a.get(), one}, {b.get(), bad}};
  EXPECT_THROW(m.forward_batch(out_of_range), Error);
  EXPECT_EQ(a->n_past(), 0u);
  EXPECT_EQ(b->n_past(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Architectures, BatchForward,
                         ::testing::Values("llama", "llama_gpu_kernels", "llama_split", "llama_split_unbatched", "qwen2",
                                           "qwen2_split", "gemma3", "lfm2", "qwen35", "smollm2"));

// --matvec-max-tokens 16: a step of 10 sequences (10 rows > 8) runs on the matrix-vector kernel,
// every row summed as a decode alone: logits bit-identical to each sequence alone (with the default 8
// the tiled matmul sums them in another order: ManySequencesPastEightRows, within kManyTol).
TEST(BatchForwardMatvec, TenSequencesBitIdenticalWithMatvecUpTo16) {
  Fixture& f = fixture_for("llama_mv16");
  const auto toks = decode_together(f, 10, true, -1, nullptr, true);
  for (uint32_t i = 0; i < 10; ++i) EXPECT_EQ(toks[i], f.alone(i).tokens) << "sequence " << i;
}

// The batched launches are taken: a decode step of 4 pooled llama sequences records one RoPE + KV
// store and one decode attention (+ one merge with splits) per layer; with the switches off, or
// with sequences made one by one (no pool), one of each per sequence and layer.
TEST(BatchForwardPool, OneLaunchPerLayerForAllSequences) {
  for (const std::string name : {"llama_split", "llama_split_unbatched"}) {
    Fixture& f = fixture_for(name);
    Model& m = *f.model;
    const uint32_t L = f.src->config.n_layers;
    for (bool pooled : {true, false}) {
      std::vector<std::unique_ptr<Sequence>> seqs;
      if (pooled) seqs = m.new_sequences(4, 128);
      else
        for (int i = 0; i < 4; ++i) seqs.push_back(m.new_sequence(128));
      std::vector<std::vector<int32_t>> prompts(4);
      std::vector<BatchItem> items(4);
      for (uint32_t i = 0; i < 4; ++i) {
        prompts[i] = prompt_of(i + 1, f.src->config.vocab);  // 5 to 13 tokens: every decode splits
        m.forward(*seqs[i], prompts[i], nullptr);
        items[i].seq = seqs[i].get();
        items[i].tokens = std::span<const int32_t>(prompts[i].data(), 1);
        items[i].out = BatchItem::Out::Argmax;
      }
      m.set_profiling(true);
      m.forward_batch(items);
      m.set_profiling(false);
      std::map<std::string, uint32_t> n;
      for (const auto& k : m.last_dispatches()) ++n[k.label];
      const bool batched = pooled && name == "llama_split";
      const std::string what = name + (pooled ? " pooled" : " one by one");
      EXPECT_EQ(n["rope_kv_store"], batched ? L : 4 * L) << what;
      EXPECT_EQ(n["attention"], batched ? L : 4 * L) << what;
      EXPECT_EQ(n["attention_combine"], batched ? L : 4 * L) << what;
    }
  }
}

// warm_up(m, true) (`wgllm serve`) compiles every pipeline a batched prefill and decode of pooled
// sequences records; warm_up(m) (run, chat, bench: no batched forwards) leaves the batched
// variants to their first use. Fresh models: the fixtures' pipelines would hide the difference.
TEST(BatchForwardWarmup, BatchedWarmupCompilesTheBatchedVariants) {
  auto src = ModelSource::open(path_of("llama_split"));
  for (bool batched : {true, false}) {
    ModelOptions o;
    o.context_length = 128;
    o.kernels.attention_decode_split_min = 0;  // every decode splits (hardware GPUs' long contexts)
    o.kernels.attention_decode_split_len = 4;
    auto m = create_model(*src, o);
    warm_up(*m, batched);
    const size_t compiled = m->pipeline_count();
    ASSERT_GT(compiled, 0u);
    auto seqs = m->new_sequences(3, 128);
    std::vector<std::vector<int32_t>> prompts(3);
    std::vector<BatchItem> items(3);
    for (uint32_t i = 0; i < 3; ++i) {
      prompts[i] = prompt_of(i + 1, src->config.vocab);
      items[i] = {seqs[i].get(), prompts[i]};
      items[i].out = BatchItem::Out::Argmax;
    }
    m->forward_batch(items);  // batched prefill
    for (int step = 0; step < 3; ++step) {
      for (uint32_t i = 0; i < 3; ++i) items[i].tokens = std::span<const int32_t>(&items[i].argmax, 1);
      m->forward_batch(items);  // batched decode
    }
    if (batched)
      EXPECT_EQ(m->pipeline_count(), compiled) << "a batched step compiled a pipeline the batched warm-up did not";
    else
      EXPECT_GT(m->pipeline_count(), compiled) << "the batched variants were compiled without `batched`";
  }
}

// The warm-up's prefill passes --matvec-max-tokens (hardware GPUs run forwards of up to 32 tokens on
// matvec.wgsl), and the first tiled-matmul forward compiles every tile class of each variant
// (kernels::matmul_tile_classes): prompts of any length then compile no pipeline. Run with the
// hardware-GPU matrix kernels forced (matvec.wgsl + tiled matmul; software adapters keep one tile
// class) and the product defaults; on a hardware adapter the tile classes are exercised too.
TEST(BatchForwardWarmup, PromptsOfAnyLengthCompileNothingAfterTheWarmup) {
  TinyLlamaSpec wide;  // Qwen2.5-1.5B's attention: 12 query / 2 KV heads of 128
  wide.heads = 12, wide.kv_heads = 2, wide.head_dim = 128;
  for (const std::string& path : {path_of("llama_split"), write_tiny_gguf("qwen2_wide_heads.gguf", tiny_llama_family_doc("qwen2", wide))}) {
    auto src = ModelSource::open(path);
    for (bool forced : {true, false}) {
      ModelOptions o;
      o.context_length = 1024;
      if (forced) o.kernels.matvec_subgroup = o.kernels.matmul_tiled = 1;
      auto m = create_model(*src, o);
      warm_up(*m);
      const size_t compiled = m->pipeline_count();
      for (uint32_t n : {12u, 40u, 104u, 300u, 700u}) {
        if (n == 700 && path != path_of("llama_split")) continue;  // (the wide heads' CPU-emulated attention is slow)
        auto seq = m->new_sequence(1024);
        m->forward_argmax(*seq, std::vector<int32_t>(n, 5));
        EXPECT_EQ(m->pipeline_count(), compiled) << src->config.arch << (forced ? ", hardware kernels" : ", defaults")
                                                 << ": a prompt of " << n << " tokens compiled a pipeline the warm-up did not";
      }
    }
  }
}

// Serve-like traffic after warm_up(m, true) compiles no pipeline: with the hardware-GPU matrix
// kernels forced (matvec.wgsl up to 32 rows, the tiled matmul past it), 64 pooled sequences:
// a lone 104-token prompt and its decode, 15 prompts prefilled together (groups of up to
// --prefill-chunk rows), 16-row decode steps, 48 prompts joining while 16 decode, 64-row decode
// steps (the tiled matmul), Out::Logits and Out::Argmax heads.
TEST(BatchForwardWarmup, ServeTrafficCompilesNothingAfterTheBatchedWarmup) {
  auto src = ModelSource::open(path_of("llama_split"));
  ModelOptions o;
  o.context_length = 256;
  o.kernels.matvec_subgroup = o.kernels.matmul_tiled = 1;
  auto m = create_model(*src, o);
  warm_up(*m, true);
  const size_t compiled = m->pipeline_count();
  auto seqs = m->new_sequences(64, 256);
  std::vector<std::vector<int32_t>> prompts(64);
  for (uint32_t i = 0; i < 64; ++i) prompts[i] = std::vector<int32_t>(104, int32_t(5 + i % 50));
  std::vector<int32_t> next(64, 7);
  std::vector<float> logits;
  auto step = [&](const std::string& what, uint32_t first, uint32_t n_prompt, uint32_t n_decode) {
    std::vector<BatchItem> items;
    for (uint32_t i = 0; i < n_decode; ++i) items.push_back({seqs[i].get(), std::span<const int32_t>(&next[i], 1)});
    for (uint32_t i = first; i < first + n_prompt; ++i) items.push_back({seqs[i].get(), prompts[i]});
    items[0].out = BatchItem::Out::Logits;
    items[0].logits = &logits;
    m->forward_batch(items);
    EXPECT_EQ(m->pipeline_count(), compiled) << what << " compiled a pipeline the batched warm-up did not";
  };
  step("a lone prompt", 0, 1, 0);
  step("a lone decode step", 0, 0, 1);
  step("15 prompts together", 1, 15, 0);
  step("16 decoding", 0, 0, 16);
  step("48 prompts joining 16 decoding", 16, 48, 16);
  step("64 decoding", 0, 0, 64);
  step("64 decoding again", 0, 0, 64);
}
