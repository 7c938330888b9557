#include "kernels/wgsl.h"

#include <vector>

#include "core/error.h"

namespace wgllm::kernels {

std::string_view wgsl_source(const std::string& name) {
  auto it = wgsl_sources().find(name);
  if (it == wgsl_sources().end()) throw Error("no WGSL kernel named '" + name + "'");
  return it->second;
}

std::string specialize(std::string_view src, const Defines& defs) {
  std::string out;
  std::vector<std::pair<bool, bool>> stack;  // (parent active, this branch active)
  bool active = true;
  size_t pos = 0;
  while (pos < src.size()) {
    size_t nl = src.find('\n', pos);
    if (nl == std::string_view::npos) nl = src.size();
    std::string_view line = src.substr(pos, nl - pos);
    pos = nl + 1;
    size_t s = line.find_first_not_of(" \t");
    std::string_view t = s == std::string_view::npos ? std::string_view{} : line.substr(s);
    if (t.rfind("#if ", 0) == 0) {
      std::string name(t.substr(4));
      while (!name.empty() && (name.back() == ' ' || name.back() == '\r')) name.pop_back();
      auto it = defs.find(name);
      bool v = it != defs.end() && it->second != "0";
      stack.push_back({active, v});
      active = active && v;
      continue;
    }
    if (t.rfind("#else", 0) == 0) {
      if (stack.empty()) throw Error("WGSL: #else without #if");
      stack.back().second = !stack.back().second;
      active = stack.back().first && stack.back().second;
      continue;
    }
    if (t.rfind("#endif", 0) == 0) {
      if (stack.empty()) throw Error("WGSL: #endif without #if");
      active = stack.back().first;
      stack.pop_back();
      continue;
    }
    if (!active) continue;
    if (t.rfind("#include ", 0) == 0) {
      std::string name(t.substr(9));
      while (!name.empty() && (name.back() == ' ' || name.back() == '\r')) name.pop_back();
      out += specialize(wgsl_source(name), defs);
      continue;
    }
    std::string l(line);
    for (size_t b; (b = l.find("{{")) != std::string::npos;) {
      size_t e = l.find("}}", b);
      if (e == std::string::npos) throw Error("WGSL: unterminated {{");
      std::string name = l.substr(b + 2, e - b - 2);
      auto it = defs.find(name);
      if (it == defs.end()) throw Error("WGSL: no value for {{" + name + "}}");
      l.replace(b, e + 2 - b, it->second);
    }
    out += l;
    out += '\n';
  }
  if (!stack.empty()) throw Error("WGSL: #if without #endif");
  return out;
}

std::string variant_key(const std::string& name, const Defines& defs) {
  std::string k = name + "[";
  bool first = true;
  for (auto& [n, v] : defs) {
    if (!first) k += ",";
    k += n + "=" + v;
    first = false;
  }
  return k + "]";
}

}  // namespace wgllm::kernels
