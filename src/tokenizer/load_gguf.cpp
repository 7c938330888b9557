// Tokenizer::from_gguf: GGUF tokenizer.* metadata -> TokenizerSpec.
// Keys and defaults follow llama.cpp src/llama-vocab.cpp (llama_vocab::impl::load) and
// gguf-py/gguf/constants.py (Keys.Tokenizer).
#include "core/error.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace wgllm {

namespace {

int32_t id_or(const GgufFile& g, const std::string& key, int32_t def) {
  if (!g.has(key)) return def;
  const GgufValue& v = g.metadata().at(key);
  int64_t x;
  if (const auto* u = std::get_if<uint64_t>(&v.v)) {
    x = int64_t(*u);
  } else if (const auto* i = std::get_if<int64_t>(&v.v)) {
    x = *i;
  } else {
    throw Error("tokenizer: GGUF key " + key + " is not an integer");
  }
  // Outside int32 (e.g. -1 written as the uint32 0xFFFFFFFF): no such token, as an id past the
  // vocabulary is treated below (llama.cpp drops both).
  if (x < -1 || x > INT32_MAX) return -1;
  return int32_t(x);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& g) {
  const std::string where = " (GGUF " + g.path() + ")";
  const std::string& model = g.get_str("tokenizer.ggml.model");
  TokenizerSpec s;
  s.pieces = g.get_str_array("tokenizer.ggml.tokens");
  const size_t n = s.pieces.size();
  if (g.has("tokenizer.ggml.token_type")) {
    const auto& types = g.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != n) {
      throw Error("tokenizer: tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                  " entries for " + std::to_string(n) + " tokens" + where);
    }
    s.types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 0 || types[i] > 6) {
        throw Error("tokenizer: tokenizer.ggml.token_type[" + std::to_string(i) +
                    "] = " + std::to_string(types[i]) + " is not a token type" + where);
      }
      s.types.push_back(static_cast<TokenType>(types[i]));
    }
  }
  bool add_bos_default = false;
  if (model == "gpt2") {
    s.kind = TokenizerKind::ByteLevelBpe;
    const auto& merges = g.get_str_array("tokenizer.ggml.merges");
    s.merges.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const std::string& m = merges[i];
      size_t sp = m.find(' ', 1);  // byte-level tokens never contain a raw space
      if (sp == std::string::npos) {
        throw Error("tokenizer: tokenizer.ggml.merges[" + std::to_string(i) + "] = '" + m +
                    "' is not 'left right'" + where);
      }
      s.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
    }
    const std::string pre = g.get_str_or("tokenizer.ggml.pre", "default");
    s.pretokenizer_regexes = tok::gguf_pre_regexes(pre, &s.ignore_merges, &add_bos_default);
    s.add_space_prefix = false;
    s.bos = id_or(g, "tokenizer.ggml.bos_token_id", -1);
    s.eos = id_or(g, "tokenizer.ggml.eos_token_id", -1);
    s.unk = id_or(g, "tokenizer.ggml.unknown_token_id", -1);
  } else if (model == "llama") {
    s.kind = TokenizerKind::SentencePieceBpe;
    const auto& scores = g.get_float_array("tokenizer.ggml.scores");
    s.scores.assign(scores.begin(), scores.end());
    s.add_space_prefix = g.get_bool_or("tokenizer.ggml.add_space_prefix", true);
    add_bos_default = true;
    s.bos = id_or(g, "tokenizer.ggml.bos_token_id", 1);
    s.eos = id_or(g, "tokenizer.ggml.eos_token_id", 2);
    s.unk = id_or(g, "tokenizer.ggml.unknown_token_id", 0);
  } else {
    throw Error("tokenizer: unsupported tokenizer.ggml.model '" + model +
                "' (supported: gpt2, llama)" + where);
  }
  s.add_bos = g.get_bool_or("tokenizer.ggml.add_bos_token", add_bos_default);
  s.eot = id_or(g, "tokenizer.ggml.eot_token_id", -1);
  s.eom = id_or(g, "tokenizer.ggml.eom_token_id", -1);
  // llama.cpp ignores out-of-range special ids with a warning; drop them the same way.
  for (int32_t* id : {&s.bos, &s.eos, &s.unk, &s.eot, &s.eom}) {
    if (*id >= int32_t(n)) *id = -1;
  }
  try {
    return from_spec(std::move(s));
  } catch (const Error& e) {
    throw Error(e.what() + where);
  }
}

}  // namespace wgllm
