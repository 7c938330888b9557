// libFuzzer target: the session-file load path (Session::load: magic, version, checksums, JSON header,
// blob table, text/turn/token tables, then Sequence::import_state / import_snapshot of the saved KV
// rows and recurrent states) against the tiny random Qwen3.5 hybrid of tests/fixtures (KV cache and
// recurrent state) on the CPU backend; after a successful load the session must still work: one
// more turn (2 tokens), undo, save. Any input must load or give a wgllm::Error, never a crash.
//
// Checksums: mutated files would almost never pass the whole-file FNV-1a check, so when the input's
// reserved field (bytes 12..15) is zero the harness first recomputes each blob's FNV-1a in the JSON
// header and the trailing whole-file FNV-1a (the layout documented in src/runtime/session_file.cpp);
// inputs with a non-zero reserved field are loaded as they are (the checksum paths themselves).
//
// Seeds: WGLLM_FUZZ_SESSION_SEEDS=DIR fuzz_session_file writes sessions of 1 and 3 turns into DIR
// and exits (fuzz/make_seeds.py does this).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "chat/chat_template.h"
#include "core/error.h"
#include "fuzz_util.h"
#include "models/model.h"
#include "models/source.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace {

const char* kModelDir = WGLLM_SOURCE_DIR "/tests/fixtures/qwen35_tiny";
// ChatML, as in tests/fixtures/lfm2_tiny/hf/tokenizer_config.json (the qwen35_tiny fixture has none).
const char* kTemplate =
    "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

struct World {
  std::unique_ptr<wgllm::ModelSource> src;
  std::unique_ptr<wgllm::Tokenizer> tok;
  std::unique_ptr<wgllm::ChatTemplate> tmpl;
  std::unique_ptr<wgllm::Model> model;
  wgllm::SessionOptions so;
};
World* g_world = nullptr;

wgllm::GenerateOptions fixed(uint32_t n) {
  wgllm::GenerateOptions g;
  g.max_new_tokens = n;
  g.stop_at_eog = false;
  return g;
}

uint64_t fnv1a(const uint8_t* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

template <class T>
T get(const std::string& s, size_t off) {
  T v;
  std::memcpy(&v, s.data() + off, sizeof v);
  return v;
}

// Recomputes blob and file checksums of a session file (see the header comment); leaves anything it
// cannot follow (short file, bad header) as it is.
std::string fix_checksums(std::string f) {
  if (f.size() < 32 || std::memcmp(f.data(), "WGLLMSES", 8) != 0 || get<uint32_t>(f, 12) != 0) return f;
  const uint64_t hn = get<uint64_t>(f, 16);
  if (hn <= f.size() - 32) {
    auto h = nlohmann::json::parse(f.substr(24, hn), nullptr, false);
    if (!h.is_discarded() && h.is_object() && h.contains("blobs") && h["blobs"].is_array()) {
      size_t off = 24 + hn;
      for (auto& b : h["blobs"]) {
        if (!b.is_object() || !b.contains("size") || !b["size"].is_number_unsigned()) break;
        const uint64_t n = b["size"].get<uint64_t>();
        if (n > f.size() - 8 - off) break;
        char hex[17];
        std::snprintf(hex, sizeof hex, "%016llx",
                      static_cast<unsigned long long>(fnv1a(reinterpret_cast<const uint8_t*>(f.data()) + off, n)));
        b["fnv1a"] = hex;
        off += n;
      }
      const std::string nh = h.dump();
      const uint64_t nn = nh.size();
      std::string out = f.substr(0, 16);
      out.append(reinterpret_cast<const char*>(&nn), 8);
      out += nh;
      out += f.substr(24 + hn);
      f = std::move(out);
    }
  }
  const uint64_t sum = fnv1a(reinterpret_cast<const uint8_t*>(f.data()), f.size() - 8);
  std::memcpy(f.data() + f.size() - 8, &sum, 8);
  return f;
}

void make_seeds(const std::string& dir) {
  World& w = *g_world;
  for (int turns : {1, 3}) {
    wgllm::Session s(*w.model, *w.tok, w.tmpl.get(), w.so);
    if (turns > 1) s.set_system("Be brief.");
    for (int t = 0; t < turns; ++t) s.send("hello number " + std::to_string(t), fixed(3));
    const std::string path = dir + "/session_" + std::to_string(turns) + "turns.wgllmses";
    s.save(path);
    std::fprintf(stderr, "wrote %s\n", path.c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_world = new World;
  World& w = *g_world;
  w.src = wgllm::ModelSource::open(kModelDir);
  w.tok = wgllm::Tokenizer::from_hf_json(std::string(kModelDir) + "/tokenizer.json");
  w.tmpl = std::make_unique<wgllm::ChatTemplate>(kTemplate);
  wgllm::ModelOptions mo;
  mo.backend = wgllm::BackendKind::CPU;
  mo.context_length = 256;
  w.model = wgllm::create_model(*w.src, mo);
  w.so.fingerprint = "qwen35_tiny";
  w.so.snapshot_cap_count = 4;
  if (const char* dir = std::getenv("WGLLM_FUZZ_SESSION_SEEDS")) {
    make_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& w = *g_world;
  const std::string file = fix_checksums(std::string(reinterpret_cast<const char*>(data), size));
  const std::string path =
      wgllm::fuzz::write_scratch("in.wgllmses", reinterpret_cast<const uint8_t*>(file.data()), file.size());
  wgllm::Session s(*w.model, *w.tok, w.tmpl.get(), w.so);
  try {
    s.load(path);
  } catch (const wgllm::Error&) {
    return 0;
  }
  try {
    s.send("next", fixed(2));
    s.undo();
    s.save(wgllm::fuzz::scratch_dir() + "/out.wgllmses");
  } catch (const wgllm::Error&) {
  }
  return 0;
}
