// The switch table (kernels/switches.def) as data: one SwitchInfo per performance switch, with
// accessors on ModelOptions for the kernel- and model-level ones, the decision records
// (switch_records.inc), and the two renderings of both: `wgllm flags` (text) and docs/FLAGS.md
// (Markdown; a test keeps the file in sync).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/model.h"

namespace wgllm {

enum class SwitchScope { Kernel, Model, App, Session, Web };  // the struct that holds the field
enum class SwitchKind { Bool, Tri, Int, Pow2 };                // see kernels/switches.def
/// The warm-up forward that compiles the kernel variants a switch selects (runtime/warmup.h).
enum class SwitchWarmup { None, Prefill, Decode, Split, Switched };

struct SwitchInfo {
  const char* field;  // member name in its struct
  SwitchScope scope;
  SwitchKind kind;
  int64_t def, lo, hi;  // default (may be an "auto" sentinel outside [lo, hi]); CLI range
  const char* flag;     // CLI name without dashes; "" = no CLI flag
  bool bit_exact;       // both settings give the same output bits
  bool product;         // a non-default value makes a bench run NON-PRODUCT
  const char* record;   // key of its decision record
  SwitchWarmup warmup;
  const char* help;     // one line (CLI help)
  /// Kernel and Model scope: the field of a ModelOptions as int64 (null for the other scopes).
  int64_t (*get)(const ModelOptions&) = nullptr;
  void (*set)(ModelOptions&, int64_t) = nullptr;

  /// "KernelOptions::fuse_norm", "SessionOptions::kv_truncate", ...
  std::string qualified() const;
  /// The CLI arguments that set value v: "--fuse-norm" / "--no-fuse-norm" (Bool, Tri 1 / 0),
  /// "--gdn-chunk 16" (Int); "" when v is not spellable (no flag, or an auto sentinel).
  std::string spelled(int64_t v) const;
  /// The default in words: "on", "off", "2 (adapter default)", "auto (adapter default)", "64".
  std::string default_text() const;
};

/// Every switch, in the table's order.
std::span<const SwitchInfo> switches();
/// The switch with this field name in this scope, or null.
const SwitchInfo* find_switch(std::string_view field, SwitchScope scope);

/// Sets one kernel- or model-level switch of `o` from FIELD=VALUE (the table's field name; VALUE an
/// integer, on/true = 1 or off/false = 0), e.g. "attention_decode_key_lanes=1". The value must be
/// the switch's default (an adapter-default sentinel) or in its CLI range (Pow2: 0 or a power of
/// two in it). Throws wgllm::Error naming the setting otherwise.
void apply_switch_setting(ModelOptions& o, std::string_view spec);
/// Sets kernel- and model-level switches of `o` from their CLI spelling, as the native CLI takes
/// them: "--attn-decode-key-lanes 1 --no-fuse-norm" (whitespace-separated; "--FLAG" / "--no-FLAG"
/// / "--FLAG=VALUE" / "--no-FLAG=VALUE" for on/off switches, VALUE true|false|on|off|yes|no|1|0 in
/// any case; "--FLAG N" or "--FLAG=N" for numeric ones, N in the flag's range as the CLI checks it;
/// FIELD=VALUE tokens as apply_switch_setting).
/// For builds without the CLI (the browser engine's CreateEngine option `switches`). Throws
/// wgllm::Error on an unknown flag, a missing or out-of-range value, or an App/Session/Web switch.
void apply_switch_args(ModelOptions& o, std::string_view args);

/// A decision record: hand-written prose shared by one or more switches (switch_records.inc).
struct SwitchRecord {
  const char* key;
  const char* what;       // what it does
  const char* measured;   // measured effect, dated, with its result file
  const char* bit_exact;  // "yes ..." / "no ..." with the evidence
  const char* on_when;    // the default and the written condition under which it would change
};
std::span<const SwitchRecord> switch_records();

/// The CLI spelling of every Kernel/Model switch of `o` that differs from its default and is not
/// product-neutral (bench's NON-PRODUCT label); unspellable values as "field=value".
std::vector<std::string> non_default_switches(const ModelOptions& o);

/// docs/FLAGS.md: header, one table row per record (flags, default, what, measured, bit-exact, on
/// when), footer. `wgllm flags --markdown` prints it.
std::string flags_markdown();
/// `wgllm flags`: per switch its flag, field, default, bit-exact, product and help, then its record.
std::string flags_text();

}  // namespace wgllm
