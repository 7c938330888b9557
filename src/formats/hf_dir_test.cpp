// HfDir + TensorStore tests on tiny Hugging Face directories built in a temp folder.
#include "formats/hf_dir.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/st_test_writer.h"
#include "formats/tensor_store.h"
#include "formats/test_util.h"

using namespace wgllm;
using test::StTensor;

namespace {

const char* kConfig = R"({"architectures":["Qwen3ForCausalLM"],"hidden_size":4,"num_hidden_layers":1,
  "num_attention_heads":2,"vocab_size":3,"rms_norm_eps":1e-6})";

std::vector<uint8_t> shard1() {
  return test::st_file(
      {StTensor{"model.embed_tokens.weight", "F32", {3, 4}, test::bytes_of<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})},
       StTensor{"model.norm.weight", "BF16", {4}, test::bytes_of<uint16_t>({0x3f80, 0x3f80, 0x4000, 0x4000})}},
      {{"format", "pt"}});
}
std::vector<uint8_t> shard2() {
  return test::st_file(
      {StTensor{"lm_head.weight", "F16", {3, 4}, test::bytes_of<uint16_t>(std::vector<uint16_t>(12, 0x3800))},
       StTensor{"model.rotary.inv_freq", "I64", {2}, test::bytes_of<int64_t>({1, 2})},
       StTensor{"model.flags", "U8", {2}, {1, 0}}});
}

/// config.json, tokenizer.json, generation_config.json, two shards and an index.
void make_sharded(const test::TempDir& d) {
  test::write_file(d / "config.json", std::string(kConfig));
  test::write_file(d / "tokenizer.json", std::string(R"({"model":{"type":"BPE"}})"));
  test::write_file(d / "generation_config.json", std::string(R"({"eos_token_id":[1,2]})"));
  test::write_file(d / "model-00001-of-00002.safetensors", shard1());
  test::write_file(d / "model-00002-of-00002.safetensors", shard2());
  nlohmann::json idx = {{"metadata", {{"total_size", 100}}},
                        {"weight_map",
                         {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                          {"model.norm.weight", "model-00001-of-00002.safetensors"},
                          {"lm_head.weight", "model-00002-of-00002.safetensors"},
                          {"model.rotary.inv_freq", "model-00002-of-00002.safetensors"},
                          {"model.flags", "model-00002-of-00002.safetensors"}}}};
  test::write_file(d / "model.safetensors.index.json", idx.dump());
}

void expect_open_error(const std::string& dir, const std::string& want) {
  try {
    HfDir::open(dir);
    ADD_FAILURE() << "opened without error, wanted: " << want;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(HfDir, ShardedCheckpoint) {
  test::TempDir d;
  make_sharded(d);
  auto h = HfDir::open(d.path.string());
  EXPECT_EQ(h->config()["hidden_size"], 4);
  EXPECT_EQ(h->config()["architectures"][0], "Qwen3ForCausalLM");
  ASSERT_TRUE(h->generation_config().has_value());
  EXPECT_EQ((*h->generation_config())["eos_token_id"][1], 2);
  ASSERT_TRUE(h->tokenizer_json_path().has_value());
  EXPECT_EQ(*h->tokenizer_json_path(), d / "tokenizer.json");
  EXPECT_FALSE(h->tokenizer_config_path().has_value());
  EXPECT_EQ(h->shards().size(), 2u);
  ASSERT_EQ(h->tensors().size(), 5u);
  EXPECT_EQ(h->tensors()[0]->name, "lm_head.weight");  // sorted across shards
  const auto& emb = h->tensor("model.embed_tokens.weight");
  EXPECT_EQ(emb.shape, (std::vector<uint64_t>{4, 3}));
  EXPECT_EQ(emb.hf_shape, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(h->find("nope"), nullptr);
  EXPECT_THROW(h->tensor("nope"), Error);

  TensorStore s(*h);
  EXPECT_EQ(s.names().size(), 5u);
  EXPECT_TRUE(s.has("lm_head.weight"));
  const TensorRef e = s.get("model.embed_tokens.weight");
  EXPECT_EQ(e.shape, (std::vector<uint64_t>{4, 3}));
  EXPECT_EQ(dequantize_tensor(e)[11], 11.0f);
  EXPECT_EQ(dequantize_tensor(s.get("model.norm.weight"))[2], 2.0f);
  EXPECT_EQ(dequantize_tensor(s.get("lm_head.weight"))[7], 0.5f);
  // I64 maps to a DType but cannot be dequantized; U8 has no DType: get() names tensor + dtype
  EXPECT_THROW(dequantize_tensor(s.get("model.rotary.inv_freq")), Error);
  try {
    s.get("model.flags");
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("'model.flags'"), std::string::npos);
    EXPECT_NE(std::string(err.what()).find("U8"), std::string::npos);
  }
  EXPECT_THROW(s.get("nope"), Error);
}

TEST(HfDir, SingleFileWinsOverIndex) {
  test::TempDir d;
  make_sharded(d);
  test::write_file(d / "model.safetensors", shard1());
  test::write_file(d / "tokenizer_config.json", std::string("{}"));
  auto h = HfDir::open(d.path.string());
  EXPECT_EQ(h->shards().size(), 1u);
  EXPECT_EQ(h->tensors().size(), 2u);
  EXPECT_TRUE(h->tokenizer_config_path().has_value());
}

TEST(HfDir, Errors) {
  {
    test::TempDir d;
    expect_open_error(d / "nonexistent", "is not a directory");
    expect_open_error(d.path.string(), "missing config.json");
    test::write_file(d / "config.json", std::string("{not json"));
    expect_open_error(d.path.string(), "config.json: invalid JSON");
    test::write_file(d / "config.json", std::string("[1]"));
    expect_open_error(d.path.string(), "not a JSON object");
    test::write_file(d / "config.json", std::string(kConfig));
    expect_open_error(d.path.string(), "no model.safetensors or model.safetensors.index.json");
    test::write_file(d / "model.safetensors", std::string("garbage!"));
    expect_open_error(d.path.string(), "model.safetensors");
  }
  auto with_index = [](const nlohmann::json& wm, const std::string& want) {
    test::TempDir d;
    make_sharded(d);
    test::write_file(d / "model.safetensors.index.json", nlohmann::json{{"weight_map", wm}}.dump());
    expect_open_error(d.path.string(), want);
  };
  with_index({{"a", "missing.safetensors"}}, "missing weight file missing.safetensors");
  with_index({{"a", "../escape.safetensors"}}, "not a plain file name");
  with_index({{"a", 5}}, "is not a string");
  with_index(nlohmann::json::object(), "empty weight_map");
  with_index({{"lm_head.weight", "model-00001-of-00002.safetensors"},
              {"x", "model-00002-of-00002.safetensors"}},
             "'lm_head.weight' is mapped to model-00001-of-00002.safetensors");
  {
    test::TempDir d;
    make_sharded(d);
    test::write_file(d / "model-00002-of-00002.safetensors", shard1());  // same names twice
    expect_open_error(d.path.string(), "appears in both");
  }
  {
    test::TempDir d;
    make_sharded(d);
    test::write_file(d / "model.safetensors.index.json", std::string("{\"weight_map\": 3}"));
    expect_open_error(d.path.string(), "missing \"weight_map\" object");
  }
  {
    test::TempDir d;
    make_sharded(d);
    test::write_file(d / "generation_config.json", std::string("{"));
    expect_open_error(d.path.string(), "generation_config.json: invalid JSON");
  }
}
