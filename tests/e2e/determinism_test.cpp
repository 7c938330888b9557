// Determinism across processes (issue 14 item 6): the same model, input, switches and adapter give
// the same output bits in two separate processes (determinism_probe: greedy tokens and a SHA-256 of
// every logits vector), with the default switches and with block-sparse attention past a small
// threshold (the sparse path: block means, top-k selection, gathered attention), on the tiny LFM2
// and Qwen3.5 fixtures (attention layers with the sparse path, recurrent layers). The sparse run must
// differ from the dense one (else the sparse path was not taken and the check proves nothing).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "parity_util.h"

using namespace wgllm::test;

namespace {

std::string probe(const std::string& args) {
  const std::string cmd = std::string(WGLLM_PROBE) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "popen failed";
  std::string out;
  std::array<char, 512> buf{};
  while (fgets(buf.data(), int(buf.size()), p)) out += buf.data();
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << cmd << ": " << out;
  return out;
}

class Determinism : public ::testing::TestWithParam<std::string> {};

TEST_P(Determinism, SameBitsInTwoProcessesDenseAndSparse) {
  const std::string model = GetParam() == "lfm2" ? fixture("lfm2_tiny/lfm2_tiny.f32.gguf") : fixture("qwen35_tiny");
  const std::string dense1 = probe(model), dense2 = probe(model);
  ASSERT_NE(dense1.find("logits_sha256="), std::string::npos) << dense1;
  EXPECT_EQ(dense1, dense2) << "dense: two processes gave different bits";
  const std::string sparse1 = probe(model + " --sparse-attn 16"), sparse2 = probe(model + " --sparse-attn 16");
  ASSERT_NE(sparse1.find("logits_sha256="), std::string::npos) << sparse1;
  EXPECT_EQ(sparse1, sparse2) << "sparse: two processes gave different bits";
  EXPECT_NE(sparse1, dense1) << "the sparse path was not taken (same bits as dense)";
  std::printf("%s dense:  %s%s sparse: %s", GetParam().c_str(), dense1.c_str(), GetParam().c_str(), sparse1.c_str());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Determinism, ::testing::Values("lfm2", "qwen35"), [](const auto& i) { return i.param; });

}  // namespace
