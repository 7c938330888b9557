// IEEE-754 binary16 (f16) and bfloat16 <-> f32 conversions (bit-exact, round-to-nearest-even).
#pragma once
#include <cstdint>
#include <cstring>

namespace wgllm {

inline float f32_from_bits(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t bits_from_f32(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

/// f16 bits -> f32 (handles subnormals, inf, NaN exactly).
inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0) {
    if (man == 0) return f32_from_bits(sign);
    // subnormal: value = man * 2^-24
    float v = float(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return f32_from_bits(sign | 0x7f800000u | (man << 13));
  return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

/// f32 -> f16 bits, round to nearest even.
inline uint16_t f32_to_f16(float f) {
  uint32_t x = bits_from_f32(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7fffffff;
  if (ax >= 0x7f800000) return uint16_t(sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0));
  if (ax >= 0x477ff000) return uint16_t(sign | 0x7c00);  // overflow -> inf
  if (ax < 0x38800000) {  // subnormal or zero in f16
    float v = f32_from_bits(ax) * 16777216.0f;  // scale to units of 2^-24
    uint32_t r = uint32_t(v);
    float rem = v - float(r);
    if (rem > 0.5f || (rem == 0.5f && (r & 1))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = ax + 0xc8000fffu + ((ax >> 13) & 1);  // rebias exponent and round
  return uint16_t(sign | (r >> 13));
}

/// bf16 bits -> f32 (exact).
inline float bf16_to_f32(uint16_t b) { return f32_from_bits(uint32_t(b) << 16); }

}  // namespace wgllm
