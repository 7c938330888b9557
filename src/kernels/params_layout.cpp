#include "kernels/params_layout.h"

#include <algorithm>
#include <tuple>

#include "core/error.h"

namespace wgllm::kernels {

std::vector<ParamsLayout> all_params_layouts() {
  std::vector<ParamsLayout> all;
  for (auto f : {ops_params_layouts, gdn_ops_params_layouts, sparse_attention_params_layouts, matmul_tiled_params_layouts,
                 nll_params_layouts, bandwidth_probe_params_layouts, dispatch_probe_params_layouts})
    for (auto& l : f()) all.push_back(std::move(l));
  return all;
}

namespace {

struct WgslField {
  std::string name, type;
  uint32_t offset = 0, size = 0, align = 0;
};

std::string trim(std::string s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t\r\n") + 1 - b);
}

// Size and alignment of a WGSL scalar or vector type in the uniform address space (WGSL spec,
// "Alignment and Size"); {0, 0} for the types parameter blocks do not use.
std::pair<uint32_t, uint32_t> size_align(const std::string& t) {
  if (t == "u32" || t == "i32" || t == "f32") return {4, 4};
  for (const char* v : {"vec2", "vec3", "vec4"}) {
    const std::string p(v);
    if (t.rfind(p, 0) != 0) continue;
    const std::string e = t.substr(4);
    if (e != "u" && e != "i" && e != "f" && e != "<u32>" && e != "<i32>" && e != "<f32>") return {0, 0};
    const uint32_t n = v[3] - '0';
    return {4 * n, n == 2 ? 8u : 16u};
  }
  return {0, 0};
}

// The fields of the first `struct P { ... }` in `src` with their uniform-layout offsets; `size`:
// the struct's size (the end rounded up to its alignment).
std::vector<WgslField> parse_struct_p(const std::string& src, uint32_t& size, std::vector<std::string>& problems) {
  std::vector<WgslField> out;
  size_t b = std::string::npos;
  for (size_t s = src.find("struct P"); s != std::string::npos; s = src.find("struct P", s + 1))
    if (trim(src.substr(s + 8, src.find('{', s) - s - 8)).empty()) {
      b = src.find('{', s);
      break;
    }
  if (b == std::string::npos) {
    problems.push_back("no `struct P { ... }`");
    return out;
  }
  const size_t e = src.find('}', b);
  std::string body;
  for (size_t p = b + 1; p < e;) {  // drop // comments
    size_t nl = std::min(src.find('\n', p), e);
    std::string l = src.substr(p, nl - p);
    body += l.substr(0, l.find("//")) + " ";
    p = nl + 1;
  }
  uint32_t off = 0, max_align = 4;
  for (size_t p = 0; p <= body.size();) {
    size_t c = std::min(body.find(',', p), body.size());
    const std::string item = trim(body.substr(p, c - p));
    p = c + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    WgslField f;
    f.name = trim(item.substr(0, colon));
    f.type = colon == std::string::npos ? "" : trim(item.substr(colon + 1));
    std::tie(f.size, f.align) = size_align(f.type);
    if (!f.size) {
      problems.push_back("WGSL field '" + item + "': not a u32/i32/f32 scalar or vector");
      continue;
    }
    off = (off + f.align - 1) / f.align * f.align;
    f.offset = off;
    off += f.size;
    max_align = std::max(max_align, f.align);
    out.push_back(f);
  }
  size = (off + max_align - 1) / max_align * max_align;
  return out;
}

// Any valid defines for kernel `name` that keep `fixed`: other flags 0, values 1, a one-hot
// group's first member.
Defines any_variant(const std::string& name, const Defines& fixed) {
  const DeclaredDefines d = declared_defines(name);
  Defines defs;
  for (const auto& r : d.required) defs[r] = std::string(1, d.flags.count(r) ? '0' : '1');
  for (const auto& o : d.optional) defs[o] = std::string(1, '1');
  for (const auto& g : d.one_hot) {
    if (std::none_of(g.begin(), g.end(), [&](const std::string& n) { return fixed.count(n); })) defs[g.front()] = std::string(1, '1');
  }
  for (const auto& [k, v] : fixed) defs[k] = v;
  return defs;
}

}  // namespace

std::vector<std::string> params_layout_problems(const ParamsLayout& l) {
  std::vector<std::string> out;
  const std::string where = l.cpp_struct + " vs " + variant_key(l.kernel, l.defines) + " struct P: ";
  auto problem = [&](const std::string& m) { out.push_back(where + m); };
  // The C++ list covers the struct: consecutive, no gap or overlap, ends at sizeof.
  uint32_t end = 0;
  for (const auto& f : l.fields) {
    if (f.offset != end) problem("C++ field '" + std::string(f.name) + "' at byte " + std::to_string(f.offset) + ", expected " +
                                 std::to_string(end) + " (field list out of order or incomplete?)");
    end = f.offset + f.size;
  }
  if (end != l.size) problem("C++ fields end at byte " + std::to_string(end) + ", sizeof is " + std::to_string(l.size));
  std::string src;
  try {
    src = specialize(l.kernel, any_variant(l.kernel, l.defines));
  } catch (const Error& e) {
    problem(e.what());
    return out;
  }
  std::vector<std::string> parse;
  uint32_t wsize = 0;
  const std::vector<WgslField> w = parse_struct_p(src, wsize, parse);
  for (const auto& p : parse) problem(p);
  const size_t n = std::min(w.size(), l.fields.size());
  for (size_t i = 0; i < n; ++i) {
    const ParamField& c = l.fields[i];
    const WgslField& g = w[i];
    if (c.name != g.name || c.type != g.type || c.offset != g.offset)
      problem("field " + std::to_string(i) + ": C++ " + std::string(c.name) + ": " + std::string(c.type) + " @" +
              std::to_string(c.offset) + ", WGSL " + g.name + ": " + g.type + " @" + std::to_string(g.offset));
  }
  for (size_t i = n; i < w.size(); ++i) problem("C++ lacks WGSL field " + std::to_string(i) + " '" + w[i].name + "'");
  for (size_t i = n; i < l.fields.size(); ++i)
    if (l.fields[i].name.rfind("pad", 0) != 0)
      problem("C++ field '" + std::string(l.fields[i].name) + "' beyond WGSL's last field (only pad* fields may follow)");
  if (l.size < wsize) problem("C++ sizeof " + std::to_string(l.size) + " < WGSL size " + std::to_string(wsize));
  return out;
}

}  // namespace wgllm::kernels
