// Hugging Face model directory loader; see hf_dir.h.
#include "formats/hf_dir.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace wgllm {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

json read_json(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error("hf dir: cannot read " + p.string());
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    throw Error("hf dir: " + p.string() + ": invalid JSON: " + e.what());
  }
}

}  // namespace

std::unique_ptr<HfDir> HfDir::open(const std::string& dir) {
  std::unique_ptr<HfDir> h(new HfDir());
  h->dir_ = dir;
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_directory(d, ec)) throw Error("hf dir: " + dir + " is not a directory");

  const fs::path cfg = d / "config.json";
  if (!is_file(cfg)) throw Error("hf dir: " + dir + ": missing config.json");
  h->config_ = read_json(cfg);
  if (!h->config_.is_object()) throw Error("hf dir: " + cfg.string() + ": not a JSON object");
  if (const fs::path g = d / "generation_config.json"; is_file(g)) h->gen_config_ = read_json(g);
  if (const fs::path t = d / "tokenizer.json"; is_file(t)) h->tokenizer_json_ = t.string();
  if (const fs::path t = d / "tokenizer_config.json"; is_file(t)) h->tokenizer_config_ = t.string();

  const fs::path single = d / "model.safetensors", index = d / "model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;  // tensor -> shard file (index only)
  std::vector<std::string> shard_names;
  if (is_file(single)) {
    shard_names.push_back("model.safetensors");
  } else if (is_file(index)) {
    const json idx = read_json(index);
    const auto wm = idx.is_object() ? idx.find("weight_map") : idx.end();
    if (!idx.is_object() || wm == idx.end() || !wm->is_object())
      throw Error("hf dir: " + index.string() + ": missing \"weight_map\" object");
    for (const auto& [name, file] : wm->items()) {
      if (!file.is_string())
        throw Error("hf dir: " + index.string() + ": weight_map['" + name + "'] is not a string");
      const std::string f = file.get<std::string>();
      if (f.empty() || f.find('/') != std::string::npos || f.find('\\') != std::string::npos ||
          f == "." || f == "..")
        throw Error("hf dir: " + index.string() + ": weight_map['" + name + "'] = '" + f +
                    "' is not a plain file name in the model directory");
      weight_map[name] = f;
      if (std::find(shard_names.begin(), shard_names.end(), f) == shard_names.end())
        shard_names.push_back(f);
    }
    if (shard_names.empty()) throw Error("hf dir: " + index.string() + ": empty weight_map");
    std::sort(shard_names.begin(), shard_names.end());
  } else {
    throw Error("hf dir: " + dir + ": no model.safetensors or model.safetensors.index.json");
  }

  std::map<std::string, const SafetensorsFile*> by_name;
  std::map<std::string, std::string> owner;  // tensor -> shard file it was found in
  for (const std::string& s : shard_names) {
    const fs::path p = d / s;
    if (!is_file(p)) throw Error("hf dir: " + dir + ": missing weight file " + s);
    h->shards_.push_back(SafetensorsFile::open(p.string()));
    const SafetensorsFile* f = h->shards_.back().get();
    by_name[s] = f;
    for (const SafetensorsTensor& t : f->tensors()) {
      auto [it, fresh] = owner.emplace(t.name, s);
      if (!fresh)
        throw Error("hf dir: " + dir + ": tensor '" + t.name + "' appears in both " + it->second +
                    " and " + s);
      h->index_.emplace(t.name, &t);
    }
  }
  for (const auto& [name, file] : weight_map)
    if (!by_name.at(file)->find(name))
      throw Error("hf dir: " + index.string() + ": tensor '" + name + "' is mapped to " + file +
                  " but that file does not contain it");
  for (const auto& [name, t] : h->index_) h->tensors_.push_back(t);
  return h;
}

const SafetensorsTensor* HfDir::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const SafetensorsTensor& HfDir::tensor(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (!t) throw Error("hf dir: " + dir_ + ": tensor '" + name + "' not found");
  return *t;
}

}  // namespace wgllm
