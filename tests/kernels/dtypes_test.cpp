// The low-precision conversions of kernels/dtypes.h against the float64 reference: exhaustive
// round trips and exact widening, rounding of floats at every tie, subnormal and overflow.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/dtypes.h"
#include "tests/common/reference_support.h"

namespace {

using namespace tutti::kern;

float floatFromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// The four formats under one interface: their dtype, width, and the kernels' conversions.
struct Format {
  ncclDataType_t type;
  int bits;
  float (*widen)(uint32_t code);
  uint32_t (*narrow)(float value);
};

template <typename T>
float widenCode(uint32_t code) {
  T element;
  std::memcpy(&element, &code, sizeof element);  // little-endian: the low bytes of code
  return element.toFloat();
}
template <typename T>
uint32_t narrowValue(float value) {
  return T::fromFloat(value).bits;
}

const std::vector<Format>& formats() {
  static const std::vector<Format> all = {
      {ncclFloat16, 16, widenCode<half_t>, narrowValue<half_t>},
      {ncclBfloat16, 16, widenCode<bf16_t>, narrowValue<bf16_t>},
      {ncclFloat8e4m3, 8, widenCode<fp8e4m3_t>, narrowValue<fp8e4m3_t>},
      {ncclFloat8e5m2, 8, widenCode<fp8e5m2_t>, narrowValue<fp8e5m2_t>},
  };
  return all;
}

double referenceDecode(const Format& format, uint32_t code) {
  unsigned char element[2];
  std::memcpy(element, &code, sizeof element);
  return tutti_test::toDouble(format.type, element, 0);
}

uint32_t referenceEncode(const Format& format, double value) {
  unsigned char element[2] = {0, 0};
  tutti_test::fromDouble(format.type, element, 0, value);
  uint16_t code;
  std::memcpy(&code, element, sizeof code);
  return format.bits == 8 ? code & 0xffu : code;
}

// Compares the kernels' rounding of value with the reference's; counts and describes misses.
struct RoundingCheck {
  explicit RoundingCheck(const Format& checkedFormat) : format(checkedFormat) {}
  const Format& format;
  size_t checked = 0, mismatches = 0;
  std::string first;

  void operator()(float value) {
    ++checked;
    uint32_t got = format.narrow(value);
    uint32_t expected = referenceEncode(format, value);
    if (got == expected) return;
    if (mismatches++ == 0) {
      char text[160];
      std::snprintf(text, sizeof text, "%a (bits %08x): got %#x, expected %#x", double(value), floatBits(value), got,
                    expected);
      first = text;
    }
  }
};

}  // namespace

TEST_CASE("every low-precision code widens exactly to the reference value") {
  for (const Format& format : formats()) {
    CAPTURE(tutti_test::elementBytes(format.type), int(format.type));
    size_t mismatches = 0;
    for (uint32_t code = 0; code < (1u << format.bits); ++code) {
      double got = format.widen(code);
      double expected = referenceDecode(format, code);
      bool same =
          std::isnan(expected) ? std::isnan(got) : got == expected && std::signbit(got) == std::signbit(expected);
      if (!same && mismatches++ == 0) FAIL_CHECK("code " << code << ": got " << got << ", expected " << expected);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("every low-precision code survives widening and narrowing, NaN (and e5m2 inf) aside") {
  for (const Format& format : formats()) {
    CAPTURE(int(format.type));
    size_t nans = 0, mismatches = 0;
    for (uint32_t code = 0; code < (1u << format.bits); ++code) {
      float value = format.widen(code);
      uint32_t back = format.narrow(value);
      if (std::isnan(value)) {
        ++nans;
        // NaN narrows to a NaN (the canonical one).
        if (!std::isnan(format.widen(back)) && mismatches++ == 0)
          FAIL_CHECK("NaN code " << code << " came back as " << back);
        continue;
      }
      // e5m2 narrows with saturation, as CUDA's constructor does: its infinities come back
      // as the largest finite value, 0x7b with the sign.
      uint32_t expected = code;
      if (format.type == ncclFloat8e5m2 && std::isinf(value)) expected = (code & 0x80u) | 0x7bu;
      if (back != expected && mismatches++ == 0) FAIL_CHECK("code " << code << " came back as " << back);
    }
    CHECK(mismatches == 0);
    // fp16 and bf16 have 2 * (2^mantissa - 1) NaNs, e5m2 6, e4m3 exactly 2.
    size_t expectedNans = format.type == ncclFloat16      ? 2046
                          : format.type == ncclBfloat16   ? 254
                          : format.type == ncclFloat8e5m2 ? 6
                                                          : 2;
    CHECK(nans == expectedNans);
  }
}

TEST_CASE("narrowing a float rounds to nearest even, at every tie and its neighbours") {
  for (const Format& format : formats()) {
    CAPTURE(int(format.type));
    RoundingCheck check(format);
    uint32_t signBit = 1u << (format.bits - 1);
    for (uint32_t code = 0; code < signBit; ++code) {
      double low = referenceDecode(format, code);
      double high = referenceDecode(format, code + 1);
      if (!std::isfinite(low)) continue;
      for (float sign : {1.0f, -1.0f}) {
        float exact = sign * float(low);
        check(exact);
        check(std::nextafter(exact, 0.0f));
        check(std::nextafter(exact, sign * INFINITY));
        if (!std::isfinite(high) || code + 1 == signBit) continue;
        // The midpoint of two neighbours has one bit more than the format: exact in float.
        float tie = sign * float((low + high) / 2);
        REQUIRE(double(tie) == sign * (low + high) / 2);
        check(tie);
        check(std::nextafter(tie, 0.0f));
        check(std::nextafter(tie, sign * INFINITY));
      }
    }
    CHECK(check.mismatches == 0);
    INFO(check.first);
    CHECK(check.first.empty());
  }
}

TEST_CASE("narrowing handles overflow, underflow, inf and NaN like CUDA's conversions") {
  // Specific values whose results the formats' definitions fix.
  CHECK(half_t::fromFloat(65504.0f).bits == 0x7bffu);
  CHECK(half_t::fromFloat(65519.99f).bits == 0x7bffu);  // below the midpoint to 65536
  CHECK(half_t::fromFloat(65520.0f).bits == 0x7c00u);   // the tie rounds to even: inf
  CHECK(half_t::fromFloat(-1e30f).bits == 0xfc00u);
  CHECK(half_t::fromFloat(std::ldexp(1.0f, -25)).bits == 0x0000u);  // tie to even zero
  CHECK(half_t::fromFloat(std::nextafter(std::ldexp(1.0f, -25), 1.0f)).bits == 0x0001u);
  CHECK(half_t::fromFloat(-std::ldexp(1.0f, -30)).bits == 0x8000u);  // -0 keeps its sign
  CHECK(half_t::fromFloat(NAN).bits == 0x7fffu);
  CHECK(half_t::fromFloat(-NAN).bits == 0x7fffu);

  CHECK(bf16_t::fromFloat(FLT_MAX).bits == 0x7f80u);                     // rounds up to inf
  CHECK(bf16_t::fromFloat(floatFromBits(0x3f808000u)).bits == 0x3f80u);  // tie, even stays
  CHECK(bf16_t::fromFloat(floatFromBits(0x3f818000u)).bits == 0x3f82u);  // tie, odd rounds up
  CHECK(bf16_t::fromFloat(floatFromBits(0x00008000u)).bits == 0x0000u);  // float subnormal tie
  CHECK(bf16_t::fromFloat(-NAN).bits == 0x7fffu);

  CHECK(fp8e4m3_t::fromFloat(448.0f).bits == 0x7eu);
  CHECK(fp8e4m3_t::fromFloat(464.0f).bits == 0x7eu);  // tie between 448 and (absent) 480
  CHECK(fp8e4m3_t::fromFloat(1e9f).bits == 0x7eu);
  CHECK(fp8e4m3_t::fromFloat(INFINITY).bits == 0x7eu);
  CHECK(fp8e4m3_t::fromFloat(-INFINITY).bits == 0xfeu);
  CHECK(fp8e4m3_t::fromFloat(NAN).bits == 0x7fu);
  CHECK(fp8e4m3_t::fromFloat(std::ldexp(1.0f, -10)).bits == 0x00u);  // half the smallest subnormal
  CHECK(fp8e4m3_t::fromFloat(std::ldexp(3.0f, -10)).bits == 0x02u);  // 1.5 steps: tie to even 2

  CHECK(fp8e5m2_t::fromFloat(57344.0f).bits == 0x7bu);
  CHECK(fp8e5m2_t::fromFloat(61440.0f).bits == 0x7bu);  // would round to inf: saturates
  CHECK(fp8e5m2_t::fromFloat(INFINITY).bits == 0x7bu);
  CHECK(fp8e5m2_t::fromFloat(-1e30f).bits == 0xfbu);
  CHECK(fp8e5m2_t::fromFloat(NAN).bits == 0x7fu);
  CHECK(std::isinf(fp8e5m2_t{0x7cu}.toFloat()));
  CHECK(std::isnan(fp8e4m3_t{0xffu}.toFloat()));
  CHECK(fp8e4m3_t{0xfeu}.toFloat() == -448.0f);

  // And a spread of special floats through the reference.
  const float specials[] = {0.0f,         -0.0f,    FLT_MIN,   -FLT_MIN, FLT_MAX,       -FLT_MAX,
                            FLT_TRUE_MIN, INFINITY, -INFINITY, NAN,      1.0f,          -1.0f,
                            0.1f,         1e-8f,    1e8f,      6.0e-8f,  5.9604645e-8f, 2.9802322e-8f};
  for (const Format& format : formats()) {
    RoundingCheck check(format);
    for (float value : specials) check(value);
    CAPTURE(int(format.type));
    INFO(check.first);
    CHECK(check.mismatches == 0);
  }
}

TEST_CASE("narrowing random floats matches the reference") {
  // Random bit patterns cover every exponent; random values near 1 and near the formats'
  // subnormal ranges cover the mantissa rounding where it matters most.
  uint64_t state = 0x1234567u;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 32);
  };
  for (const Format& format : formats()) {
    CAPTURE(int(format.type));
    RoundingCheck check(format);
    for (int i = 0; i < 300000; ++i) {
      check(floatFromBits(next()));
      check(std::ldexp(float(next() >> 8) / float(1u << 24), int(next() % 40) - 30) * ((next() & 1) ? -1.0f : 1.0f));
    }
    INFO(check.first);
    CHECK(check.mismatches == 0);
    CHECK(check.checked == 600000u);
  }
}

TEST_CASE("Dtype element types have the sizes of their data types") {
  CHECK(sizeof(DtypeElementT<Dtype::Int8>) == tutti_test::elementBytes(ncclInt8));
  CHECK(sizeof(DtypeElementT<Dtype::Uint64>) == tutti_test::elementBytes(ncclUint64));
  CHECK(sizeof(DtypeElementT<Dtype::Float16>) == tutti_test::elementBytes(ncclFloat16));
  CHECK(sizeof(DtypeElementT<Dtype::Bfloat16>) == tutti_test::elementBytes(ncclBfloat16));
  CHECK(sizeof(DtypeElementT<Dtype::Fp8E4M3>) == tutti_test::elementBytes(ncclFloat8e4m3));
  CHECK(sizeof(DtypeElementT<Dtype::Fp8E5M2>) == tutti_test::elementBytes(ncclFloat8e5m2));
  CHECK(sizeof(DtypeElementT<Dtype::Float64>) == tutti_test::elementBytes(ncclFloat64));
}
