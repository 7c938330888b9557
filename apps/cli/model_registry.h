// The model registry (scripts/models.json): models that `wgllm pull NAME` installs into
// $WGLLM_CACHE/models/<file>, `wgllm models` lists, and `-m NAME` picks by name.
//
// The registry is read from $WGLLM_REGISTRY when set, else from the source tree the binary was
// built from (<source>/scripts/models.json). The download itself is scripts/pull_model.py (why
// Python: see its docstring); `wgllm pull` runs it with the same cache and registry.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wgllm::cli {

/// One registry entry (the fields `wgllm models` shows; the parts stay with pull_model.py).
struct RegistryModel {
  std::string name;          // e.g. "qwen2.5-coder-1.5b"
  std::string architecture;  // GGUF general.architecture, e.g. "qwen2"
  std::string description;
  std::string file;     // installed as <cache>/models/<file>
  uint64_t size = 0;    // bytes of the joined file
  std::string sha256;   // of the joined file (hex)
  std::string license;
  std::string chat_template;  // a note: where the template comes from, or that there is none
  size_t parts = 0;           // wheels it is joined from
  bool is_default = false;    // the model `make demo` and a missing -m use
};

/// $WGLLM_CACHE, else ~/.cache/wgllm.
std::string cache_dir();
/// $WGLLM_REGISTRY, else <source tree>/scripts/models.json.
std::string registry_path();
/// $WGLLM_PULL_SCRIPT, else <source tree>/scripts/pull_model.py.
std::string pull_script_path();

/// The entries of a registry file; throws wgllm::Error naming the file and the problem (missing
/// file, bad JSON, an entry without name/file/size/sha256, a name given twice).
std::vector<RegistryModel> load_registry(const std::string& path);

/// Where `m` is (or would be) installed: <cache>/models/<file>.
std::string installed_path(const RegistryModel& m, const std::string& cache);

/// Install state from the file's presence and size (not its sha256: `wgllm pull` verifies that).
enum class Installed { No, Yes, WrongSize };
Installed install_state(const RegistryModel& m, const std::string& cache, uint64_t* size_found = nullptr);
/// installed_path(m, cache) when m is installed; else throws wgllm::Error saying what is missing
/// (no file, or an incomplete one) and the `wgllm pull` command that installs it.
std::string installed_or_error(const RegistryModel& m, const std::string& cache);

/// The model path an -m value stands for. An existing file or directory is taken as is (so a
/// local folder named like a registry model wins); otherwise the value is a registry name, and
/// the installed file's path is returned. Throws wgllm::Error:
///   "model 'NAME' is not installed: run `wgllm pull NAME`" (also for a wrong-size file),
///   "'X': no such file, directory or model name (...); did you mean 'NAME'?" for anything else.
/// The registry is only read when the value is not an existing path; an unreadable registry then
/// is an error naming it.
std::string resolve_model(const std::string& value, const std::string& registry, const std::string& cache);

/// The closest registry name to `word` ("did you mean"): by edit distance, else a name containing
/// every word of it (split at non-alphanumerics, each >= 2 characters); "" when none is close.
std::string closest_model_name(const std::string& word, const std::vector<RegistryModel>& models);

/// `wgllm models`: one row per entry (name, default mark, architecture, size, state and path), or
/// with `json` an array of objects {name, default, architecture, description, file, size, sha256,
/// license, chat_template, parts, path, installed, size_found}.
std::string models_table(const std::vector<RegistryModel>& models, const std::string& cache);
nlohmann::json models_json(const std::vector<RegistryModel>& models, const std::string& cache);

/// `wgllm pull NAME... [--keep-downloads]`: runs `python3 <pull script> NAME...` with the same
/// cache and registry in its environment (stdin/stdout/stderr inherited, so its progress bar shows
/// on a terminal); returns its exit status (0 installed, 1 download/checksum error, 2 unknown name)
/// or throws wgllm::Error when python3 or the script cannot be started.
int run_pull(const std::vector<std::string>& names, bool keep_downloads);

}  // namespace wgllm::cli
