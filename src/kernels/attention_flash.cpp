// The flash attention kernels' register code, generated: attention_flash.wgsl's register tile
// (attention_flash_wgsl in ops.h, UNROLL 1) and attention_flash_sg.wgsl's per-lane rows
// (attention_flash_sg_wgsl, always generated).
// The kernel's loops over private arrays (scores, accumulators, row statistics) are written out over named
// variables: drivers keep a private array indexed in a loop they do not unroll in scratch memory
// (naga bounds every loop with a counter, which can keep them from unrolling; matmul_tiled.cpp
// does the same for its tile). Each variable sees the same operations in the same order as the
// loop form it replaced, so the results are the same bits.
#include <string>

#include "core/error.h"
#include "kernels/ops.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {

namespace {

std::string u(uint32_t v) { return std::to_string(v) + "u"; }
std::string n(const char* pre, uint32_t a) { return std::string(pre) + "_" + std::to_string(a); }
std::string n(const char* pre, uint32_t a, uint32_t b) { return n(pre, a) + "_" + std::to_string(b); }

// Both flash kernels' outputs (attention_flash_out.wgsl's store_stats / store_out): per live row R of
// the thread, lane tx == 0 writes the split statistics (m_R, lsum_R), every lane its RD vec4 acc_R_C at
// columns tx + TX * C.
std::string store_rows(uint32_t rm, uint32_t rd) {
  std::string end;
  for (uint32_t r = 0; r < rm; ++r) {
    end += "if (" + n("live", r) + ") {\n    let i = i0 + r0 + " + u(r) + ";\n    if (tx == 0u) { store_stats(i, hk, G, wid.z, " +
           n("m", r) + ", " + n("lsum", r) + "); }\n    ";
    for (uint32_t c = 0; c < rd; ++c)
      end += "store_out(i, hk, G, wid.z, tx + TX * " + u(c) + ", " + n("acc", r, c) + ", " + n("lsum", r) + ");\n    ";
    end += "}\n  ";
  }
  return end;
}

// attention_flash.wgsl with the register tile's markers replaced by straight-line code.
std::string unrolled_source(const FlashTile& t, uint32_t HD, bool window) {
  const uint32_t rm = t.rm, rn = t.bc / t.tx, rd = HD / 4 / t.tx;
  constexpr uint32_t kCU = 4, kJU = 4;  // CU and JU of attention_flash.wgsl
  if (rm != 2 && rm != 4) throw Error("attention_flash: rows per thread must be 2 or 4");
  if (t.tx == 0 || t.bc % t.tx || (HD / 4) % t.tx || rd == 0 || (HD / 4) % kCU || t.bc % kJU)
    throw Error("attention_flash: tile " + std::to_string(t.br) + " x " + std::to_string(t.bc) + " does not cover head dim " +
                std::to_string(HD));
  const char* lane = "xyzw";
  std::string decl, sdecl, step, mask, soft, scale, pv, end;
  for (uint32_t r = 0; r < rm; ++r) {
    decl += "let " + n("live", r) + " = r0 + " + u(r) + " < n_rows; let " + n("last", r) + " = p.pos0 + (i0 + r0 + " + u(r) +
            ") / G; var " + n("m", r) + " = NEG; var " + n("lsum", r) + " = 0.0;\n  ";
    for (uint32_t c = 0; c < rd; ++c) decl += "var " + n("acc", r, c) + " = vec4<f32>(0.0); ";
    decl += "\n  ";
    for (uint32_t k = 0; k < rn; ++k) sdecl += "var " + n("s", r, k) + " = 0.0; ";
  }
  // Scores: CU head-dim vec4s per step; s_R_U += q_R . k_U, components x, y, z, w in order.
  for (uint32_t cc = 0; cc < kCU; ++cc) {
    step += "{\n        let cq = c + " + u(cc) + ";\n        ";
    for (uint32_t r = 0; r < rm; ++r) step += "let " + n("q", r) + " = qs[(r0 + " + u(r) + ") * HS + cq]; ";
    step += "\n        ";
    for (uint32_t k = 0; k < rn; ++k) step += "let " + n("k", k) + " = ks[(tx + TX * " + u(k) + ") * HS + cq]; ";
    step += "\n        ";
    for (uint32_t k = 0; k < rn; ++k)
      for (uint32_t r = 0; r < rm; ++r) {
        const std::string s = n("s", r, k), q = n("q", r), kk = n("k", k);
        step += s + " = fma(" + q + ".w, " + kk + ".w, fma(" + q + ".z, " + kk + ".z, fma(" + q + ".y, " + kk + ".y, fma(" + q +
                ".x, " + kk + ".x, " + s + "))));\n        ";
      }
    step += "}\n      ";
  }
  // Mask: cache row of each key (0xFFFFFFFF: none), masked scores -> NEG, row maxes -> pm.
  for (uint32_t k = 0; k < rn; ++k) {
    const std::string j = n("j", k), jr = n("jr", k);
    mask += "let " + j + " = kb + tx + TX * " + u(k) + ";\n#if GATHER\n    var " + jr + " = 0xFFFFFFFFu; if (" + j +
            " < k_end) { " + jr + " = key_row(" + j + ", ib); }\n#else\n    var " + jr + " = " + j + "; if (" + j +
            " >= k_end) { " + jr + " = 0xFFFFFFFFu; }\n#endif\n    ";
  }
  for (uint32_t r = 0; r < rm; ++r) {
    mask += "var " + n("mx", r) + " = NEG;\n    ";
    for (uint32_t k = 0; k < rn; ++k) {
      const std::string s = n("s", r, k), jr = n("jr", k);
      // WINDOW: the key is inside the row's sliding window too (the loop form's `seen`).
      const std::string seen = window ? " && " + jr + " + p.window > " + n("last", r) : "";
      mask += "if (" + n("live", r) + " && " + jr + " != 0xFFFFFFFFu && " + jr + " <= " + n("last", r) + seen + ") { " + s +
              " = " + s + " * p.scale; } else { " + s + " = NEG; }\n    " + n("mx", r) + " = max(" + n("mx", r) + ", " + s +
              ");\n    ";
    }
    mask += "pm[(r0 + " + u(r) + ") * TX + tx] = " + n("mx", r) + ";\n    ";
  }
  // Online softmax.
  for (uint32_t r = 0; r < rm; ++r) {
    const std::string m = n("m", r), nm = n("nm", r);
    soft += "var " + nm + " = " + m + ";\n    for (var w = 0u; w < TX; w++) { " + nm + " = max(" + nm + ", pm[(r0 + " + u(r) +
            ") * TX + w]); }\n    let " + n("corr", r) + " = exp(" + m + " - " + nm + ");\n    " + m + " = " + nm + ";\n    ";
  }
  soft += "var su = RV(0.0);\n    ";
  for (uint32_t k = 0; k < rn; ++k) {
    soft += "{\n      var pv = RV(0.0);\n      ";
    for (uint32_t r = 0; r < rm; ++r) {
      const std::string s = n("s", r, k);
      soft += "if (" + s + " > NEG) { pv." + lane[r] + " = exp(" + s + " - " + n("m", r) + "); }\n      ";
    }
    soft += "pt[(tx + TX * " + u(k) + ") * PS + ty] = pv;\n      su += pv;\n    }\n    ";
  }
  for (uint32_t r = 0; r < rm; ++r)
    soft += n("lsum", r) + " = " + n("lsum", r) + " * " + n("corr", r) + " + su." + lane[r] + ";\n    ";
  // PV: JU keys per step.
  for (uint32_t r = 0; r < rm; ++r)
    for (uint32_t c = 0; c < rd; ++c) scale += n("acc", r, c) + " = " + n("acc", r, c) + " * " + n("corr", r) + "; ";
  for (uint32_t jj = 0; jj < kJU; ++jj) {
    pv += "{\n        let pv = pt[(j + " + u(jj) + ") * PS + ty];\n        ";
    for (uint32_t c = 0; c < rd; ++c) pv += "let " + n("v", c) + " = vrow((j + " + u(jj) + ") * HS + tx + TX * " + u(c) + "); ";
    pv += "\n        ";
    for (uint32_t c = 0; c < rd; ++c)
      for (uint32_t r = 0; r < rm; ++r) {
        const std::string a = n("acc", r, c);
        pv += a + " = fma(vec4<f32>(pv." + lane[r] + "), " + n("v", c) + ", " + a + ");\n        ";
      }
    pv += "}\n      ";
  }
  // End: row sums (TX partials in tx order), then the outputs.
  for (uint32_t r = 0; r < rm; ++r) end += "pm[(r0 + " + u(r) + ") * TX + tx] = " + n("lsum", r) + ";\n  ";
  end += "workgroupBarrier();\n  ";
  for (uint32_t r = 0; r < rm; ++r)
    end += "{\n    var su = 0.0;\n    for (var w = 0u; w < TX; w++) { su += pm[(r0 + " + u(r) + ") * TX + w]; }\n    " +
           n("lsum", r) + " = su;\n  }\n  ";
  end += store_rows(rm, rd);
  std::string src(wgsl_source("attention_flash"));
  replace_marker(src, "attention_flash", "/*FLASH_DECL*/", decl);
  replace_marker(src, "attention_flash", "/*FLASH_SCORE_DECL*/", sdecl);
  replace_marker(src, "attention_flash", "/*FLASH_SCORE_STEP*/", step);
  replace_marker(src, "attention_flash", "/*FLASH_MASK*/", mask);
  replace_marker(src, "attention_flash", "/*FLASH_SOFTMAX*/", soft);
  replace_marker(src, "attention_flash", "/*FLASH_PV_SCALE*/", scale);
  replace_marker(src, "attention_flash", "/*FLASH_PV_STEP*/", pv);
  replace_marker(src, "attention_flash", "/*FLASH_END*/", end);
  return src;
}

// attention_flash_sg.wgsl with its markers replaced by straight-line code over named variables for
// lanes tile t (RD = HD / 4 / TX vec4 per row and thread, JK keys per softmax group).
std::string lanes_source(const FlashTile& t, uint32_t HD, bool window) {
  const uint32_t rm = t.rm, rd = HD / 4 / t.tx, jk = t.jk;
  if (!t.lanes || rm == 0 || rd == 0 || (HD / 4) % t.tx || jk == 0 || t.bc % jk)
    throw Error("attention_flash_sg: tile " + std::to_string(t.br) + " x " + std::to_string(t.bc) + " (" +
                std::to_string(t.tx) + " lanes, " + std::to_string(jk) + "-key groups) does not cover head dim " +
                std::to_string(HD));
  std::string decl, grp, end;
  for (uint32_t r = 0; r < rm; ++r) {
    decl += "let " + n("live", r) + " = r0 + " + u(r) + " < n_rows; let " + n("last", r) + " = p.pos0 + (i0 + r0 + " + u(r) +
            ") / G; var " + n("m", r) + " = NEG; var " + n("lsum", r) + " = 0.0;\n  ";
    for (uint32_t c = 0; c < rd; ++c)
      decl += "let " + n("q", r, c) + " = q_vec(i0 + r0 + " + u(r) + ", " + n("live", r) + ", hk, G, tx + TX * " + u(c) +
              "); var " + n("acc", r, c) + " = vec4<f32>(0.0);\n  ";
  }
  // 1. Partial scores over the thread's dims (c ascending, x..w), summed over the row's lanes.
  for (uint32_t r = 0; r < rm; ++r)
    for (uint32_t k = 0; k < jk; ++k) grp += "var " + n("d", r, k) + " = 0.0; ";
  grp += "\n      ";
  for (uint32_t c = 0; c < rd; ++c) {
    grp += "{\n        ";
    for (uint32_t k = 0; k < jk; ++k) grp += "let " + n("k", k) + " = ks[(j + " + u(k) + ") * HS + tx + TX * " + u(c) + "]; ";
    grp += "\n        ";
    for (uint32_t k = 0; k < jk; ++k)
      for (uint32_t r = 0; r < rm; ++r) {
        const std::string d = n("d", r, k), q = n("q", r, c), kk = n("k", k);
        grp += d + " = fma(" + q + ".w, " + kk + ".w, fma(" + q + ".z, " + kk + ".z, fma(" + q + ".y, " + kk + ".y, fma(" + q +
               ".x, " + kk + ".x, " + d + "))));\n        ";
      }
    grp += "}\n      ";
  }
  for (uint32_t off = 1; off < t.tx; off *= 2)
    for (uint32_t r = 0; r < rm; ++r)
      for (uint32_t k = 0; k < jk; ++k)
        grp += n("d", r, k) + " = " + n("d", r, k) + " + subgroupShuffleXor(" + n("d", r, k) + ", " + u(off) + ");\n      ";
  // Mask and scale; 2. online softmax per row; 3. PV.
  for (uint32_t k = 0; k < jk; ++k) grp += "let " + n("jr", k) + " = kb + j + " + u(k) + ";\n      ";
  for (uint32_t r = 0; r < rm; ++r) {
    const std::string m = n("m", r), mx = n("mx", r), corr = n("corr", r), ls = n("lsum", r);
    for (uint32_t k = 0; k < jk; ++k) {
      const std::string s = n("s", r, k), jr = n("jr", k);
      // WINDOW: the key is inside the row's sliding window too.
      const std::string seen = window ? " && " + jr + " + p.window > " + n("last", r) : "";
      grp += "var " + s + " = NEG; if (" + n("live", r) + " && " + jr + " < k_end && " + jr + " <= " + n("last", r) + seen +
             ") { " + s + " = " + n("d", r, k) + " * p.scale; }\n      ";
    }
    grp += "var " + mx + " = " + m + ";\n      ";
    for (uint32_t k = 0; k < jk; ++k) grp += mx + " = max(" + mx + ", " + n("s", r, k) + "); ";
    grp += "\n      let " + corr + " = exp(" + m + " - " + mx + ");\n      " + m + " = " + mx + ";\n      ";
    std::string sum;
    for (uint32_t k = 0; k < jk; ++k) {
      const std::string pp = n("p", r, k), s = n("s", r, k);
      grp += "var " + pp + " = 0.0; if (" + s + " > NEG) { " + pp + " = exp(" + s + " - " + m + "); }\n      ";
      sum = k == 0 ? pp : "(" + sum + " + " + pp + ")";
    }
    grp += ls + " = " + ls + " * " + corr + " + " + sum + ";\n      ";
    for (uint32_t c = 0; c < rd; ++c) grp += n("acc", r, c) + " = " + n("acc", r, c) + " * " + corr + "; ";
    grp += "\n      ";
  }
  for (uint32_t k = 0; k < jk; ++k) {
    grp += "{\n        ";
    for (uint32_t c = 0; c < rd; ++c) grp += "let " + n("v", c) + " = vs[(j + " + u(k) + ") * HS + tx + TX * " + u(c) + "]; ";
    grp += "\n        ";
    for (uint32_t c = 0; c < rd; ++c)
      for (uint32_t r = 0; r < rm; ++r) {
        const std::string a = n("acc", r, c);
        grp += a + " = fma(vec4<f32>(" + n("p", r, k) + "), " + n("v", c) + ", " + a + ");\n        ";
      }
    grp += "}\n      ";
  }
  // Outputs: every lane of a row holds its lsum; lane 0 writes the split statistics.
  end += store_rows(rm, rd);
  std::string src(wgsl_source("attention_flash_sg"));
  replace_marker(src, "attention_flash_sg", "/*SG_DECL*/", decl);
  replace_marker(src, "attention_flash_sg", "/*SG_GROUP*/", grp);
  replace_marker(src, "attention_flash_sg", "/*SG_END*/", end);
  return src;
}

}  // namespace

std::string attention_flash_wgsl(const FlashTile& t, uint32_t HD, const Defines& d) {
  const auto unroll = d.find("UNROLL");
  if (unroll != d.end() && unroll->second == "1") {
    const auto w = d.find("WINDOW");
    return specialize("attention_flash", unrolled_source(t, HD, w != d.end() && w->second == "1"), d);
  }
  return specialize("attention_flash", d);
}

std::string attention_flash_sg_wgsl(const FlashTile& t, uint32_t HD, const Defines& d) {
  const auto w = d.find("WINDOW");
  return specialize("attention_flash_sg", lanes_source(t, HD, w != d.end() && w->second == "1"), d);
}

}  // namespace wgllm::kernels
