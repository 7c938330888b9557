// Internal helper: read-only private mmap of a whole regular file (POSIX).
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"

namespace wgllm::detail {

/// Maps `path` read-only. Returns {address, size}; the caller munmap()s. Throws wgllm::Error
/// prefixed with `kind` ("gguf", "safetensors") for missing, non-regular or empty files.
inline std::pair<void*, size_t> map_file(const std::string& path, const char* kind) {
  const std::string pre = std::string(kind) + " " + path + ": ";
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer (it is then refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(pre + "cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(pre + "not a regular file");
  }
  if (st.st_size == 0) {
    ::close(fd);
    throw Error(pre + "file is empty (at byte offset 0)");
  }
  void* m = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (m == MAP_FAILED) throw Error(pre + "mmap failed: " + std::strerror(err));
  return {m, size_t(st.st_size)};
}

}  // namespace wgllm::detail
