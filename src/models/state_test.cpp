// Per-layer state objects (models/state.h) and the generic Sequence (models/model.h), on host and
// GPU storage:
//   - names follow the reference module paths, bytes() and memory() add up;
//   - snapshot / restore round trips per state kind: copied states (ConvState, DeltaState) come
//     back bit for bit, a KvState rolls back by the length alone (its rows are not copied);
//   - restorable() refuses a snapshot whose KV rows were rewritten, truncate() only KV-only;
//   - export / import of the live state and of snapshots round-trip, with layout checks that
//     change nothing on a mismatch; session-file v1 names translate to the new ones;
//   - on the tiny llama / LFM2 / Qwen3.5 models, CPU and WebGPU (one test each): restoring a snapshot after
//     decoding further gives logits bit-identical to recomputing the same tokens from scratch.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/error.h"
#include "formats/gguf_test_doc.h"
#include "formats/st_test_writer.h"
#include "formats/test_util.h"
#include "gpu/context.h"
#include "models/model.h"
#include "models/source.h"
#include "models/state.h"

using namespace wgllm;

namespace {

std::string fixture(const std::string& rel) {
  const char* e = std::getenv("WGLLM_SOURCE_DIR");
  return std::string(e && *e ? e : WGLLM_SOURCE_DIR) + "/tests/fixtures/" + rel;
}

gpu::Context& gpu_ctx() {
  // Never destroyed (GPU teardown from static destructors is unsafe on some drivers).
  static gpu::Context& c = *gpu::Context::create().release();
  return c;
}

constexpr uint32_t kCtx = 16, kKvDim = 8, kConvRows = 3, kConvWidth = 12;
constexpr uint32_t kNv = 2, kDk = 4, kDv = 4, kDeltaConvDim = 20;

/// Layer 0: attention, 1: short conv, 2: Gated DeltaNet, 3: attention.
std::vector<std::unique_ptr<LayerState>> hybrid_states(gpu::Context* ctx) {
  std::vector<std::unique_ptr<LayerState>> st;
  st.push_back(std::make_unique<KvState>(ctx, 0, kCtx, kKvDim));
  st.push_back(std::make_unique<ConvState>(ctx, 1, kConvRows, kConvWidth));
  st.push_back(std::make_unique<DeltaState>(ctx, 2, kConvRows, kDeltaConvDim, kNv, kDk, kDv));
  st.push_back(std::make_unique<KvState>(ctx, 3, kCtx, kKvDim));
  return st;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> f(n / 4);
  for (float& x : f) x = u(rng);
  std::vector<uint8_t> b(n);
  std::memcpy(b.data(), f.data(), n);
  return b;
}

/// Overwrites every array of seq with random data and appends n tokens, as a forward would.
void scribble(Sequence& seq, uint32_t n, uint32_t seed) {
  seq.mark_written(n);
  for (const auto& s : seq.states())
    for (const StateArray& a : s->arrays()) const_cast<StateArray&>(a).write(random_bytes(a.bytes(), seed++));
  seq.advance(n);
}

/// Whole contents of every array (host copies).
std::vector<std::vector<uint8_t>> contents(const Sequence& seq) {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& s : seq.states())
    for (const StateArray& a : s->arrays()) out.push_back(a.read(a.bytes()));
  return out;
}

class StateOn : public ::testing::TestWithParam<bool> {
 protected:
  gpu::Context* ctx() { return GetParam() ? &gpu_ctx() : nullptr; }
  std::unique_ptr<Sequence> seq() { return std::make_unique<Sequence>(kCtx, ctx(), hybrid_states(ctx())); }
};

}  // namespace

TEST(State, NamesFollowTheReferenceModules) {
  auto st = hybrid_states(nullptr);
  auto names = [](const LayerState& s) {
    std::vector<std::string> v;
    for (const StateArray& a : s.arrays()) v.push_back(a.name());
    return v;
  };
  EXPECT_EQ(names(*st[0]), (std::vector<std::string>{"layers.0.self_attn.keys", "layers.0.self_attn.values"}));
  EXPECT_EQ(names(*st[1]), (std::vector<std::string>{"layers.1.conv.conv_state"}));
  EXPECT_EQ(names(*st[2]),
            (std::vector<std::string>{"layers.2.linear_attn.conv_state", "layers.2.linear_attn.recurrent_state"}));
  EXPECT_STREQ(st[0]->kind(), "kv");
  EXPECT_STREQ(st[1]->kind(), "conv");
  EXPECT_STREQ(st[2]->kind(), "delta");
  EXPECT_TRUE(st[0]->by_length());
  EXPECT_FALSE(st[1]->by_length());
  EXPECT_FALSE(st[2]->by_length());
}

TEST(State, V1NamesTranslate) {
  auto st = hybrid_states(nullptr);
  EXPECT_EQ(state_name_from_v1("blk.0.k", st), "layers.0.self_attn.keys");
  EXPECT_EQ(state_name_from_v1("blk.3.v", st), "layers.3.self_attn.values");
  EXPECT_EQ(state_name_from_v1("blk.1.conv", st), "layers.1.conv.conv_state");
  EXPECT_EQ(state_name_from_v1("blk.2.conv", st), "layers.2.linear_attn.conv_state");
  EXPECT_EQ(state_name_from_v1("blk.2.ssm", st), "layers.2.linear_attn.recurrent_state");
  for (const char* n : {"blk.9.k", "blk.0.ssm", "blk.x.k", "blk..k", "layers.0.self_attn.keys", "text"})
    EXPECT_EQ(state_name_from_v1(n, st), n);
}

TEST_P(StateOn, BytesAndMemory) {
  auto s = seq();
  const uint64_t kv = 2ull * kCtx * kKvDim * 4, conv = uint64_t(kConvRows) * kConvWidth * 4,
                 delta = (uint64_t(kConvRows) * kDeltaConvDim + uint64_t(kNv) * kDk * kDv) * 4;
  EXPECT_EQ(s->states()[0]->bytes(), kv);
  EXPECT_EQ(s->states()[1]->bytes(), conv);
  EXPECT_EQ(s->states()[2]->bytes(), delta);
  EXPECT_EQ(s->states()[0]->snapshot_bytes(), 0u);
  EXPECT_EQ(s->states()[2]->snapshot_bytes(), delta);
  EXPECT_EQ(s->memory().kv_cache, 2 * kv);
  EXPECT_EQ(s->memory().recurrent, conv + delta);
  EXPECT_EQ(s->snapshot()->bytes(), conv + delta);
  // Typed access checks the kind.
  EXPECT_NO_THROW(s->kv(0));
  EXPECT_NO_THROW(s->conv(1));
  EXPECT_NO_THROW(s->delta(2));
  EXPECT_THROW(s->kv(1), Error);
  EXPECT_THROW(s->delta(0), Error);
  EXPECT_THROW(s->conv(7), Error);
  if (GetParam()) {
    EXPECT_THROW(s->kv(0).keys().host(), Error);
    EXPECT_EQ(s->kv(0).keys().buffer().size(), kv / 2);
  } else {
    EXPECT_THROW(s->kv(0).keys().buffer(), Error);
  }
}

TEST_P(StateOn, SnapshotRestoreRoundTrip) {
  auto s = seq();
  scribble(*s, 5, 1);
  const auto at5 = contents(*s);
  auto snap = s->snapshot();
  EXPECT_EQ(snap->n_past(), 5u);
  scribble(*s, 3, 100);  // rows 5..7 and every recurrent state change
  const auto at8 = contents(*s);
  auto snap8 = s->snapshot();
  ASSERT_TRUE(s->restorable(*snap));
  s->restore(*snap);
  EXPECT_EQ(s->n_past(), 5u);
  const auto back = contents(*s);
  // Array order: keys0, values0, conv1, conv2, ssm2, keys3, values3. Copied states come back as at
  // the snapshot; KV arrays are rolled back by the length only (their bytes are those of now).
  for (size_t i : {2, 3, 4}) EXPECT_EQ(back[i], at5[i]) << i;
  for (size_t i : {0, 1, 5, 6}) EXPECT_EQ(back[i], at8[i]) << i;
  // Rewriting rows 5.. invalidates the snapshot at 8 but not the one at 5.
  scribble(*s, 2, 200);
  EXPECT_TRUE(s->restorable(*snap));
  EXPECT_FALSE(s->restorable(*snap8));
  EXPECT_THROW(s->restore(*snap8), Error);
  EXPECT_EQ(s->n_past(), 7u);  // unchanged by the refused restore
  // Another sequence's snapshot is refused.
  auto other = seq();
  EXPECT_FALSE(other->restorable(*snap));
  EXPECT_THROW(other->restore(*snap), Error);
}

TEST_P(StateOn, KvRollsBackByLength) {
  std::vector<std::unique_ptr<LayerState>> st;
  for (uint32_t i = 0; i < 2; ++i) st.push_back(std::make_unique<KvState>(ctx(), i, kCtx, kKvDim));
  Sequence s(kCtx, ctx(), std::move(st));
  scribble(s, 6, 3);
  const auto before = contents(s);
  auto snap = s.snapshot();
  EXPECT_EQ(snap->bytes(), 0u);  // nothing copied: the length is the whole snapshot
  s.truncate(2);
  EXPECT_EQ(s.n_past(), 2u);
  EXPECT_EQ(contents(s), before);  // rows past 2 are ignored, not cleared
  EXPECT_THROW(s.truncate(3), Error);
  EXPECT_EQ(s.export_state()[0].data.size(), 2u * kKvDim * 4);
  // A sequence with copied states cannot truncate.
  auto h = seq();
  scribble(*h, 4, 5);
  EXPECT_THROW(h->truncate(2), Error);
  EXPECT_EQ(h->n_past(), 4u);
}

TEST_P(StateOn, ExportImportRoundTrip) {
  auto a = seq();
  scribble(*a, 6, 7);
  const auto blobs = a->export_state();
  ASSERT_EQ(blobs.size(), 7u);
  EXPECT_EQ(blobs[0].name, "layers.0.self_attn.keys");
  EXPECT_EQ(blobs[0].data.size(), 6u * kKvDim * 4);  // rows [0, n_past) only
  EXPECT_EQ(blobs[4].name, "layers.2.linear_attn.recurrent_state");
  EXPECT_EQ(blobs[4].data.size(), uint64_t(kNv) * kDk * kDv * 4);
  auto b = seq();
  b->import_state(6, blobs);
  EXPECT_EQ(b->n_past(), 6u);
  EXPECT_EQ(b->export_state().size(), blobs.size());
  for (size_t i = 0; i < blobs.size(); ++i) EXPECT_EQ(b->export_state()[i].data, blobs[i].data) << blobs[i].name;
  // Layout mismatches change nothing.
  auto c = seq();
  scribble(*c, 2, 9);
  const auto c_before = contents(*c);
  auto bad = blobs;
  bad[3].data.resize(8);
  EXPECT_THROW(c->import_state(6, bad), Error);
  bad = blobs;
  bad[5].name = "layers.3.self_attn.kees";
  EXPECT_THROW(c->import_state(6, bad), Error);
  bad = blobs;
  bad.push_back({"layers.9.conv.conv_state", {}});
  EXPECT_THROW(c->import_state(6, bad), Error);
  EXPECT_THROW(c->import_state(5, blobs), Error);  // KV blobs hold 6 rows
  EXPECT_THROW(c->import_state(kCtx + 1, blobs), Error);
  EXPECT_EQ(c->n_past(), 2u);
  EXPECT_EQ(contents(*c), c_before);
}

TEST_P(StateOn, SnapshotExportImportRoundTrip) {
  auto a = seq();
  scribble(*a, 4, 11);
  auto snap = a->snapshot();
  const auto sb = a->export_snapshot(*snap);
  ASSERT_EQ(sb.size(), 3u);  // conv1, conv2, ssm2: KV states are not in snapshots
  EXPECT_EQ(sb[0].name, "layers.1.conv.conv_state");
  const auto at4 = contents(*a);
  // Rebuilt in another sequence holding the same KV rows: restoring it gives the same state.
  auto b = seq();
  b->import_state(4, a->export_state());
  scribble(*b, 3, 300);
  auto rebuilt = b->import_snapshot(4, sb);
  EXPECT_EQ(rebuilt->bytes(), snap->bytes());
  EXPECT_EQ(b->export_snapshot(*rebuilt)[2].data, sb[2].data);
  b->restore(*rebuilt);
  EXPECT_EQ(b->n_past(), 4u);
  const auto got = contents(*b);
  for (size_t i : {2, 3, 4}) EXPECT_EQ(got[i], at4[i]) << i;
  auto bad = sb;
  bad[1].data.resize(4);
  EXPECT_THROW(b->import_snapshot(4, bad), Error);
  bad = sb;
  bad.pop_back();
  EXPECT_THROW(b->import_snapshot(4, bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Storage, StateOn, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("Gpu") : std::string("Host"); });

namespace {

/// A tiny random llama (2 layers, d 32, 4 query / 2 KV heads of 8, FFN 64, vocab 64).
std::string tiny_llama() {
  static test::TempDir dir;
  static std::string path;
  if (!path.empty()) return path;
  const test::GgufDoc d = test::tiny_llama_doc("tiny-llama-state", 256, 64, 3, 0.3f);
  path = dir / "tiny_llama.gguf";
  test::write_file(path, d.bytes());
  return path;
}

/// Restoring a snapshot after decoding further, then decoding, gives the logits of a fresh
/// sequence fed the same tokens in the same forwards: bit-identical on each backend.
void expect_restore_matches_recompute(const std::string& path, BackendKind backend) {
  auto src = ModelSource::open(path);
  ModelOptions o;
  o.backend = backend;
  o.context_length = 128;
  auto m = create_model(*src, o);
  const uint32_t V = m->config().vocab;
  std::vector<int32_t> ids(16);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 37 + 11) % V);
  const std::span<const int32_t> all(ids);
  // Forwards of at most 8 tokens (the decode kernel variants only: few pipelines to compile).
  auto prefix = all.subspan(0, 7), detour = all.subspan(7, 5), next = all.subspan(12, 1), more = all.subspan(13, 3);

  auto seq = m->new_sequence();
  m->forward(*seq, prefix, nullptr);
  auto snap = seq->snapshot();
  std::vector<float> scratch;
  m->forward(*seq, detour, &scratch);      // a prefill past the snapshot ...
  for (int32_t t : detour.subspan(0, 4)) m->forward(*seq, std::span<const int32_t>(&t, 1), &scratch);  // ... and decodes
  seq->restore(*snap);
  std::vector<float> got1, got2;
  m->forward(*seq, next, &got1);
  m->forward(*seq, more, &got2);

  auto fresh = m->new_sequence();
  std::vector<float> want1, want2;
  m->forward(*fresh, prefix, nullptr);
  m->forward(*fresh, next, &want1);
  m->forward(*fresh, more, &want2);
  ASSERT_EQ(got1.size(), V);
  EXPECT_EQ(got1, want1) << path << " on " << m->backend_name();
  EXPECT_EQ(got2, want2) << path << " on " << m->backend_name();
  EXPECT_NE(got1, scratch);  // the detour's logits differ (the comparison can fail)
}

}  // namespace

// One test per model and backend: each stays short even when lavapipe compiles every pipeline cold.
class RestoreMatchesRecompute : public ::testing::TestWithParam<std::tuple<const char*, bool>> {};

TEST_P(RestoreMatchesRecompute, BitIdentical) {
  const std::string m = std::get<0>(GetParam());
  expect_restore_matches_recompute(m == "llama" ? tiny_llama() : fixture(m == "lfm2" ? "lfm2_tiny/hf" : "qwen35_tiny"),
                                   std::get<1>(GetParam()) ? BackendKind::WebGPU : BackendKind::CPU);
}

INSTANTIATE_TEST_SUITE_P(StateModels, RestoreMatchesRecompute,
                         ::testing::Combine(::testing::Values("llama", "lfm2", "qwen35"), ::testing::Bool()),
                         [](const auto& i) {
                           return std::string(std::get<0>(i.param)) + (std::get<1>(i.param) ? "_webgpu" : "_cpu");
                         });

TEST(StateModels, ModelsBuildTheirLayerStates) {
  // Which state each layer of the fixtures holds, and that new_sequence() names them in layer order.
  auto kinds = [](const std::string& path) {
    auto src = ModelSource::open(path);
    ModelOptions o;
    o.backend = BackendKind::CPU;
    o.context_length = 32;
    auto seq = create_model(*src, o)->new_sequence();
    std::string k;
    for (const auto& s : seq->states()) k += std::string(k.empty() ? "" : ",") + s->kind();
    return k;
  };
  EXPECT_EQ(kinds(tiny_llama()), "kv,kv");
  const std::string lfm2 = kinds(fixture("lfm2_tiny/hf")), qwen = kinds(fixture("qwen35_tiny"));
  EXPECT_NE(lfm2.find("conv"), std::string::npos);
  EXPECT_NE(lfm2.find("kv"), std::string::npos);
  EXPECT_NE(qwen.find("delta"), std::string::npos);
  EXPECT_NE(qwen.find("kv"), std::string::npos);
}
