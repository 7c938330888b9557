// Helpers shared by the fuzz targets (header only; used by libFuzzer and replay builds alike).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace wgllm::fuzz {

/// A private directory for files a target must hand to a path-taking API (Tokenizer::from_hf_json,
/// Session::load): made once per process under $TMPDIR (default /tmp), removed at exit.
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/wgllm-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    static std::string keep = tmpl;
    std::atexit([] { std::system(("rm -rf '" + keep + "'").c_str()); });
    return tmpl;
  }();
  return dir;
}

/// Writes `size` bytes to scratch_dir()/name and returns the path (aborts if the write fails:
/// that is the harness's environment, not the engine's input).
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  std::string path = scratch_dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

}  // namespace wgllm::fuzz
