#include "model_registry.h"

#include <spawn.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "validate.h"

extern char** environ;

namespace wgllm::cli {
namespace fs = std::filesystem;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string mib(uint64_t bytes) { return fmt::format("{:.1f} MiB", double(bytes) / (1 << 20)); }

}  // namespace

std::string cache_dir() {
  if (const char* c = std::getenv("WGLLM_CACHE"); c && *c) return c;
  const char* h = std::getenv("HOME");
  return std::string(h ? h : "") + "/.cache/wgllm";
}

std::string registry_path() { return env_or("WGLLM_REGISTRY", std::string(WGLLM_SOURCE_DIR) + "/scripts/models.json"); }

std::string pull_script_path() {
  return env_or("WGLLM_PULL_SCRIPT", std::string(WGLLM_SOURCE_DIR) + "/scripts/pull_model.py");
}

std::vector<RegistryModel> load_registry(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open the model registry " + path + " (set WGLLM_REGISTRY to scripts/models.json)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error("model registry " + path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("models") || !j["models"].is_array())
    throw Error("model registry " + path + ": no \"models\" array");
  std::vector<RegistryModel> out;
  std::set<std::string> seen;
  for (const auto& e : j["models"]) {
    RegistryModel m;
    try {
      m.name = e.at("name").get<std::string>();
      m.file = e.at("file").get<std::string>();
      m.size = e.at("size").get<uint64_t>();
      m.sha256 = e.at("sha256").get<std::string>();
      m.architecture = e.value("architecture", "");
      m.description = e.value("description", "");
      m.license = e.value("license", "");
      m.chat_template = e.value("chat_template", "");
      m.is_default = e.value("default", false);
      m.parts = e.contains("parts") && e["parts"].is_array() ? e["parts"].size() : 0;
    } catch (const nlohmann::json::exception& ex) {
      throw Error(fmt::format("model registry {}: entry {}: {}", path, out.size() + 1, ex.what()));
    }
    if (m.name.empty() || m.file.empty() || m.file.find('/') != std::string::npos)
      throw Error(fmt::format("model registry {}: entry {}: empty name or a file name with '/'", path, out.size() + 1));
    if (!seen.insert(m.name).second) throw Error("model registry " + path + ": '" + m.name + "' is listed twice");
    out.push_back(std::move(m));
  }
  return out;
}

std::string installed_path(const RegistryModel& m, const std::string& cache) { return cache + "/models/" + m.file; }

Installed install_state(const RegistryModel& m, const std::string& cache, uint64_t* size_found) {
  std::error_code ec;
  const fs::path p = installed_path(m, cache);
  if (!fs::is_regular_file(p, ec)) return Installed::No;
  const uint64_t n = fs::file_size(p, ec);
  if (ec) return Installed::No;
  if (size_found) *size_found = n;
  return n == m.size ? Installed::Yes : Installed::WrongSize;
}

std::string closest_model_name(const std::string& word, const std::vector<RegistryModel>& models) {
  std::vector<std::string> names;
  for (const auto& m : models) names.push_back(m.name);
  std::string near = closest(word, names);
  if (!near.empty() || word.size() < 3) return near;
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  // A name containing every word of `word` ("qwen-coder" -> "qwen2.5-coder-1.5b", "qwen" too).
  std::vector<std::string> words;
  std::string cur;
  for (char c : lower(word) + "-") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += c;
    } else if (!cur.empty()) {
      words.push_back(cur);
      cur.clear();
    }
  }
  for (const auto& n : names) {
    const std::string ln = lower(n);
    bool all = !words.empty();
    for (const auto& w : words) all = all && w.size() >= 2 && ln.find(w) != std::string::npos;
    if (all) return n;
  }
  return "";
}

std::string installed_or_error(const RegistryModel& m, const std::string& cache) {
  uint64_t found = 0;
  switch (install_state(m, cache, &found)) {
    case Installed::Yes:
      break;
    case Installed::WrongSize:
      throw Error(fmt::format("model '{}' is not installed: {} has {} bytes, expected {} (an interrupted copy?); run `wgllm pull {}`",
                              m.name, installed_path(m, cache), found, m.size, m.name));
    case Installed::No:
      throw Error(fmt::format("model '{}' is not installed: run `wgllm pull {}` ({}, into {})", m.name, m.name, mib(m.size),
                              installed_path(m, cache)));
  }
  return installed_path(m, cache);
}

std::string resolve_model(const std::string& value, const std::string& registry, const std::string& cache) {
  std::error_code ec;
  if (value.empty()) throw Error("an empty model path");
  if (fs::exists(fs::path(value), ec)) return value;
  const std::vector<RegistryModel> models = load_registry(registry);
  for (const auto& m : models)
    if (m.name == value) return installed_or_error(m, cache);
  const std::string near = closest_model_name(value, models);
  throw Error(fmt::format("'{}': no such file, directory or model name (expected a GGUF file, a model directory or a "
                          "name from `wgllm models`){}",
                          value, near.empty() ? "" : "; did you mean '" + near + "'?"));
}

nlohmann::json models_json(const std::vector<RegistryModel>& models, const std::string& cache) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : models) {
    uint64_t found = 0;
    const Installed st = install_state(m, cache, &found);
    out.push_back({{"name", m.name},
                   {"default", m.is_default},
                   {"architecture", m.architecture},
                   {"description", m.description},
                   {"file", m.file},
                   {"size", m.size},
                   {"sha256", m.sha256},
                   {"license", m.license},
                   {"chat_template", m.chat_template},
                   {"parts", m.parts},
                   {"path", installed_path(m, cache)},
                   {"installed", st == Installed::Yes},
                   {"size_found", st == Installed::No ? nlohmann::json(nullptr) : nlohmann::json(found)}});
  }
  return out;
}

std::string models_table(const std::vector<RegistryModel>& models, const std::string& cache) {
  size_t w_name = 4, w_arch = 4;
  for (const auto& m : models) w_name = std::max(w_name, m.name.size() + 2), w_arch = std::max(w_arch, m.architecture.size());
  std::string out = fmt::format("{:<{}}  {:<{}}  {:>11}  {}\n", "NAME", w_name, "ARCH", w_arch, "SIZE", "STATE");
  for (const auto& m : models) {
    uint64_t found = 0;
    std::string state;
    switch (install_state(m, cache, &found)) {
      case Installed::Yes:
        state = "installed " + installed_path(m, cache);
        break;
      case Installed::WrongSize:
        state = fmt::format("incomplete {} ({} bytes; `wgllm pull {}`)", installed_path(m, cache), found, m.name);
        break;
      case Installed::No:
        state = fmt::format("not installed (`wgllm pull {}`)", m.name);
        break;
    }
    out += fmt::format("{:<{}}  {:<{}}  {:>11}  {}\n", m.name + (m.is_default ? " *" : ""), w_name, m.architecture, w_arch,
                       mib(m.size), state);
  }
  out += "(* the default model; `wgllm pull NAME` installs one, `-m NAME` uses it; cache " + cache + ")\n";
  return out;
}

int run_pull(const std::vector<std::string>& names, bool keep_downloads) {
  const std::string script = pull_script_path();
  if (!fs::exists(script)) throw Error("the downloader " + script + " is missing (set WGLLM_PULL_SCRIPT)");
  // The child sees the cache and registry this process uses (defaults made explicit).
  setenv("WGLLM_CACHE", cache_dir().c_str(), 1);
  setenv("WGLLM_REGISTRY", registry_path().c_str(), 1);
  std::vector<std::string> args = {"python3", script};
  if (keep_downloads) args.push_back("--keep-downloads");
  args.insert(args.end(), names.begin(), names.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // Ctrl-C goes to the downloader (same process group), which reports it and exits 130.
  struct sigaction ign {}, old_int {};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &old_int);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ);
  int status = 0;
  if (rc == 0)
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  sigaction(SIGINT, &old_int, nullptr);
  if (rc != 0) throw Error(std::string("cannot start python3 for the downloader: ") + std::strerror(rc));
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace wgllm::cli
