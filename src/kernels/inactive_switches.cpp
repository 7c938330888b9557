#include "kernels/inactive_switches.h"

#include "kernels/matmul_tiled.h"

namespace wgllm::kernels {

std::vector<std::string> inactive_switches(const OpContext& o) {
  std::vector<std::string> r;
  const KernelOptions& k = o.opt;
  const KernelOptions def{};
  // Why the tiled prefill matmul is off: its own flag, or its adapter default on a software adapter.
  const std::string tiled_off = k.matmul_tiled == 0
                                    ? "--no-matmul-tiled is given"
                                    : "it is off by default on the software adapter '" + o.ctx.info().name + "'";
  const bool tiled = matmul_tiled_enabled(o);
  if (k.matmul_int8 == 1 && !tiled)
    r.push_back("--matmul-int8 has no effect: it is a form of the tiled prefill matmul, and " + tiled_off +
                " (add --matmul-tiled)");
  if (k.matmul_tiled_f16) {
    if (!o.ctx.has_feature(WGPUFeatureName_ShaderF16))
      r.push_back("--matmul-tiled-f16 has no effect: the adapter '" + o.ctx.info().name + "' has no shader-f16");
    else if (!tiled)
      r.push_back("--matmul-tiled-f16 has no effect: it is a form of the tiled prefill matmul, and " + tiled_off +
                  " (add --matmul-tiled)");
    else if (on_for_gpus(o, k.matmul_int8))
      r.push_back("--matmul-tiled-f16 applies only to f16/f32 weights here: --matmul-int8 (on) takes precedence on "
                  "quantized ones (add --no-matmul-int8)");
  }
  if (k.attention_flash == 0) {
    // The flash kernel's sub-switches; --attn-chunk (on only when given: its adapter default is off)
    // takes the flash kernel whatever --attn-flash says, so these still shape a short chunk's
    // attention over a long cache there (never a windowed layer's).
    auto note = [&](bool set, const char* flag, bool chunk) {
      if (set)
        r.push_back(std::string(flag) + (chunk ? " applies only to short chunks over a long cache (--attn-chunk): "
                                               : " has no effect: ") +
                    "--no-attn-flash is given");
    };
    const bool chunk = k.attention_chunk == 1;
    note(k.attention_flash_wide, "--attn-flash-wide-heads", chunk);
    note(k.attention_flash_window, "--attn-flash-window", false);
    note(k.attention_flash_unroll == 1, "--attn-flash-unroll", chunk);
    note(k.attention_flash_split_tiles != def.attention_flash_split_tiles, "--attn-flash-split-tiles", chunk);
  }
  return r;
}

}  // namespace wgllm::kernels
