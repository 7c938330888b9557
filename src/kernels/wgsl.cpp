#include "kernels/wgsl.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/error.h"

namespace wgllm::kernels {

std::string_view wgsl_source(const std::string& name) {
  auto it = wgsl_sources().find(name);
  if (it == wgsl_sources().end()) throw Error("no WGSL kernel named '" + name + "'");
  return it->second;
}

bool DeclaredDefines::declares(const std::string& n) const {
  if (required.count(n) || optional.count(n)) return true;
  for (const auto& g : one_hot)
    if (std::find(g.begin(), g.end(), n) != g.end()) return true;
  return false;
}

namespace {

constexpr std::string_view kDeclPrefix = "// defines:";

// Lines of `src` without their '\n' (and a trailing '\r').
std::vector<std::string_view> lines_of(std::string_view src) {
  std::vector<std::string_view> out;
  for (size_t pos = 0; pos < src.size();) {
    size_t nl = src.find('\n', pos);
    if (nl == std::string_view::npos) nl = src.size();
    std::string_view l = src.substr(pos, nl - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    out.push_back(l);
    pos = nl + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") + 1 - b);
}

// True for a directive line `<dir>ARG` (`#if NAME`, `#include NAME`, `#else`), with arg = ARG.
bool directive(std::string_view line, std::string_view dir, std::string& arg) {
  std::string_view t = trim(line);
  if (t.substr(0, dir.size()) != dir) return false;
  arg = std::string(trim(t.substr(dir.size())));
  return true;
}

[[noreturn]] void fail(const std::string& file, const std::string& msg) {
  throw Error("WGSL " + file + ".wgsl: " + msg + " (declarations: kernels/wgsl.h)");
}

bool valid_name(std::string_view n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// The file's own first-line declaration, added to d.
void parse_own(const std::string& file, std::string_view src, DeclaredDefines& d) {
  const std::string_view first = lines_of(src.substr(0, src.find('\n'))).front();
  if (first.substr(0, kDeclPrefix.size()) != kDeclPrefix)
    fail(file, "the first line must declare the variant defines: `// defines: NAME ...` or `// defines: none`");
  std::vector<std::string> toks;
  for (std::string_view rest = first.substr(kDeclPrefix.size()); !(rest = trim(rest)).empty();) {
    const size_t e = std::min(rest.find_first_of(" \t"), rest.size());
    toks.emplace_back(rest.substr(0, e));
    rest = rest.substr(e);
  }
  if (toks.size() == 1 && toks[0] == "none") return;
  if (toks.empty()) fail(file, "empty `// defines:` line (write `// defines: none`)");
  for (const std::string& t : toks) {
    if (t.find('|') != std::string::npos) {
      std::vector<std::string> g;
      for (size_t b = 0;;) {
        const size_t e = std::min(t.find('|', b), t.size());
        g.push_back(t.substr(b, e - b));
        if (!valid_name(g.back())) fail(file, "malformed define '" + g.back() + "' in group '" + t + "'");
        if (e == t.size()) break;
        b = e + 1;
      }
      if (std::find(d.one_hot.begin(), d.one_hot.end(), g) == d.one_hot.end()) d.one_hot.push_back(g);
    } else if (t.back() == '?') {
      if (!valid_name(std::string_view(t).substr(0, t.size() - 1))) fail(file, "malformed define '" + t + "'");
      d.optional.insert(t.substr(0, t.size() - 1));
    } else {
      if (!valid_name(t)) fail(file, "malformed define '" + t + "'");
      d.required.insert(t);
    }
  }
}

void collect(const std::string& file, std::string_view src, DeclaredDefines& d, std::set<std::string>& seen) {
  if (!seen.insert(file).second) return;
  parse_own(file, src, d);
  std::string inc;
  for (std::string_view l : lines_of(src)) {
    if (directive(l, "#include ", inc)) collect(inc, wgsl_source(inc), d, seen);
    if (directive(l, "#if ", inc)) d.flags.insert(inc);
  }
}

std::string names(const DeclaredDefines& d) {
  std::string s;
  for (const auto& n : d.required) s += " " + n;
  for (const auto& n : d.optional) s += " " + n + "?";
  for (const auto& g : d.one_hot) {
    s += " ";
    for (size_t i = 0; i < g.size(); ++i) s += (i ? "|" : "") + g[i];
  }
  return s.empty() ? " none" : s;
}

void check_defs(const std::string& name, const DeclaredDefines& d, const Defines& defs) {
  for (const auto& [k, v] : defs)
    if (!d.declares(k)) fail(name, "unknown define '" + k + "' (misspelled? declared:" + names(d) + ")");
  for (const auto& r : d.required)
    if (!defs.count(r)) fail(name, "missing define '" + r + "'");
  for (const auto& [k, v] : defs)
    if (d.flags.count(k) && v != "0" && v != "1") fail(name, "flag '" + k + "' must be 0 or 1, not '" + v + "'");
  for (const auto& g : d.one_hot) {
    int ones = 0;
    for (const auto& n : g) {
      auto it = defs.find(n);
      if (it == defs.end()) continue;
      if (it->second != "0" && it->second != "1") fail(name, "flag '" + n + "' must be 0 or 1, not '" + it->second + "'");
      ones += it->second == "1";
    }
    if (ones != 1) fail(name, "exactly one of the group '" + g.front() + "|...' must be 1, got " + std::to_string(ones));
  }
}

// Expands `file` (the kernel, or a file it includes) into out.
void expand(const std::string& kernel, const std::string& file, std::string_view src, const Defines& defs,
            const DeclaredDefines& d, std::string& out) {
  auto fail = [&](const std::string& msg) {
    kernels::fail(file == kernel ? kernel : kernel + ".wgsl, in " + file, msg);
  };
  std::vector<std::pair<bool, bool>> stack;  // (parent active, this branch active)
  bool active = true;
  std::string arg;
  for (std::string_view line : lines_of(src)) {
    if (directive(line, "#if ", arg)) {
      if (!d.declares(arg)) fail("`#if " + arg + "` on an undeclared define");
      if (d.optional.count(arg) && !d.required.count(arg)) fail("`#if " + arg + "` on an optional (value) define");
      auto it = defs.find(arg);
      if (it != defs.end() && it->second != "0" && it->second != "1")
        fail("flag '" + arg + "' must be 0 or 1, not '" + it->second + "'");
      const bool v = it != defs.end() && it->second == "1";
      stack.push_back({active, v});
      active = active && v;
      continue;
    }
    if (directive(line, "#else", arg)) {
      if (stack.empty()) fail("#else without #if");
      stack.back().second = !stack.back().second;
      active = stack.back().first && stack.back().second;
      continue;
    }
    if (directive(line, "#endif", arg)) {
      if (stack.empty()) fail("#endif without #if");
      active = stack.back().first;
      stack.pop_back();
      continue;
    }
    if (!active) continue;
    if (directive(line, "#include ", arg)) {
      expand(kernel, arg, wgsl_source(arg), defs, d, out);
      continue;
    }
    std::string l(line);
    for (size_t b; (b = l.find("{{")) != std::string::npos;) {
      size_t e = l.find("}}", b);
      if (e == std::string::npos) fail("unterminated {{");
      std::string n = l.substr(b + 2, e - b - 2);
      if (!d.declares(n)) fail("{{" + n + "}} on an undeclared define");
      auto it = defs.find(n);
      if (it == defs.end()) fail("no value for {{" + n + "}} (optional define '" + n + "' not given)");
      l.replace(b, e + 2 - b, it->second);
    }
    out += l;
    out += '\n';
  }
  if (!stack.empty()) fail("#if without #endif");
}

}  // namespace

DeclaredDefines declared_defines(const std::string& name, std::string_view src) {
  DeclaredDefines d;
  std::set<std::string> seen;
  collect(name, src, d, seen);
  for (const auto& r : d.required) d.optional.erase(r);  // required by one file wins
  return d;
}

DeclaredDefines declared_defines(const std::string& name) { return declared_defines(name, wgsl_source(name)); }

std::string specialize(const std::string& name, std::string_view src, const Defines& defs) {
  const DeclaredDefines d = declared_defines(name, src);
  check_defs(name, d, defs);
  std::string out;
  expand(name, name, src, defs, d, out);
  return out;
}

std::string specialize(const std::string& name, const Defines& defs) {
  return specialize(name, wgsl_source(name), defs);
}

std::vector<std::string> wgsl_declaration_problems(const std::string& name) {
  std::vector<std::string> out;
  const std::string file = name + ".wgsl: ";
  DeclaredDefines d, own;
  try {
    d = declared_defines(name);
    parse_own(name, wgsl_source(name), own);
  } catch (const Error& e) {
    return {e.what()};
  }
  std::set<std::string> used_if, used;
  std::string arg;
  for (std::string_view l : lines_of(wgsl_source(name))) {
    if (directive(l, "#if ", arg)) used_if.insert(arg);
    for (size_t b = 0; (b = l.find("{{", b)) != std::string_view::npos; b += 2) {
      const size_t e = l.find("}}", b);
      if (e == std::string_view::npos) break;
      used.insert(std::string(l.substr(b + 2, e - b - 2)));
    }
  }
  used.insert(used_if.begin(), used_if.end());
  for (const auto& n : used)
    if (!d.declares(n)) out.push_back(file + "uses '" + n + "', which no `// defines:` line declares");
  for (const auto& n : used_if)
    if (d.optional.count(n)) out.push_back(file + "`#if " + n + "` on an optional (value) define");
  std::vector<std::string> own_names(own.required.begin(), own.required.end());
  own_names.insert(own_names.end(), own.optional.begin(), own.optional.end());
  for (const auto& g : own.one_hot) own_names.insert(own_names.end(), g.begin(), g.end());
  for (const auto& n : own_names)
    if (!used.count(n)) out.push_back(file + "declares '" + n + "' but never uses it");
  return out;
}

// Called for every recorded dispatch: one allocation and plain copies (in the browser build each
// string append that may throw is a JS exception trampoline, src/gpu/web/glue.js).
std::string variant_key(const std::string& name, const Defines& defs) {
  size_t n = name.size() + 2 + (defs.empty() ? 0 : defs.size() - 1);  // name[...], commas between defines
  for (const auto& [d, v] : defs) n += d.size() + 1 + v.size();
  std::string k(n, '\0');
  char* p = k.data();
  auto put = [&p](const std::string& s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  put(name);
  *p++ = '[';
  bool first = true;
  for (const auto& [d, v] : defs) {
    if (!first) *p++ = ',';
    put(d);
    *p++ = '=';
    put(v);
    first = false;
  }
  *p++ = ']';
  return k;
}

void replace_marker(std::string& src, const std::string& name, const std::string& marker, const std::string& with) {
  const size_t at = src.find(marker);
  if (at == std::string::npos) throw Error(name + ".wgsl: no " + marker);
  src.replace(at, marker.size(), with);
}

}  // namespace wgllm::kernels
