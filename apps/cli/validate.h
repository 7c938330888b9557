// Command-line value checks for the wgllm subcommands: CLI11 validators that look at the text an
// option was given, before CLI11 converts it, so a bad value is one clear error at parse time
// (before any model loads) and never a wrapped, truncated or NaN value.
//
// Why not only CLI11's own CLI::Range / CLI::PositiveNumber: CLI11 2.1 converts unsigned options
// with strtoull, which accepts "-1" for a uint64_t option (as 18446744073709551615) and
// "-18446744073709551615" for a uint32_t one (as 1), reads "010" as octal 8 and "0x10" as 16;
// and CLI::Range lets NaN through (every comparison with NaN is false). These validators accept
// plain decimal text only and compare exactly.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>

namespace wgllm::cli {

/// A decimal integer (optional '-' for negative lo, digits only) in [lo, hi], and a multiple of
/// `multiple_of` when that is > 1. Error texts name the range, e.g. "0 is not in [1, 1000]" or
/// "'abc' is not a decimal integer (expected one in [1, 1000])".
/// Rewrites the value to its canonical spelling ("010" -> "10", "-0" -> "0") for the conversion:
/// attach it with Option::transform() (Option::check() validates a copy).
CLI::Validator integer(int64_t lo, uint64_t hi, uint64_t multiple_of = 1);
/// A finite decimal real number (no NaN, no inf, no hex floats) in [lo, hi]; with lo_open, lo
/// itself is excluded: (lo, hi].
CLI::Validator real(double lo, double hi, bool lo_open = false);
/// 0, or a power of two in [min, max] (canonical spelling as integer(); attach with transform()).
CLI::Validator zero_or_power_of_two(uint32_t min, uint32_t max);
/// A path a result file can be written to: not empty, not an existing directory, and its parent
/// directory exists (checked at parse time, so a long run never loses its result at the end).
extern const CLI::Validator OutputFile;
/// A model: an existing GGUF file or model directory (the loader reports what is missing inside),
/// or the name of an installed registry model (model_registry.h: resolve_model), which it rewrites
/// to the model's path: attach it with Option::transform(). The empty string is refused.
extern const CLI::Validator ModelPath;

/// A non-empty string.
extern const CLI::Validator NonEmpty;

/// One-line text of a CLI11 parse error: the message with any line breaks joined by "; ".
std::string one_line(const std::string& text);

/// The closest of `names` to `word` by edit distance (case-insensitive), or "" when none is
/// within a third of the word's length (at least 2 edits): the "did you mean" of unknown commands.
std::string closest(const std::string& word, const std::vector<std::string>& names);

/// Writes `text` to `path` (replacing it); throws wgllm::Error naming the path and the reason when
/// the file cannot be opened or the write does not complete (full disk, /proc files, ...), so a
/// failed --json/--md is an error exit, never a silent success.
void write_file(const std::string& path, const std::string& text);

/// A bench subcommand's JSON result: `text` (a JSON dump, no trailing newline) to stdout when `path`
/// is empty, else written to `path` (write_file) with a "wrote PATH" line on stderr.
void print_or_write_json(const std::string& path, const std::string& text);

}  // namespace wgllm::cli
