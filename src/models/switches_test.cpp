// The switch table (kernels/switches.def) and its decision records (switch_records.inc): the
// generated docs/FLAGS.md matches the file in the tree, every switch has a record and every record a
// switch, the bit-exact claims agree, the accessors read the struct defaults, the CLI spellings are
// unique, a non-default value is reported, and the CLI spelling of every switch sets it
// through apply_switch_args (the browser engine's switches).
#include "models/switches.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"

using namespace wgllm;

TEST(Switches, FlagsDocInSync) {
  std::ifstream in(std::string(WGLLM_SOURCE_DIR) + "/docs/FLAGS.md", std::ios::binary);
  ASSERT_TRUE(in.is_open());
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(file == flags_markdown())
      << "docs/FLAGS.md is out of date with src/kernels/switches.def / src/models/switch_records.inc: "
         "regenerate it with `build/wgllm flags --markdown > docs/FLAGS.md`";
}

TEST(Switches, EveryDocumentedSwitchAppearsInTheDoc) {
  const std::string md = flags_markdown();
  for (const SwitchInfo& s : switches()) EXPECT_NE(md.find("`" + s.qualified() + "`"), std::string::npos) << s.field;
}

TEST(Switches, RecordsMatchTheTable) {
  std::set<std::string> keys, used;
  for (const SwitchRecord& r : switch_records()) EXPECT_TRUE(keys.insert(r.key).second) << "duplicate record " << r.key;
  for (const SwitchInfo& s : switches()) {
    EXPECT_TRUE(keys.count(s.record)) << s.field << ": no record '" << s.record << "'";
    used.insert(s.record);
  }
  for (const std::string& k : keys) EXPECT_TRUE(used.count(k)) << "record '" << k << "' names no switch";
  // The prose's bit-exact claim starts with the table's word.
  for (const SwitchRecord& r : switch_records())
    for (const SwitchInfo& s : switches())
      if (r.key == std::string(s.record)) {
        const std::string want = s.bit_exact ? "yes" : "no";
        EXPECT_EQ(std::string(r.bit_exact).substr(0, want.size()), want) << s.field << " (record " << r.key << ")";
      }
}

TEST(Switches, AccessorsReadTheDefaultsAndWrite) {
  const ModelOptions d;
  for (const SwitchInfo& s : switches()) {
    const bool has = s.scope == SwitchScope::Kernel || s.scope == SwitchScope::Model;
    EXPECT_EQ(s.get != nullptr, has) << s.field;
    if (!has) continue;
    EXPECT_EQ(s.get(d), s.def) << s.field;
    ModelOptions o;
    const int64_t v = s.def == s.lo ? s.hi : s.lo;
    s.set(o, v);
    EXPECT_EQ(s.get(o), v) << s.field;
    const auto nd = non_default_switches(o);
    ASSERT_EQ(nd.size(), s.product ? 1u : 0u) << s.field;
    if (s.product && *s.flag) {
      EXPECT_EQ(nd[0], s.spelled(v)) << s.field;
    }
  }
  EXPECT_TRUE(non_default_switches(d).empty());
}

TEST(Switches, FlagsAreUniqueAndOneBehaviourEach) {
  std::set<std::string> flags;
  for (const SwitchInfo& s : switches()) {
    if (!*s.flag) continue;
    EXPECT_TRUE(flags.insert(s.flag).second) << "--" << s.flag << " twice";
    EXPECT_TRUE(flags.insert(std::string("no-") + s.flag).second) << "--no-" << s.flag << " clashes";
  }
  // The two switches that used to govern two behaviours each are gone.
  EXPECT_FALSE(flags.count("attn-split"));
  EXPECT_TRUE(flags.count("attn-decode-split") && flags.count("attn-prefill-split"));
  EXPECT_TRUE(flags.count("fuse-qkv") && flags.count("fuse-gdn-in"));
}

// apply_switch_args (the browser engine's CreateEngine switches) takes every kernel- and
// model-level switch in the native CLI's spelling: a non-default value of each, spelled as the CLI
// spells it, sets exactly that field; FIELD=VALUE tokens too; bad input throws, naming the token.
TEST(Switches, ApplyArgsTakesTheCliSpellingOfEverySwitch) {
  int checked = 0;
  for (const SwitchInfo& s : switches()) {
    if (!s.set || !*s.flag) continue;
    // A value other than the default that the CLI accepts.
    int64_t v = s.kind == SwitchKind::Bool ? !s.def
                : s.kind == SwitchKind::Tri ? (s.def == 1 ? 0 : 1)
                : s.kind == SwitchKind::Pow2 ? std::max<int64_t>(s.lo, 1)
                                             : s.lo;
    if (v == s.def) v = s.kind == SwitchKind::Pow2 ? v * 2 : s.lo + 1;
    ASSERT_NE(v, s.def) << s.field;
    ASSERT_LE(v, s.hi) << s.field;
    ModelOptions o;
    apply_switch_args(o, "  " + s.spelled(v) + "\t");
    EXPECT_EQ(s.get(o), v) << s.spelled(v);
    for (const SwitchInfo& other : switches()) {  // nothing else changed
      if (other.get && &other != &s) {
        EXPECT_EQ(other.get(o), other.get(ModelOptions{})) << s.spelled(v) << " set " << other.field;
      }
    }
    ModelOptions f;
    apply_switch_args(f, std::string(s.field) + "=" + std::to_string(v));
    EXPECT_EQ(s.get(f), v) << s.field;
    ++checked;
  }
  EXPECT_GT(checked, 40);
  ModelOptions o;
  apply_switch_args(o, "--attn-decode-key-lanes 4 --no-fuse-norm fuse_silu=off");
  EXPECT_EQ(o.kernels.attention_decode_key_lanes, 4u);
  EXPECT_FALSE(o.kernels.fuse_norm);
  EXPECT_FALSE(o.kernels.fuse_silu);
  apply_switch_args(o, "--attn-decode-key-lanes=2 --fuse-norm=true --fuse-silu=1 --attn-decode-gqa=0");  // CLI11's --FLAG=VALUE
  EXPECT_EQ(o.kernels.attention_decode_key_lanes, 2u);
  EXPECT_TRUE(o.kernels.fuse_norm);
  EXPECT_TRUE(o.kernels.fuse_silu);
  EXPECT_EQ(o.kernels.attention_decode_gqa, 0);
  // The truth values the CLI takes, in any case; --no-FLAG=false is --FLAG.
  apply_switch_args(o, "--fuse-norm=OFF --no-fuse-silu=false --attn-decode-gqa=Yes");
  EXPECT_FALSE(o.kernels.fuse_norm);
  EXPECT_TRUE(o.kernels.fuse_silu);
  EXPECT_EQ(o.kernels.attention_decode_gqa, 1);
  apply_switch_args(o, "--no-fuse-norm=no --no-fuse-silu=1");
  EXPECT_TRUE(o.kernels.fuse_norm);
  EXPECT_FALSE(o.kernels.fuse_silu);
  apply_switch_args(o, "");  // nothing
  auto fails = [](const std::string& args, const std::string& says) {
    ModelOptions x;
    try {
      apply_switch_args(x, args);
      ADD_FAILURE() << "'" << args << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << args << ": " << e.what();
    }
  };
  fails("--no-such-switch", "--no-such-switch: unknown flag");
  fails("--attn-decode-key-lanes", "wants a value");
  fails("--attn-decode-key-lanes 3", "(0 or a power of two)");
  fails("--attn-decode-key-lanes 16", "outside [1, 8]");
  fails("--attn-decode-key-lanes four", "not an integer");
  fails("--attn-decode-key-lanes on", "not an integer");
  fails("--no-attn-decode-key-lanes", "a numeric switch");
  fails("--no-", "unknown flag");  // (switches without a CLI flag are not reachable by flag)
  fails("--", "unknown flag");
  fails("--fuse-norm=2", "want true/false");
  fails("--fuse-norm=maybe", "want true/false");
  fails("--submit-chunk 4294967295", "outside [0, 4096]");  // the adapter-default sentinel: not a CLI value
  fails("--attn-decode-key-lanes=", "not an integer");
  fails("fuse_norm", "want FIELD=VALUE");
  fails("no_field=1", "no kernel- or model-level switch 'no_field'");
  fails("fuse_norm=maybe", "not an integer, on or off");
  for (const SwitchInfo& s : switches())  // an App/Session/Web switch with a flag is refused, named
    if (!s.set && *s.flag) {
      fails(s.spelled(s.kind == SwitchKind::Bool ? !s.def : s.lo), "not a kernel- or model-level switch");
      break;
    }
}
