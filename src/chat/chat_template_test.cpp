// Chat templates and the Jinja2-subset interpreter against goldens rendered by Python jinja2 the
// transformers way (tools/fixtures/make_chat_goldens.py -> tests/fixtures/chat/), plus unit tests of the
// API and error reporting.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>

#include "chat/chat_template.h"
#include "core/error.h"
#include "formats/gguf.h"

namespace {

using nlohmann::ordered_json;

const std::string kFixtures = std::string(WGLLM_SOURCE_DIR) + "/tests/fixtures/chat/";

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<ordered_json> load_cases(const char* file) {
  std::vector<ordered_json> out;
  try {
    for (auto& c : ordered_json::parse(read_file(kFixtures + file))) out.push_back(c);
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  return out;
}

std::string test_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// ---------------------------------------------------------------- interpreter snippets
class JinjaGolden : public ::testing::TestWithParam<ordered_json> {};

TEST_P(JinjaGolden, MatchesJinja2) {
  const ordered_json& c = GetParam();
  const std::string src = c["source"];
  SCOPED_TRACE(src);
  if (c.contains("expected")) {
    std::string got;
    ASSERT_NO_THROW(got = wgllm::render_jinja(src, c["context"]));
    EXPECT_EQ(got, c["expected"].get<std::string>());
    return;
  }
  const std::string type = c["error_type"];
  try {
    std::string got = wgllm::render_jinja(src, c["context"]);
    FAIL() << "expected " << type << " (" << c["error"] << "), got output: " << got;
  } catch (const wgllm::Error& e) {
    const std::string what = e.what();
    if (type == "TemplateError") {  // raise_exception
      EXPECT_EQ(what, c["error"].get<std::string>());
    }
    if (type == "TemplateSyntaxError") {
      EXPECT_NE(what.find("syntax error at " + std::to_string(c["error_line"].get<int>()) + ":"), std::string::npos)
          << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(chat_jinja_snippets, JinjaGolden, ::testing::ValuesIn(load_cases("jinja_goldens.json")),
                         [](const auto& info) { return test_name(info.param["name"]); });

// ---------------------------------------------------------------- real chat templates
class ChatGolden : public ::testing::TestWithParam<ordered_json> {};

TEST_P(ChatGolden, MatchesTransformersRendering) {
  const ordered_json& c = GetParam();
  const std::string name = c["template"];
  wgllm::ChatTemplate tmpl(read_file(kFixtures + "templates/" + name + ".jinja"), c["bos_token"], c["eos_token"]);
  // 0: render_ordered(context); 1: apply_ordered(); 2: apply() (sorted-key extra; skipped for tool
  // schemas, whose key order tojson prints).
  auto render = [&](int mode) {
    if (mode == 0) return tmpl.render_ordered(c["context"]);
    const auto& a = c["apply"];
    std::vector<wgllm::ChatMessage> msgs;
    for (const auto& m : a["messages"]) msgs.push_back({m["role"], m["content"]});
    if (mode == 1) return tmpl.apply_ordered(msgs, a["add_generation_prompt"], a["extra"]);
    return tmpl.apply(msgs, a["add_generation_prompt"], nlohmann::json::parse(a["extra"].dump()));
  };
  std::vector<int> modes = {0};
  if (!c["apply"].is_null()) modes.push_back(1);
  if (!c["apply"].is_null() && !c["apply"]["extra"].contains("tools")) modes.push_back(2);
  for (int via_apply : modes) {
    SCOPED_TRACE(via_apply == 0 ? "render_ordered" : (via_apply == 1 ? "apply_ordered" : "apply"));
    if (c.contains("expected")) {
      std::string got;
      ASSERT_NO_THROW(got = render(via_apply));
      EXPECT_EQ(got, c["expected"].get<std::string>());
    } else {
      try {
        std::string got = render(via_apply);
        FAIL() << "expected raise_exception(" << c["error"] << "), got: " << got;
      } catch (const wgllm::Error& e) {
        EXPECT_EQ(std::string(e.what()), c["error"].get<std::string>());
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(chat_templates, ChatGolden, ::testing::ValuesIn(load_cases("chat_goldens.json")),
                         [](const auto& info) {
                           return test_name(info.param["template"].template get<std::string>() + "_" +
                                            info.param["case"].template get<std::string>());
                         });

// ---------------------------------------------------------------- the installed models' own templates
// The fixture templates are the real ones: compared with tokenizer.chat_template of the GGUFs that
// `wgllm pull` installs (skipped when a model is not installed), and every golden of that template
// rendered again from the GGUF's string. gemma-3-270m's GGUF is the base model: no template.
std::string installed_model(const std::string& file) {
  const char* c = std::getenv("WGLLM_CACHE");
  return std::string(c && *c ? c : WGLLM_CACHE_DIR) + "/models/" + file;
}

TEST(chat_templates_real_gguf, Qwen25CoderTemplateIsTheFixtureAndRendersTheGoldens) {
  const std::string path = installed_model("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
  if (!std::ifstream(path)) GTEST_SKIP() << path << " not installed (wgllm pull qwen2.5-coder-1.5b)";
  const auto gguf = wgllm::GgufFile::open(path);
  const std::string src = gguf->get_str("tokenizer.chat_template");
  EXPECT_EQ(src, read_file(kFixtures + "templates/qwen2_5_coder.jinja"));
  wgllm::ChatTemplate tmpl(src, "", "<|im_end|>");
  int n = 0;
  for (const auto& c : load_cases("chat_goldens.json")) {
    if (c["template"] != "qwen2_5_coder" || !c.contains("expected")) continue;
    SCOPED_TRACE(c["case"].get<std::string>());
    EXPECT_EQ(tmpl.render_ordered(c["context"]), c["expected"].get<std::string>());
    ++n;
  }
  EXPECT_GE(n, 15);
}

TEST(chat_templates_real_gguf, Gemma3BaseHasNoTemplate) {
  const std::string path = installed_model("gemma-3-270m-q4_k_m.gguf");
  if (!std::ifstream(path)) GTEST_SKIP() << path << " not installed (wgllm pull gemma-3-270m)";
  const auto gguf = wgllm::GgufFile::open(path);
  EXPECT_EQ(gguf->get_str("general.architecture"), "gemma3");
  EXPECT_FALSE(gguf->has("tokenizer.chat_template"));
}

// ---------------------------------------------------------------- API and errors
std::string error_of(const std::string& src, const nlohmann::json& ctx = nlohmann::json::object()) {
  try {
    wgllm::render_jinja(src, ctx);
  } catch (const wgllm::Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(chat_template_errors, SyntaxErrorsCarryLineAndColumn) {
  EXPECT_NE(error_of("ok\n{{ 1 + }}").find("syntax error at 2:8"), std::string::npos) << error_of("ok\n{{ 1 + }}");
  EXPECT_NE(error_of("a\nb\n  {% frobnicate %}").find("at 3:6"), std::string::npos)
      << error_of("a\nb\n  {% frobnicate %}");
  EXPECT_NE(error_of("{% for x in y %}\n{{ x }}").find("expected 'endfor' or 'else'"), std::string::npos);
  EXPECT_NE(error_of("x {# open").find("1:3: missing end of comment tag"), std::string::npos);
  EXPECT_NE(error_of("{{ (1 }}").find("unexpected '}'"), std::string::npos) << error_of("{{ (1 }}");
  EXPECT_THROW(wgllm::ChatTemplate("{% if %}"), wgllm::Error);
}

TEST(chat_template_errors, RuntimeErrorsNameTheLine) {
  std::string e = error_of("line1\n  {{ missing.attr }}");
  EXPECT_NE(e.find("chat template error at 2:"), std::string::npos) << e;
  EXPECT_NE(e.find("'missing' is undefined"), std::string::npos) << e;
}

TEST(chat_template_errors, RaiseExceptionMessageIsVerbatim) {
  EXPECT_EQ(error_of("{% for m in messages %}{{ raise_exception('bad role: ' ~ m) }}{% endfor %}",
                     {{"messages", {"x"}}}),
            "bad role: x");
}

TEST(chat_template_errors, RecursionIsBounded) {
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("recursion"), std::string::npos);
}

// Resource limits (jinja.h): templates come from model files, so no template may hang the engine,
// exhaust memory or overflow the stack; each case must end with a clear wgllm::Error.
TEST(chat_template_limits, RunawayLoopsHitTheStepLimit) {
  auto t0 = std::chrono::steady_clock::now();
  std::string e = error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_NE(e.find("render step limit"), std::string::npos) << e;
  // A string doubled in a loop: bytes count as steps, so it stops long before exhausting memory.
  e = error_of("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
               "{{ ns.s|length }}");
  EXPECT_NE(e.find("render step limit"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

TEST(chat_template_limits, LongRealConversationsFitTheStepLimit) {
  std::vector<wgllm::ChatMessage> msgs;
  for (int i = 0; i < 4000; ++i) msgs.push_back({i % 2 ? "assistant" : "user", std::string(200, char('a' + i % 26))});
  for (const char* name : {"qwen3", "llama3_1", "smollm2", "gemma3", "deepseek_v3"}) {
    wgllm::ChatTemplate t(read_file(kFixtures + "templates/" + name + ".jinja"), "<s>", "</s>");
    EXPECT_GT(t.apply(msgs, true).size(), 4000u * 200u) << name;
  }
}

TEST(chat_template_limits, HugeRepetitionIsRefused) {
  EXPECT_NE(error_of("{{ 'abc' * 1000000000000 }}").find("repetition too large"), std::string::npos);
  EXPECT_NE(error_of("{{ [1, 2] * 1000000000000 }}").find("repetition too large"), std::string::npos);
}

TEST(chat_template_limits, IntegerOverflowIsAnError) {
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 3037000500 * 3037000500 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ -9223372036854775807 - 2 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 2 ** 64 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 2 ** 1000000000000000000 }}").find("integer overflow"), std::string::npos);  // no 1e18-step loop
  EXPECT_EQ(wgllm::render_jinja("{{ 2 ** 62 }} {{ (-2) ** 63 }} {{ 7 // -1 }} {{ 7 % -1 }} {{ 3 ** 0 }}",
                                nlohmann::json::object()),
            "4611686018427387904 -9223372036854775808 -7 0 1");
}

TEST(chat_template_limits, FiltersAndTestsAtTheIntegerEdges) {
  const std::string min = "(-9223372036854775807 - 1)";
  EXPECT_NE(error_of("{{ " + min + "|abs }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ [9223372036854775807, 1]|sum }}").find("integer overflow"), std::string::npos);
  // round(-n) of an int rounds half to even at 10^n: up past INT64_MAX is an error (fuzz, 2026-12-07)
  EXPECT_NE(error_of("{{ 9223372036854775807|round(-1) }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ " + min + "|round(-1) }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ 'x'|center(1000000000000) }}").find("center width too large"), std::string::npos);
  auto r = [](const std::string& src) { return wgllm::render_jinja(src, nlohmann::json::object()); };
  EXPECT_EQ(r("{{ 1e300|int }} {{ '1e300'|int(7) }} {{ 2.5|int }}"), "0 7 2");
  EXPECT_EQ(r("{{ 9223372036854775804|round(-1) }} {{ 25|round(-1) }} {{ 35|round(-1) }} {{ -25|round(-1) }}"),
            "9223372036854775800 20 40 -20");
  EXPECT_EQ(r("{{ " + min + " is divisibleby(-1) }}"), "True");
  EXPECT_EQ(r("{{ range(9223372036854775800, 9223372036854775807, 5)|list }}"),
            "[9223372036854775800, 9223372036854775805]");
  EXPECT_EQ(r("[{{ 'a\nb'|indent(-5) }}]"), "[a\nb]");
  EXPECT_EQ(r("{{ [1]|tojson(indent=-3) }}"), "[\n1\n]");
}

TEST(chat_template_limits, DeepNestingIsAnErrorNotAStackOverflow) {
  std::string deep_parens = std::string(100000, '(') + "1" + std::string(100000, ')');
  EXPECT_NE(error_of("{{ " + deep_parens + " }}").find("nesting too deep"), std::string::npos);
  std::string deep_ifs;
  for (int i = 0; i < 5000; ++i) deep_ifs += "{% if true %}";
  EXPECT_NE(error_of(deep_ifs).find("nesting too deep"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(100000, '-') + "1 }}").find("nesting too deep"), std::string::npos);
  // Operator chains parse in a loop (any length) but evaluate recursively: bounded at render time,
  // and the 200000-node tree is released without recursion.
  std::string chain = "1";
  for (int i = 0; i < 100000; ++i) chain += "+1";
  EXPECT_NE(error_of("{{ " + chain + " }}").find("nesting too deep"), std::string::npos);
  std::string filters = "'x'" ;
  for (int i = 0; i < 100000; ++i) filters += "|trim";
  EXPECT_NE(error_of("{{ " + filters + " }}").find("nesting too deep"), std::string::npos);
  // Shallow enough: renders.
  std::string ok = "1";
  for (int i = 0; i < 200; ++i) ok += "+1";
  EXPECT_EQ(wgllm::render_jinja("{{ " + ok + " }}", nlohmann::json::object()), "201");
}

TEST(chat_template_api, ApplyMatchesDocumentedContext) {
  wgllm::ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{{ add_generation_prompt }}|{{ tools }}|{{ documents }}|{{ eos_token is defined }}|{{ extra }}",
      "<s>");
  EXPECT_EQ(t.apply({{"system", "S"}, {"user", "U"}}, true, {{"extra", 42}}),
            "<s>[system:S][user:U]True|None|None|False|42");
  EXPECT_EQ(t.bos_token(), "<s>");
}

TEST(chat_template_api, RenderIsReusableAndKeepsJsonKeyOrder) {
  wgllm::ChatTemplate t("{{ d | tojson }}");
  EXPECT_EQ(t.render({{"d", {{"b", 1}, {"a", 2}}}}), "{\"a\": 2, \"b\": 1}");  // nlohmann::json sorts keys
  ordered_json ctx = ordered_json::object();
  ctx["d"] = ordered_json::object();
  ctx["d"]["b"] = 1;
  ctx["d"]["a"] = 2;
  EXPECT_EQ(t.render_ordered(ctx), "{\"b\": 1, \"a\": 2}");
  EXPECT_EQ(t.render_ordered(ctx), "{\"b\": 1, \"a\": 2}");
}

TEST(chat_template_api, StrftimeNow) {
  std::string y = wgllm::render_jinja("{{ strftime_now('%Y-%m-%d') }}", nlohmann::json::object());
  EXPECT_TRUE(std::regex_match(y, std::regex(R"(\d{4}-\d{2}-\d{2})"))) << y;
}

TEST(chat_template_api, SmolLM2DefaultSystemPrompt) {
  wgllm::ChatTemplate t(read_file(kFixtures + "templates/smollm2.jinja"), "<|im_start|>", "<|im_end|>");
  EXPECT_EQ(t.apply({{"user", "Hi"}}, true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
