// The model registry (model_registry.h): `-m NAME` resolution, its errors, listing, and the real
// scripts/models.json's consistency with what `make setup` installs.
#include "model_registry.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace fs = std::filesystem;
using namespace wgllm::cli;

namespace {

std::string error_of(const std::string& value, const std::string& registry, const std::string& cache) {
  try {
    return "<resolved to " + resolve_model(value, registry, cache) + ">";
  } catch (const wgllm::Error& e) {
    return e.what();
  }
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("wgllm-registry-test-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir / "cache" / "models");
    cache = (dir / "cache").string();
    registry = (dir / "models.json").string();
    write(registry, R"({"models": [
      {"name": "tiny-llama", "default": true, "architecture": "llama", "file": "tiny.gguf", "size": 5,
       "sha256": "00", "parts": [{}, {}]},
      {"name": "qwen2.5-coder-1.5b", "architecture": "qwen2", "file": "qwen.gguf", "size": 7, "sha256": "11",
       "parts": [{}]}]})");
  }
  void TearDown() override { fs::remove_all(dir); }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

  fs::path dir;
  std::string cache, registry;
};

TEST_F(RegistryTest, NameOfAnInstalledModelResolvesToItsPath) {
  write(dir / "cache/models/tiny.gguf", "12345");
  EXPECT_EQ(resolve_model("tiny-llama", registry, cache), cache + "/models/tiny.gguf");
}

TEST_F(RegistryTest, NotInstalledNamesThePullCommand) {
  const std::string e = error_of("qwen2.5-coder-1.5b", registry, cache);
  EXPECT_NE(e.find("model 'qwen2.5-coder-1.5b' is not installed: run `wgllm pull qwen2.5-coder-1.5b`"), std::string::npos) << e;
}

TEST_F(RegistryTest, WrongSizeFileIsNotInstalled) {
  write(dir / "cache/models/qwen.gguf", "123");  // 3 bytes of 7: an interrupted copy
  const std::string e = error_of("qwen2.5-coder-1.5b", registry, cache);
  EXPECT_NE(e.find("has 3 bytes, expected 7"), std::string::npos) << e;
  EXPECT_NE(e.find("wgllm pull qwen2.5-coder-1.5b"), std::string::npos) << e;
}

TEST_F(RegistryTest, UnknownNameSuggestsTheClosest) {
  std::string e = error_of("tiny-lama", registry, cache);
  EXPECT_NE(e.find("'tiny-lama': no such file, directory or model name"), std::string::npos) << e;
  EXPECT_NE(e.find("did you mean 'tiny-llama'?"), std::string::npos) << e;
  e = error_of("qwen", registry, cache);  // far by edit distance, but a part of one name
  EXPECT_NE(e.find("did you mean 'qwen2.5-coder-1.5b'?"), std::string::npos) << e;
  e = error_of("qwen-coder", registry, cache);  // its words in one name
  EXPECT_NE(e.find("did you mean 'qwen2.5-coder-1.5b'?"), std::string::npos) << e;
  e = error_of("mistral-7b", registry, cache);
  EXPECT_EQ(e.find("did you mean"), std::string::npos) << e;
}

TEST_F(RegistryTest, ExistingPathWinsOverName) {
  const fs::path local = dir / "tiny-llama";
  fs::create_directories(local);
  EXPECT_EQ(resolve_model(local.string(), registry, cache), local.string());
  // A path is taken as is without reading the registry (a broken one does not matter).
  EXPECT_EQ(resolve_model(local.string(), (dir / "missing.json").string(), cache), local.string());
  EXPECT_NE(error_of("tiny-llama", (dir / "missing.json").string(), cache).find("cannot open the model registry"),
            std::string::npos);
}

TEST_F(RegistryTest, MalformedRegistriesAreErrors) {
  write(registry, R"({"models": [{"name": "a", "file": "a.gguf", "size": 1, "sha256": "0"},
                                 {"name": "a", "file": "b.gguf", "size": 1, "sha256": "0"}]})");
  EXPECT_THROW(load_registry(registry), wgllm::Error);
  write(registry, R"({"models": [{"name": "a", "file": "a.gguf", "sha256": "0"}]})");
  EXPECT_THROW(load_registry(registry), wgllm::Error);
  write(registry, R"({"models": [{"name": "a", "file": "../a.gguf", "size": 1, "sha256": "0"}]})");
  EXPECT_THROW(load_registry(registry), wgllm::Error);
  write(registry, "{not json");
  EXPECT_THROW(load_registry(registry), wgllm::Error);
}

TEST_F(RegistryTest, ListingShowsStateAndPath) {
  write(dir / "cache/models/tiny.gguf", "12345");
  const auto models = load_registry(registry);
  const nlohmann::json j = models_json(models, cache);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["name"], "tiny-llama");
  EXPECT_EQ(j[0]["installed"], true);
  EXPECT_EQ(j[0]["default"], true);
  EXPECT_EQ(j[0]["parts"], 2);
  EXPECT_EQ(j[0]["path"], cache + "/models/tiny.gguf");
  EXPECT_EQ(j[1]["installed"], false);
  EXPECT_TRUE(j[1]["size_found"].is_null());
  const std::string t = models_table(models, cache);
  EXPECT_NE(t.find("tiny-llama *"), std::string::npos) << t;
  EXPECT_NE(t.find("installed " + cache + "/models/tiny.gguf"), std::string::npos) << t;
  EXPECT_NE(t.find("not installed (`wgllm pull qwen2.5-coder-1.5b`)"), std::string::npos) << t;
}

// The real registry: the default entry is the file `make setup` installs and the CLI loads without -m.
TEST(RealRegistry, DefaultIsTheSetupModelAndEntriesAreComplete) {
  const auto models = load_registry(std::string(WGLLM_SOURCE_DIR) + "/scripts/models.json");
  int defaults = 0;
  for (const auto& m : models) {
    SCOPED_TRACE(m.name);
    EXPECT_EQ(m.sha256.size(), 64u);
    EXPECT_GT(m.size, 0u);
    EXPECT_GT(m.parts, 0u);
    EXPECT_FALSE(m.architecture.empty());
    EXPECT_FALSE(m.license.empty());
    if (m.is_default) {
      ++defaults;
      EXPECT_EQ(m.file, "SmolLM2-135M-Instruct.Q4_1.gguf");
    }
  }
  EXPECT_EQ(defaults, 1);
  std::vector<std::string> names;
  for (const auto& m : models) names.push_back(m.name);
  EXPECT_NE(std::find(names.begin(), names.end(), "qwen2.5-coder-1.5b"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "gemma-3-270m"), names.end());
}

}  // namespace
