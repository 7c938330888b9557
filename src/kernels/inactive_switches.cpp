#include "kernels/inactive_switches.h"

#include "kernels/matmul_tiled.h"

namespace wgllm::kernels {

std::vector<std::string> inactive_switches(const OpContext& o) {
  std::vector<std::string> r;
  const KernelOptions& k = o.opt;
  const KernelOptions def{};
  // Why the tiled prefill matmul is off, and what turns it on: its own flag, or its adapter default
  // on a software adapter.
  const std::string tiled_off = k.matmul_tiled == 0
                                    ? "--no-matmul-tiled is given (drop it)"
                                    : "it is off by default on the software adapter '" + o.ctx.info().name +
                                          "' (add --matmul-tiled)";
  const bool tiled = matmul_tiled_enabled(o);
  const bool coop_dev = o.ctx.coop_matrix_f16();  // the cooperative-matrix form can run (--matmul-coop)
  if (k.matmul_int8 == 1 && !tiled)
    r.push_back("--matmul-int8 has no effect: it is a form of the tiled prefill matmul, and " + tiled_off);
  if (k.matmul_tiled_f16 != def.matmul_tiled_f16) {
    if (!matmul_tiled_uses_f16(o))  // (the switch is on: so the adapter lacks shader-f16)
      r.push_back("--matmul-tiled-f16 has no effect: the adapter '" + o.ctx.info().name + "' has no shader-f16");
    else if (!tiled)
      r.push_back("--matmul-tiled-f16 has no effect: it is a form of the tiled prefill matmul, and " + tiled_off);
    else if (k.matmul_coop && coop_dev)
      r.push_back("--matmul-tiled-f16 has no effect: --matmul-coop takes precedence");
    else if (on_for_gpus(o, k.matmul_int8))
      r.push_back("--matmul-tiled-f16 applies only to f16/f32 weights here: --matmul-int8 (on) takes precedence on "
                  "quantized ones (add --no-matmul-int8)");
  }
  // The cooperative-matrix form: needs the tiled matmul and the device's cooperative matrices; takes
  // precedence over int8 and f16; its tile knobs need it.
  if (k.matmul_coop) {
    if (!tiled)
      r.push_back("--matmul-coop has no effect: it is a form of the tiled prefill matmul, and " + tiled_off);
    else if (!coop_dev)
      r.push_back("--matmul-coop has no effect: the device on '" + o.ctx.info().name +
                  "' has no 16x16x16 f16 cooperative matrices (" + o.ctx.coop_matrix_status() + ")");
    else if (k.matmul_int8 == 1)
      r.push_back("--matmul-int8 has no effect: --matmul-coop takes precedence");
  }
  if ((k.matmul_coop_tile_n != def.matmul_coop_tile_n || k.matmul_coop_tile_t != def.matmul_coop_tile_t) &&
      !(k.matmul_coop && tiled && coop_dev))
    r.push_back("--matmul-coop-tile-n / -t have no effect: the cooperative-matrix kernel does not run (see --matmul-coop)");
  // The flash kernel's sub-switches set away from their defaults. Without the key split at all, the
  // split length does nothing. Under --no-attn-flash two routes still take attention_flash.wgsl:
  // --attn-chunk (on only when given: its adapter default is off), a short chunk over a long cache;
  // and the block-sparse gathered kernel (--sparse-attn with --sparse-tiled, head dims <= 128,
  // unrolled as --attn-flash-unroll says, no key split). (--attn-flash-wide-heads and
  // --attn-flash-window are on by default, so never named.)
  const bool split_tiles = k.attention_flash_split_tiles != def.attention_flash_split_tiles;
  if (split_tiles && !k.attention_prefill_split)
    r.push_back("--attn-flash-split-tiles has no effect: --no-attn-prefill-split is given");
  if (k.attention_flash == 0) {
    const bool chunk = k.attention_chunk == 1, sparse = k.sparse_attn && k.sparse_tiled;
    auto note = [&](const char* flag, bool sparse_route) {
      std::string routes = chunk ? "short chunks over a long cache (--attn-chunk)" : "";
      if (sparse_route) routes += (routes.empty() ? "" : " and ") + std::string("block-sparse prefill (--sparse-attn)");
      r.push_back(std::string(flag) + (routes.empty() ? " has no effect" : " applies only to " + routes) +
                  ": --no-attn-flash is given");
    };
    if (k.attention_flash_unroll == 1) note("--attn-flash-unroll", sparse);
    if (split_tiles && k.attention_prefill_split) note("--attn-flash-split-tiles", false);
  }
  // The lanes flash kernel's tile knobs without the kernel: --attn-flash-lanes 0, or its adapter default
  // off here (software adapters); an explicit N the adapter cannot take (subgroups narrower than N, none
  // at all) is named as well.
  const bool knobs = k.attention_flash_lanes_threads != def.attention_flash_lanes_threads ||
                     k.attention_flash_lanes_rows != def.attention_flash_lanes_rows ||
                     k.attention_flash_lanes_keys != def.attention_flash_lanes_keys;
  if (k.attention_flash_lanes == 0 && knobs)
    r.push_back("--attn-flash-lanes-threads / -rows / -keys have no effect: --attn-flash-lanes 0 is given");
  else if (k.attention_flash_lanes == kFlashLanesAuto && knobs && o.ctx.info().is_software())
    r.push_back("--attn-flash-lanes-threads / -rows / -keys have no effect: the lanes flash kernel is off by default on "
                "the software adapter '" + o.ctx.info().name + "' (add --attn-flash-lanes 8)");
  if (k.attention_flash_lanes != 0 && k.attention_flash_lanes != kFlashLanesAuto) {
    const uint32_t lo = o.ctx.has_subgroups() ? o.ctx.measured_subgroup_sizes().first : 0;
    if (lo < k.attention_flash_lanes)
      r.push_back("--attn-flash-lanes " + std::to_string(k.attention_flash_lanes) + " has no effect: the adapter '" +
                  o.ctx.info().name + "' " + (lo ? "has subgroups of " + std::to_string(lo) : std::string("has no subgroups")) +
                  " (the Q-block flash kernel runs)");
  }
  return r;
}

}  // namespace wgllm::kernels
