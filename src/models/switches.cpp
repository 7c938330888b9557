#include "models/switches.h"

#include <fmt/core.h>

#include <cctype>
#include <charconv>
#include <optional>

#include "core/error.h"

namespace wgllm {
namespace {

// Accessors of the ModelOptions field of a Kernel / Model switch (null for the other scopes).
#define WGLLM_ACCESS_KERNEL(field)                                                   \
  [](const ModelOptions& o) -> int64_t { return int64_t(o.kernels.field); },         \
      [](ModelOptions& o, int64_t v) { o.kernels.field = decltype(o.kernels.field)(v); }
#define WGLLM_ACCESS_MODEL(field)                                            \
  [](const ModelOptions& o) -> int64_t { return int64_t(o.field); },         \
      [](ModelOptions& o, int64_t v) { o.field = decltype(o.field)(v); }
#define WGLLM_ACCESS_APP(field) nullptr, nullptr
#define WGLLM_ACCESS_SESSION(field) nullptr, nullptr
#define WGLLM_ACCESS_WEB(field) nullptr, nullptr

constexpr SwitchScope KERNEL = SwitchScope::Kernel, MODEL = SwitchScope::Model, APP = SwitchScope::App,
                      SESSION = SwitchScope::Session, WEB = SwitchScope::Web;
constexpr SwitchKind BOOL = SwitchKind::Bool, TRI = SwitchKind::Tri, INT = SwitchKind::Int, POW2 = SwitchKind::Pow2;
constexpr bool EXACT = true, INEXACT = false, PRODUCT = true, NEUTRAL = false;
constexpr SwitchWarmup W_NONE = SwitchWarmup::None, W_PREFILL = SwitchWarmup::Prefill, W_DECODE = SwitchWarmup::Decode,
                       W_SPLIT = SwitchWarmup::Split, W_SWITCHED = SwitchWarmup::Switched;

const SwitchInfo kSwitches[] = {
#define WGLLM_SWITCH(scope, field, type, kind, def, lo, hi, flag, bit_exact, product, record, warmup, help) \
  {#field, scope, kind, int64_t(def), lo, hi, flag, bit_exact, product, record, warmup, help, WGLLM_ACCESS_##scope(field)},
#include "kernels/switches.def"
#undef WGLLM_SWITCH
};

const SwitchRecord kRecords[] = {
#define WGLLM_DOC_HEADER(text)
#define WGLLM_DOC_FOOTER(text)
#define WGLLM_RECORD(key, what, measured, bit_exact, on_when) {#key, what, measured, bit_exact, on_when},
#include "models/switch_records.inc"
#undef WGLLM_RECORD
#undef WGLLM_DOC_HEADER
#undef WGLLM_DOC_FOOTER
};

#define WGLLM_RECORD(...)
#define WGLLM_DOC_FOOTER(text)
#define WGLLM_DOC_HEADER(text) constexpr const char* kHeader = text;
#include "models/switch_records.inc"
#undef WGLLM_DOC_HEADER
#undef WGLLM_DOC_FOOTER
#define WGLLM_DOC_HEADER(text)
#define WGLLM_DOC_FOOTER(text) constexpr const char* kFooter = text;
#include "models/switch_records.inc"
#undef WGLLM_DOC_HEADER
#undef WGLLM_DOC_FOOTER
#undef WGLLM_RECORD

/// A record field as one table cell: line breaks become spaces.
std::string cell(const char* s) {
  std::string out;
  for (const char* p = s; *p; ++p) {
    if (*p == '\n') {
      while (!out.empty() && out.back() == ' ') out.pop_back();
      out += ' ';
      while (p[1] == ' ') ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

const char* scope_struct(SwitchScope s) {
  switch (s) {
    case SwitchScope::Kernel: return "KernelOptions";
    case SwitchScope::Model: return "ModelOptions";
    case SwitchScope::App: return "CommonOptions";
    case SwitchScope::Session: return "SessionOptions";
    case SwitchScope::Web: return "CreateEngine options";
  }
  return "";
}

const char* warmup_name(SwitchWarmup w) {
  switch (w) {
    case SwitchWarmup::None: return "none";
    case SwitchWarmup::Prefill: return "prefill";
    case SwitchWarmup::Decode: return "decode";
    case SwitchWarmup::Split: return "key split (far positions)";
    case SwitchWarmup::Switched: return "switched pipelines";
  }
  return "";
}

/// "`--fuse-norm` / `--no-fuse-norm` / `KernelOptions::fuse_norm`"
std::string flag_cell(const SwitchInfo& s) {
  std::string f;
  if (*s.flag) {
    if (s.kind == SwitchKind::Bool || s.kind == SwitchKind::Tri)
      f = fmt::format("`--{0}` / `--no-{0}` / ", s.flag);
    else
      f = fmt::format("`--{} N` / ", s.flag);
  } else {
    f = "(no CLI flag) ";
  }
  return f + "`" + s.qualified() + "`";
}

}  // namespace

std::string SwitchInfo::qualified() const { return std::string(scope_struct(scope)) + "::" + field; }

std::string SwitchInfo::spelled(int64_t v) const {
  if (!*flag) return "";
  switch (kind) {
    case SwitchKind::Bool: return v ? fmt::format("--{}", flag) : fmt::format("--no-{}", flag);
    case SwitchKind::Tri: return v == 1 ? fmt::format("--{}", flag) : v == 0 ? fmt::format("--no-{}", flag) : "";
    case SwitchKind::Int: return v >= lo && v <= hi ? fmt::format("--{} {}", flag, v) : "";
    case SwitchKind::Pow2: return v == 0 || (v >= lo && v <= hi) ? fmt::format("--{} {}", flag, v) : "";
  }
  return "";
}

std::string SwitchInfo::default_text() const {
  switch (kind) {
    case SwitchKind::Bool: return def ? "on" : "off";
    case SwitchKind::Tri: return def == 2 ? "2 (adapter default)" : def == 1 ? "1 (on)" : "0 (off)";
    case SwitchKind::Int: return def < lo || def > hi ? "auto (adapter default)" : std::to_string(def);
    case SwitchKind::Pow2: return def != 0 && (def < lo || def > hi) ? "auto (adapter default)" : std::to_string(def);
  }
  return "";
}

std::span<const SwitchInfo> switches() { return kSwitches; }

const SwitchInfo* find_switch(std::string_view field, SwitchScope scope) {
  for (const SwitchInfo& s : kSwitches)
    if (s.scope == scope && field == s.field) return &s;
  return nullptr;
}

std::span<const SwitchRecord> switch_records() { return kRecords; }

namespace {

// The integer of a switch value: on/true 1, off/false 0, else decimal digits (a leading '-' allowed).
std::optional<int64_t> parse_switch_value(std::string_view v) {
  if (v == "on" || v == "true") return 1;
  if (v == "off" || v == "false") return 0;
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return x;
}

// Sets s to v if v is a value its CLI flag accepts (apps/cli/options.cpp add_switch: integer(lo, hi),
// Pow2 also 0) or, with allow_default (FIELD=VALUE), its default (maybe an adapter-default sentinel);
// throws naming `what` otherwise.
void set_switch(ModelOptions& o, const SwitchInfo& s, int64_t v, std::string_view what, bool allow_default) {
  const bool pow2 = s.kind == SwitchKind::Pow2;
  const bool ok = (allow_default && v == s.def) || (pow2 && v == 0) ||
                  (v >= s.lo && v <= s.hi && (!pow2 || (v & (v - 1)) == 0));
  if (!ok)
    throw Error(fmt::format("switch {}: {} is outside [{}, {}]{}", what, v, s.lo, s.hi, pow2 ? " (0 or a power of two)" : ""));
  s.set(o, v);
}

// The kernel- or model-level switch with this field name (by_flag: CLI flag name; switches without
// a flag never match one), or null.
const SwitchInfo* settable_switch(std::string_view name, bool by_flag) {
  for (const SwitchInfo& s : kSwitches)
    if (s.set && (by_flag ? *s.flag && name == s.flag : name == s.field)) return &s;
  return nullptr;
}

}  // namespace

void apply_switch_setting(ModelOptions& o, std::string_view spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string_view::npos) throw Error(fmt::format("switch setting '{}': want FIELD=VALUE", spec));
  const std::string_view field = spec.substr(0, eq), value = spec.substr(eq + 1);
  const SwitchInfo* s = settable_switch(field, false);
  if (!s) throw Error(fmt::format("switch setting '{}': no kernel- or model-level switch '{}' (wgllm flags)", spec, field));
  const auto v = parse_switch_value(value);
  if (!v) throw Error(fmt::format("switch setting '{}': the value is not an integer, on or off", spec));
  set_switch(o, *s, *v, spec, /*allow_default=*/true);
}

void apply_switch_args(ModelOptions& o, std::string_view args) {
  std::vector<std::string_view> tok;
  for (size_t i = 0; i < args.size();) {
    while (i < args.size() && std::isspace(static_cast<unsigned char>(args[i]))) ++i;
    const size_t b = i;
    while (i < args.size() && !std::isspace(static_cast<unsigned char>(args[i]))) ++i;
    if (i > b) tok.push_back(args.substr(b, i - b));
  }
  for (size_t i = 0; i < tok.size(); ++i) {
    const std::string_view t = tok[i];
    if (!t.starts_with("--")) {
      apply_switch_setting(o, t);
      continue;
    }
    // "--FLAG VALUE" or "--FLAG=VALUE", as CLI11 takes them.
    std::string_view name = t.substr(2), inline_value;
    const size_t eq = name.find('=');
    const bool has_inline = eq != std::string_view::npos;
    if (has_inline) inline_value = name.substr(eq + 1), name = name.substr(0, eq);
    const SwitchInfo* s = settable_switch(name, true);
    bool off = false;
    if (!s && name.starts_with("no-")) {
      s = settable_switch(name.substr(3), true);
      off = s != nullptr;
    }
    if (!s) {
      for (const SwitchInfo& x : kSwitches)
        if (*x.flag && (name == x.flag || (name.starts_with("no-") && name.substr(3) == x.flag)))
          throw Error(fmt::format("switch {}: not a kernel- or model-level switch (only those apply here)", t));
      throw Error(fmt::format("switch {}: unknown flag (wgllm flags lists them)", t));
    }
    const bool on_off = s->kind == SwitchKind::Bool || s->kind == SwitchKind::Tri;
    if (on_off) {
      bool on = true;
      if (has_inline) {  // --FLAG=VALUE: the truth values the CLI takes (apps/cli/options.cpp add_switch)
        std::string lower(inline_value);
        for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
        if (lower == "false" || lower == "off" || lower == "no" || lower == "0") on = false;
        else if (lower != "true" && lower != "on" && lower != "yes" && lower != "1")
          throw Error(fmt::format("switch {}: want true/false, on/off, yes/no, 1 or 0", t));
      }
      s->set(o, on != off);  // --no-FLAG=false is --FLAG
      continue;
    }
    if (off) throw Error(fmt::format("switch {}: a numeric switch; give --{} N", t, s->flag));
    std::string_view value = inline_value;
    if (!has_inline) {
      if (i + 1 == tok.size()) throw Error(fmt::format("switch {}: wants a value", t));
      value = tok[++i];
    }
    const auto v = parse_switch_value(value);
    if (!v || value == "on" || value == "off" || value == "true" || value == "false")
      throw Error(fmt::format("switch {} {}: the value is not an integer", t, value));
    set_switch(o, *s, *v, fmt::format("{} {}", t, value), /*allow_default=*/false);
  }
}

std::vector<std::string> non_default_switches(const ModelOptions& o) {
  std::vector<std::string> r;
  for (const SwitchInfo& s : kSwitches) {
    if (!s.get || !s.product) continue;
    const int64_t v = s.get(o);
    if (v == s.def) continue;
    std::string sp = s.spelled(v);
    r.push_back(sp.empty() ? fmt::format("{}={}", s.field, v) : sp);
  }
  return r;
}

std::string flags_markdown() {
  std::string md = std::string(kHeader) + "\n\n";
  md += "<!-- Generated by `wgllm flags --markdown` from the switch table (src/kernels/switches.def) and the\n"
        "     decision records (src/models/switch_records.inc): edit those, not this file. -->\n\n";
  md += "| switch (CLI / field) | default | what it does | measured effect | bit-exact | on when |\n";
  md += "|---|---|---|---|---|---|\n";
  for (const SwitchRecord& r : kRecords) {
    std::string flags, defs;
    for (const SwitchInfo& s : kSwitches) {
      if (std::string_view(s.record) != r.key) continue;
      flags += (flags.empty() ? "" : "; ") + flag_cell(s);
      defs += (defs.empty() ? "" : "; ") + s.default_text();
    }
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", flags, defs, cell(r.what), cell(r.measured),
                      cell(r.bit_exact), cell(r.on_when));
  }
  md += "\nSwitches that change output bits (each setting is still deterministic, run after run and process\n"
        "after process: `tests/e2e/determinism_test`): ";
  std::string inexact;
  for (const SwitchInfo& s : kSwitches) {
    if (s.bit_exact) continue;
    if (!inexact.empty()) inexact += ", ";
    inexact += *s.flag ? fmt::format("`--{}`", s.flag) : fmt::format("`{}`", s.qualified());
  }
  md += inexact + ". All others give the same bits at every setting.\n";
  return md + "\n" + kFooter + "\n";
}

std::string flags_text() {
  std::string t;
  for (const SwitchRecord& r : kRecords) {
    for (const SwitchInfo& s : kSwitches) {
      if (std::string_view(s.record) != r.key) continue;
      t += fmt::format("{}{}  ({})\n", *s.flag ? "--" : "", *s.flag ? s.flag : s.field, s.qualified());
      t += fmt::format("  default: {}   bit-exact: {}   {}   warm-up: {}\n", s.default_text(), s.bit_exact ? "yes" : "no",
                       s.product ? "non-default = NON-PRODUCT" : "product-neutral", warmup_name(s.warmup));
      t += fmt::format("  {}\n", s.help);
    }
    t += fmt::format("  what it does: {}\n  measured: {}\n  bit-exact: {}\n  on when: {}\n\n", cell(r.what),
                     cell(r.measured), cell(r.bit_exact), cell(r.on_when));
  }
  return t;
}

}  // namespace wgllm
