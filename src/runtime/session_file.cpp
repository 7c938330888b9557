// Session files (save/load) and model fingerprints. Layout, all integers little-endian:
//   [0, 8)    magic "WGLLMSES"
//   [8, 12)   u32 format version (kSessionVersion)
//   [12, 16)  u32 reserved (0)
//   [16, 24)  u64 H = header bytes
//   [24, 24+H) header: JSON (UTF-8) — fingerprint, tokens, turns, generation counter, snapshot
//              table, blob table (name, size, FNV-1a 64 of each blob)
//   blobs, back to back in blob-table order (texts; live state "state.<name>": KV rows [0, n_past)
//              of each attention layer and the recurrent states; each kept snapshot's recurrent
//              states "snap.<name>"; names from models/state.h, v1 names translated on load)
//   u64 FNV-1a 64 of every byte before it
// Texts (messages, rendered conversation) travel as a blob, byte-exact (they need not be UTF-8:
// a reply cut by max tokens can end inside a character).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "models/source.h"
#include "runtime/session.h"

namespace wgllm {

namespace {

constexpr char kMagic[8] = {'W', 'G', 'L', 'L', 'M', 'S', 'E', 'S'};
// v2: state blobs are named after the layer states (models/state.h: "layers.N.self_attn.keys",
// ...); v1 files ("blk.N.k", "blk.N.conv", ...) still load, their names translated on reading.
constexpr uint32_t kSessionVersion = 2;

uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
  return fnv1a(reinterpret_cast<const uint8_t*>(s.data()), s.size(), h);
}

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T get(const std::string& in, size_t off) {
  T v;
  std::memcpy(&v, in.data() + off, sizeof v);
  return v;
}

std::string config_fingerprint(const ModelConfig& c) {
  return c.arch + " L=" + std::to_string(c.n_layers) + " d=" + std::to_string(c.d_model) + " h=" + std::to_string(c.n_heads) +
         " kv=" + std::to_string(c.n_kv_heads) + " hd=" + std::to_string(c.head_dim) + " ffn=" + std::to_string(c.ffn_dim) +
         " vocab=" + std::to_string(c.vocab);
}

}  // namespace

std::string model_fingerprint(const ModelSource& src) {
  uint64_t h = fnv1a(std::string());
  for (const std::string& name : src.tensors->names()) {
    h = fnv1a(name + ";", h);
    try {
      if (auto t = src.tensors->find(name)) {
        h = fnv1a(std::to_string(int(t->type)) + ":", h);
        for (uint64_t d : t->shape) h = fnv1a(std::to_string(d) + ",", h);
      }
    } catch (const Error&) {
      h = fnv1a("?", h);  // unusable dtype: the name alone identifies it
    }
  }
  return config_fingerprint(src.config) + " tensors=" + hex(h);
}

void Session::save(const std::string& path) const {
  using nlohmann::json;
  std::vector<StateBlob> blobs;
  json h;
  h["format"] = "wgllm-session";
  h["version"] = kSessionVersion;
  h["fingerprint"] = opt_.fingerprint.empty() ? config_fingerprint(model_.config()) : opt_.fingerprint;
  h["backend"] = model_.backend_name();
  h["context_length"] = seq_->context_length();
  h["n_past"] = seq_->n_past();
  h["tokens"] = tokens_;
  h["cache"] = cache_;
  h["context_full"] = context_full_;
  h["generations"] = generations_;
  // Texts: rendered_ then each message's content, lengths in the header.
  StateBlob text{"text", {}};
  auto add_text = [&](const std::string& s) { text.data.insert(text.data.end(), s.begin(), s.end()); };
  add_text(rendered_);
  h["rendered_bytes"] = rendered_.size();
  json msgs = json::array();
  for (const ChatMessage& m : msgs_) {
    msgs.push_back({{"role", m.role}, {"bytes", m.content.size()}});
    add_text(m.content);
  }
  h["messages"] = msgs;
  blobs.push_back(std::move(text));
  json turns = json::array();
  for (const Turn& t : turns_) turns.push_back({t.msgs_end, t.prompt_tokens, t.prompt_text, t.end_tokens, t.end_text});
  h["turns"] = turns;
  const size_t n_live = blobs.size();
  for (StateBlob& b : seq_->export_state()) blobs.push_back({"state." + b.name, std::move(b.data)});
  h["state_blobs"] = {n_live, blobs.size()};
  // Snapshots whose KV rows are in the file (a prefix of the live cache); others cannot be used.
  json snaps = json::array();
  for (const Snap& s : snaps_) {
    if (s.pinned || !s.state || s.tokens.size() > seq_->n_past() ||
        !std::equal(s.tokens.begin(), s.tokens.end(), cache_.begin()))
      continue;
    const size_t first = blobs.size();
    for (StateBlob& b : seq_->export_snapshot(*s.state)) blobs.push_back({"snap." + b.name, std::move(b.data)});
    snaps.push_back({{"n", s.tokens.size()}, {"blobs", {first, blobs.size()}}, {"last_use", s.last_use}});
  }
  h["snapshots"] = snaps;
  json table = json::array();
  for (const StateBlob& b : blobs)
    table.push_back({{"name", b.name}, {"size", b.data.size()}, {"fnv1a", hex(fnv1a(b.data.data(), b.data.size()))}});
  h["blobs"] = table;

  const std::string header = h.dump();
  std::string head(kMagic, 8);
  put<uint32_t>(head, kSessionVersion);
  put<uint32_t>(head, 0);
  put<uint64_t>(head, header.size());
  head += header;
  uint64_t sum = fnv1a(head);
  // A temporary name of our own next to the target (never a user's FILE.tmp), renamed over it at
  // the end, so a failed save leaves the old file intact.
  std::string tmp;
  {
    std::random_device rd;
    for (int i = 0; i < 100 && (tmp.empty() || std::filesystem::exists(tmp)); ++i) {
      char suffix[24];
      std::snprintf(suffix, sizeof suffix, ".%08x.tmp", unsigned(rd()));
      tmp = path + suffix;
    }
    if (std::filesystem::exists(tmp)) throw Error("save: cannot find a free temporary name next to " + path);
  }
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("save: cannot write " + tmp);
    out.write(head.data(), std::streamsize(head.size()));
    for (const StateBlob& b : blobs) {
      out.write(reinterpret_cast<const char*>(b.data.data()), std::streamsize(b.data.size()));
      sum = fnv1a(b.data.data(), b.data.size(), sum);
    }
    std::string tail;
    put<uint64_t>(tail, sum);
    out.write(tail.data(), 8);
    if (!out.flush()) {
      out.close();
      std::remove(tmp.c_str());
      throw Error("save: write to " + tmp + " failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error("save: cannot rename " + tmp + " to " + path + (std::filesystem::is_directory(path) ? " (a directory)" : ""));
  }
}

// A header number: a non-negative JSON integer of at most `max` (nlohmann's get<size_t>() would
// cast a float such as 1e300 out of range, undefined behaviour, and wrap a negative one).
static uint64_t header_uint(const nlohmann::json& j, const std::string& what, const char* field, uint64_t max) {
  if (!j.is_number_unsigned() || j.get<uint64_t>() > max)
    throw Error(what + "malformed header: " + field + " must be an integer in [0, " + std::to_string(max) + "], got " +
                j.dump());
  return j.get<uint64_t>();
}
// As header_uint() for sizes and offsets held in size_t (32 bits in the browser build).
static size_t header_size(const nlohmann::json& j, const std::string& what, const char* field) {
  return size_t(header_uint(j, what, field, SIZE_MAX));
}

void Session::load(const std::string& path) {
  using nlohmann::json;
  const std::string what = "load " + path + ": ";
  // Only a regular file (or a link to one): a directory opens as a stream but throws
  // std::ios_base::failure on the first read.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw Error(what + "no such file");
  if (std::filesystem::is_directory(st)) throw Error(what + "is a directory, not a session file");
  if (!std::filesystem::is_regular_file(st)) throw Error(what + "not a regular file");
  std::string f;
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(what + "cannot open the file");
    // The magic first: a wrong file (a model, say) is refused without reading it whole.
    f.resize(8);
    in.read(f.data(), 8);
    if (in.gcount() != 8 || std::memcmp(f.data(), kMagic, 8) != 0) throw Error(what + "not a wgllm session file (bad magic)");
    f.append(std::istreambuf_iterator<char>(in), {});
    if (in.bad()) throw Error(what + "read error");
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(what + "cannot read the file: " + e.what());
  }
  if (f.size() < 32) throw Error(what + "truncated file");
  const uint32_t version = get<uint32_t>(f, 8);
  if (version > kSessionVersion)
    throw Error(what + "session format v" + std::to_string(version) + " is newer than this build reads (v" +
                std::to_string(kSessionVersion) + ")");
  if (version == 0) throw Error(what + "invalid format version 0");
  if (fnv1a(reinterpret_cast<const uint8_t*>(f.data()), f.size() - 8) != get<uint64_t>(f, f.size() - 8))
    throw Error(what + "checksum mismatch: the file is corrupt or truncated");
  const uint64_t hn = get<uint64_t>(f, 16);
  if (hn > f.size() - 32) throw Error(what + "header length out of range");
  json h;
  try {
    h = json::parse(f.substr(24, hn));
  } catch (const std::exception& e) {
    throw Error(what + "header is not valid JSON: " + e.what());
  }
  // Phase 1: parse and check everything (header, blobs, texts, turns, every state blob against
  // this model). Nothing of the session changes until phase 2.
  std::vector<ChatMessage> msgs;
  std::vector<Turn> turns;
  std::vector<int32_t> tokens, cache;
  std::string rendered;
  uint32_t n_past = 0;
  std::vector<StateBlob> state;
  std::vector<std::pair<size_t, std::vector<StateBlob>>> snaps;
  bool context_full = false;
  uint64_t generations = 0;
  try {
    const std::string fp = opt_.fingerprint.empty() ? config_fingerprint(model_.config()) : opt_.fingerprint;
    if (h.at("fingerprint").get<std::string>() != fp)
      throw Error(what + "saved for another model (" + h["fingerprint"].get<std::string>() + "), this is " + fp);
    // Blobs, checked one by one.
    std::vector<StateBlob> blobs;
    size_t off = 24 + hn;
    for (const json& b : h.at("blobs")) {
      const uint64_t n = header_uint(b.at("size"), what, "blob size", UINT64_MAX);
      if (n > f.size() - 8 - off) throw Error(what + "blob '" + b.at("name").get<std::string>() + "' runs past the end");
      StateBlob sb{b.at("name").get<std::string>(), std::vector<uint8_t>(f.begin() + off, f.begin() + off + n)};
      if (hex(fnv1a(sb.data.data(), n)) != b.at("fnv1a").get<std::string>()) throw Error(what + "blob '" + sb.name + "' is corrupt");
      blobs.push_back(std::move(sb));
      off += n;
    }
    if (off != f.size() - 8) throw Error(what + "unexpected bytes after the last blob");
    std::vector<bool> used(blobs.size(), false);
    auto group = [&](const json& range, const std::string& prefix) {
      const size_t a = header_size(range.at(0), what, "range start"), b = header_size(range.at(1), what, "range end");
      if (a > b || b > blobs.size()) throw Error(what + "blob range out of bounds");
      std::vector<StateBlob> out;
      for (size_t i = a; i < b; ++i) {
        if (used[i]) throw Error(what + "blob '" + blobs[i].name + "' is listed twice");
        if (blobs[i].name.rfind(prefix, 0) != 0) throw Error(what + "blob '" + blobs[i].name + "' is not a " + prefix + " blob");
        used[i] = true;
        std::string name = blobs[i].name.substr(prefix.size());
        if (version == 1) name = state_name_from_v1(name, seq_->states());
        out.push_back({std::move(name), std::move(blobs[i].data)});
      }
      return out;
    };
    // Texts.
    if (blobs.empty() || blobs[0].name != "text") throw Error(what + "missing text blob");
    used[0] = true;
    const std::string texts(blobs[0].data.begin(), blobs[0].data.end());
    size_t pos = 0;
    auto take = [&](size_t n) {
      if (n > texts.size() - pos) throw Error(what + "text lengths exceed the text blob");
      std::string s = texts.substr(pos, n);
      pos += n;
      return s;
    };
    rendered = take(header_size(h.at("rendered_bytes"), what, "rendered_bytes"));
    for (const json& m : h.at("messages")) {
      std::string role = m.at("role").get<std::string>();
      if (role != "system" && role != "user" && role != "assistant") throw Error(what + "unknown message role '" + role + "'");
      if (role == "system" && !msgs.empty()) throw Error(what + "a system message after the first message");
      msgs.push_back({role, take(header_size(m.at("bytes"), what, "message bytes"))});
    }
    if (pos != texts.size()) throw Error(what + "the text blob is longer than its texts");
    tokens = h.at("tokens").get<std::vector<int32_t>>();
    cache = h.at("cache").get<std::vector<int32_t>>();
    n_past = uint32_t(header_uint(h.at("n_past"), what, "n_past", UINT32_MAX));
    if (cache.size() != n_past) throw Error(what + "cache tokens do not match n_past");
    if (n_past > seq_->context_length())
      throw Error(what + "the saved cache holds " + std::to_string(n_past) + " tokens, this session's context " +
                  std::to_string(seq_->context_length()));
    // Turns: each ends with an assistant message after a user message, in order, within the texts
    // and tokens (what rollback() and regenerate() index with). A template that re-renders history
    // differently may shorten earlier turns' tokens, so turns are not checked against each other.
    Turn prev;
    for (const json& t : h.at("turns")) {
      Turn x{header_size(t.at(0), what, "turn field"), header_size(t.at(1), what, "turn field"),
             header_size(t.at(2), what, "turn field"), header_size(t.at(3), what, "turn field"),
             header_size(t.at(4), what, "turn field")};
      if (x.msgs_end < 2 || x.msgs_end > msgs.size() || x.msgs_end <= prev.msgs_end || msgs[x.msgs_end - 1].role != "assistant" ||
          msgs[x.msgs_end - 2].role != "user" || x.end_tokens > tokens.size() || x.end_text > rendered.size() ||
          x.prompt_tokens > x.end_tokens || x.prompt_text > x.end_text)
        throw Error(what + "turn table out of range");
      turns.push_back(x);
      prev = x;
    }
    for (int32_t t : tokens)
      if (t < 0 || uint32_t(t) >= model_.config().vocab) throw Error(what + "token id out of range");
    for (int32_t t : cache)
      if (t < 0 || uint32_t(t) >= model_.config().vocab) throw Error(what + "token id out of range");
    state = group(h.at("state_blobs"), "state.");
    for (const json& s : h.at("snapshots")) {
      const size_t n = header_size(s.at("n"), what, "snapshot n");
      if (n > n_past) throw Error(what + "snapshot past the saved cache");
      snaps.emplace_back(n, group(s.at("blobs"), "snap."));
    }
    for (size_t i = 0; i < used.size(); ++i)
      if (!used[i]) throw Error(what + "blob '" + blobs[i].name + "' belongs to nothing");
    if (h.contains("context_full") && !h["context_full"].is_boolean())
      throw Error(what + "malformed header: context_full must be true or false");
    context_full = h.value("context_full", false);
    generations = h.contains("generations") ? header_uint(h["generations"], what, "generations", UINT64_MAX) : 0;
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + "malformed header: " + e.what());
  }
  // Every snapshot's blobs against this model's layout (names, count, sizes): building one does
  // not touch the sequence. They are rebuilt after the import below, because a snapshot is only
  // restorable when taken after the KV rows it covers were written.
  for (auto& [n, b] : snaps) {
    try {
      seq_->import_snapshot(uint32_t(n), b);
    } catch (const Error& e) {
      throw Error(what + "snapshot at " + std::to_string(n) + " tokens: " + e.what());
    }
  }
  // The live state: import_state() checks names and sizes against the model before writing.
  try {
    seq_->import_state(n_past, state);
  } catch (const Error& e) {
    throw Error(what + "saved state: " + e.what());
  }
  // Phase 2: the sequence holds the file's state; the rest cannot fail on the file's contents.
  // Snapshots are an optimisation: should rebuilding one fail anyway (out of memory), the session
  // keeps the conversation and recomputes from the empty state when it needs an earlier point.
  snaps_.remove_if([](const Snap& s) { return !s.pinned; });
  try {
    for (auto& [n, b] : snaps) {
      Snap s;
      s.tokens.assign(cache.begin(), cache.begin() + n);
      s.state = seq_->import_snapshot(uint32_t(n), b);
      touch(s);
      snaps_.push_back(std::move(s));
    }
  } catch (const std::exception&) {
    snaps_.remove_if([](const Snap& s) { return !s.pinned; });
  }
  msgs_ = std::move(msgs);
  turns_ = std::move(turns);
  tokens_ = std::move(tokens);
  cache_ = std::move(cache);
  rendered_ = std::move(rendered);
  context_full_ = context_full;
  generations_ = generations;
  evict();
}

}  // namespace wgllm
