// Tokenizer::from_hf_json: HuggingFace tokenizer.json (+ tokenizer_config.json) -> TokenizerSpec.
// Format: HF tokenizers src/tokenizer/serialization.rs and the serde forms of
// src/normalizers, src/pre_tokenizers, src/models/bpe/serialization.rs.
// Supported: model BPE without byte_fallback/subword prefixes, byte-level (ByteLevel
// pre-tokenizer or decoder); normalizer null/NFC/Sequence; pre-tokenizer ByteLevel, Split with
// behavior Isolated, Digits, Sequence of those. Anything else is rejected with wgllm::Error so a
// tokenizer is never silently wrong.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace wgllm {

namespace {

using nlohmann::json;

struct Ctx {
  std::string file;
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("tokenizer: " + file + ": " + what);
  }
};

json read_json(const std::filesystem::path& p, const Ctx& c) {
  std::ifstream f(p, std::ios::binary);
  if (!f) c.fail("cannot open");
  try {
    return json::parse(f);
  } catch (const json::exception& e) {
    c.fail(std::string("invalid JSON: ") + e.what());
  }
}

// A literal for PCRE2: escape every ASCII non-alphanumeric character.
std::string regex_escape(const std::string& s) {
  std::string r;
  for (char ch : s) {
    unsigned char u = static_cast<unsigned char>(ch);
    if (u < 0x80 && !std::isalnum(u)) r += '\\';
    r += ch;
  }
  return r;
}

void add_normalizer(const json& n, TokenizerSpec& s, const Ctx& c) {
  if (n.is_null()) return;
  const std::string type = n.value("type", "");
  if (type == "NFC") {
    s.nfc = true;
  } else if (type == "Sequence") {
    for (const json& x : n.at("normalizers")) add_normalizer(x, s, c);
  } else {
    c.fail("unsupported normalizer '" + type + "' (supported: NFC, Sequence)");
  }
}

void add_pre_tokenizer(const json& p, TokenizerSpec& s, bool& byte_level, const Ctx& c) {
  if (p.is_null()) return;
  const std::string type = p.value("type", "");
  if (type == "Sequence") {
    for (const json& x : p.at("pretokenizers")) add_pre_tokenizer(x, s, byte_level, c);
  } else if (type == "ByteLevel") {
    if (p.value("add_prefix_space", false)) c.fail("ByteLevel add_prefix_space=true is unsupported");
    byte_level = true;
    if (p.value("use_regex", true)) s.pretokenizer_regexes.push_back(tok::kGpt2Regex);
  } else if (type == "Split") {
    const json& pat = p.at("pattern");
    std::string re;
    if (pat.contains("Regex")) {
      re = pat.at("Regex").get<std::string>();
    } else if (pat.contains("String")) {
      re = regex_escape(pat.at("String").get<std::string>());
    } else {
      c.fail("Split pattern is neither Regex nor String");
    }
    if (p.value("behavior", "") != "Isolated" || p.value("invert", false)) {
      c.fail("Split supports only behavior Isolated, invert false");
    }
    s.pretokenizer_regexes.push_back(re);
  } else if (type == "Digits") {
    s.pretokenizer_regexes.push_back(p.value("individual_digits", false) ? R"(\p{N})"
                                                                        : R"(\p{N}+)");
  } else {
    c.fail("unsupported pre_tokenizer '" + type +
           "' (supported: ByteLevel, Split, Digits, Sequence)");
  }
}

// tokenizer_config.json tokens are "text", {"content": "text", ...} or null.
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return {};
  const json& v = cfg.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return {};
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_json(const std::string& path) {
  Ctx c{path};
  json j = read_json(path, c);
  try {
    TokenizerSpec s;
    const json& m = j.at("model");
    if (m.value("type", "BPE") != "BPE") c.fail("unsupported model type '" + m.value("type", "") + "'");
    if (m.value("byte_fallback", false)) c.fail("BPE byte_fallback is unsupported");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty()) {
        c.fail(std::string("BPE ") + k + " is unsupported");
      }
    }
    s.ignore_merges = m.value("ignore_merges", false);

    // Ids: model vocab, then added tokens (which may reuse or extend the id space).
    // An id must be a JSON integer in [0, kMaxVocab) (nlohmann's get<size_t> would wrap -1 and
    // cast 1e300 with undefined behaviour; a huge id would allocate the whole id space).
    constexpr uint64_t kMaxVocab = uint64_t(1) << 24;
    auto token_id = [&c](const json& v, const std::string& what) -> size_t {
      if (!v.is_number_integer() || (v.is_number_unsigned() ? v.get<uint64_t>() >= kMaxVocab
                                                            : v.get<int64_t>() < 0 || uint64_t(v.get<int64_t>()) >= kMaxVocab))
        c.fail(what + ": id " + v.dump() + " is not an integer in [0, " + std::to_string(kMaxVocab) + ")");
      return v.get<size_t>();
    };
    size_t n = 0;
    for (const auto& [piece, id] : m.at("vocab").items()) n = std::max(n, token_id(id, "vocab '" + piece + "'") + 1);
    const json added = j.value("added_tokens", json::array());
    for (const json& a : added) n = std::max(n, token_id(a.at("id"), "added token") + 1);
    s.pieces.resize(n);
    s.types.assign(n, TokenType::Normal);
    for (const auto& [piece, id] : m.at("vocab").items()) s.pieces[id.get<size_t>()] = piece;
    for (const json& a : added) {
      size_t id = token_id(a.at("id"), "added token");
      if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false)) {
        c.fail("added token " + std::to_string(id) + ": lstrip/rstrip/single_word unsupported");
      }
      // "normalized": true tokens are matched on the raw text here; identical for NFC and the
      // ASCII markup tokens real models use.
      s.pieces[id] = a.at("content").get<std::string>();
      s.types[id] = a.value("special", false) ? TokenType::Control : TokenType::UserDefined;
    }
    for (const json& mg : m.at("merges")) {
      if (mg.is_array()) {
        s.merges.emplace_back(mg.at(0).get<std::string>(), mg.at(1).get<std::string>());
      } else {
        const std::string str = mg.get<std::string>();
        size_t sp = str.find(' ', 1);
        if (sp == std::string::npos) c.fail("merge '" + str + "' is not 'left right'");
        s.merges.emplace_back(str.substr(0, sp), str.substr(sp + 1));
      }
    }
    add_normalizer(j.value("normalizer", json()), s, c);
    bool byte_level = false;
    add_pre_tokenizer(j.value("pre_tokenizer", json()), s, byte_level, c);
    const json dec = j.value("decoder", json());
    if (!dec.is_null() && dec.value("type", "") == "ByteLevel") byte_level = true;
    if (!byte_level) c.fail("only byte-level BPE tokenizer.json files are supported");
    s.kind = TokenizerKind::ByteLevelBpe;
    s.add_space_prefix = false;

    auto id_of = [&](const std::string& text) -> int32_t {
      for (size_t i = 0; i < s.pieces.size(); ++i)
        if (s.pieces[i] == text) return int32_t(i);
      return -1;
    };
    if (m.contains("unk_token") && m["unk_token"].is_string()) s.unk = id_of(m["unk_token"]);

    // BOS from a TemplateProcessing post-processor that starts with a special token.
    const json pp = j.value("post_processor", json());
    if (!pp.is_null() && pp.value("type", "") == "TemplateProcessing" && pp.contains("single") &&
        !pp["single"].empty() && pp["single"][0].contains("SpecialToken")) {
      s.bos = id_of(pp["single"][0]["SpecialToken"].value("id", ""));
      s.add_bos = s.bos >= 0;
    }
    auto cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(cfg_path)) {
      Ctx cc{cfg_path.string()};
      json cfg = read_json(cfg_path, cc);
      if (auto b = config_token(cfg, "bos_token"); !b.empty()) s.bos = id_of(b);
      if (auto e = config_token(cfg, "eos_token"); !e.empty()) s.eos = id_of(e);
      if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
        s.add_bos = cfg["add_bos_token"].get<bool>();
      }
    }
    return from_spec(std::move(s));
  } catch (const json::exception& e) {
    c.fail(std::string("malformed field: ") + e.what());
  } catch (const Error& e) {
    if (std::string_view(e.what()).find(path) != std::string_view::npos) throw;
    c.fail(e.what());
  }
}

}  // namespace wgllm
