#include "validate.h"

#include "core/error.h"
#include "model_registry.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <system_error>

namespace wgllm::cli {

namespace {

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

}  // namespace

CLI::Validator integer(int64_t lo, uint64_t hi, uint64_t multiple_of) {
  const std::string range = fmt::format("[{}, {}]", lo, hi) + (multiple_of > 1 ? fmt::format(", multiple of {}", multiple_of) : "");
  return CLI::Validator(
      [lo, hi, multiple_of, range](std::string& s) -> std::string {
        const bool neg = !s.empty() && s[0] == '-';
        const char* b = s.data() + (neg ? 1 : 0);
        const char* e = s.data() + s.size();
        if (b == e || !std::all_of(b, e, [](char c) { return c >= '0' && c <= '9'; }))
          return in_quotes(s) + " is not a decimal integer (expected one in " + range + ")";
        uint64_t mag = 0;
        const auto r = std::from_chars(b, e, mag, 10);
        if (r.ec == std::errc::result_out_of_range) return s + " is out of range " + range;
        // Negative: in range only when lo < 0 and |value| <= |lo| ("-0" is 0).
        const bool ok = neg ? (mag == 0 ? lo <= 0 : lo < 0 && mag <= uint64_t(-(lo + 1)) + 1)
                            : (mag <= hi && (lo <= 0 || mag >= uint64_t(lo)));
        if (!ok) return s + " is not in " + range;
        if (multiple_of > 1 && mag % multiple_of) return s + " is not a multiple of " + std::to_string(multiple_of);
        // The canonical spelling is what CLI11 converts: "010" would be octal 8 to its strtoull.
        s = (neg && mag ? "-" : "") + std::to_string(mag);
        return std::string();
      },
      "INT in " + range, "integer");
}

CLI::Validator real(double lo, double hi, bool lo_open) {
  const std::string range = fmt::format("{}{}, {}]", lo_open ? "(" : "[", lo, hi);
  return CLI::Validator(
      [lo, hi, lo_open, range](std::string& s) -> std::string {
        const char* b = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
        const char* e = s.data() + s.size();
        double v = 0;
        // from_chars (general format): no hex floats, no leading spaces, locale-independent.
        const auto r = std::from_chars(b, e, v, std::chars_format::general);
        if (b == e || r.ptr != e || r.ec == std::errc::invalid_argument)
          return in_quotes(s) + " is not a number (expected one in " + range + ")";
        if (r.ec == std::errc::result_out_of_range || !std::isfinite(v))
          return s + " is not a finite number in " + range;
        if (v < lo || v > hi || (lo_open && v == lo)) return s + " is not in " + range;
        return std::string();
      },
      "REAL in " + range, "real");
}

CLI::Validator zero_or_power_of_two(uint32_t min, uint32_t max) {
  const CLI::Validator in_range = integer(0, max);
  const std::string what = min > 1 ? fmt::format("0 or a power of two in [{}, {}]", min, max)
                                   : fmt::format("0 or a power of two up to {}", max);
  return CLI::Validator(
      [in_range, min, what](std::string& s) -> std::string {
        std::string t = s;
        if (std::string err = in_range(t); !err.empty()) return err;
        s = t;  // canonical spelling
        const uint64_t v = std::stoull(s);
        if ((v & (v - 1)) || (v != 0 && v < min)) return s + " is not " + what;
        return std::string();
      },
      what, "zero_or_power_of_two");
}

const CLI::Validator OutputFile(
    [](std::string& s) -> std::string {
      namespace fs = std::filesystem;
      if (s.empty()) return "an empty output path";
      std::error_code ec;
      const fs::path p(s);
      if (fs::is_directory(p, ec)) return s + " is a directory (expected a file to write)";
      const fs::path parent = p.has_parent_path() ? p.parent_path() : fs::path(".");
      if (!fs::is_directory(parent, ec)) return "the directory of " + s + " does not exist";
      return std::string();
    },
    "FILE to write", "output_file");

const CLI::Validator ModelPath(
    [](std::string& s) -> std::string {
      try {
        s = resolve_model(s, registry_path(), cache_dir());  // a registry name becomes its installed path
      } catch (const Error& e) {
        return e.what();
      }
      return std::string();
    },
    "GGUF file, model directory or registry name", "model_path");

const CLI::Validator NonEmpty([](std::string& s) { return s.empty() ? std::string("an empty value") : std::string(); },
                              "non-empty text", "non_empty");

std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      if (!out.empty() && out.substr(out.size() - std::min<size_t>(out.size(), 2)) != "; ") out += "; ";
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out;
}

std::string closest(const std::string& word, const std::vector<std::string>& names) {
  auto lower = [](std::string s) {
    for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string w = lower(word);
  std::string best;
  size_t best_d = std::max<size_t>(2, w.size() / 3) + 1;
  for (const std::string& name : names) {
    const std::string n = lower(name);
    // Levenshtein distance, one row at a time.
    std::vector<size_t> row(n.size() + 1);
    for (size_t j = 0; j <= n.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= w.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= n.size(); ++j) {
        const size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (w[i - 1] == n[j - 1] ? 0 : 1)});
        diag = up;
      }
    }
    // A prefix of a command ("bench multi" for multi-turn) counts as close too.
    const size_t d = n.rfind(w, 0) == 0 && !w.empty() ? 1 : row[n.size()];
    if (d < best_d) best_d = d, best = name;
  }
  return best;
}

void write_file(const std::string& path, const std::string& text) {
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("cannot write " + path + ": " + (errno ? std::strerror(errno) : "open failed"));
  f << text;
  f.close();
  if (!f) throw Error("cannot write " + path + ": " + (errno ? std::strerror(errno) : "write failed"));
}

void print_or_write_json(const std::string& path, const std::string& text) {
  if (path.empty()) {
    std::cout << text << std::endl;
    return;
  }
  write_file(path, text + "\n");
  fmt::print(stderr, "wrote {}\n", path);
}

}  // namespace wgllm::cli
