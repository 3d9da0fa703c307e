// The float64 reduction reference: conversions by ldexp/nearbyint (not the kernels' bit
// tricks), generated inputs with known results, tolerances.
#include "tests/common/reference_support.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace tutti_test {

namespace {

// A binary floating-point format narrower than double, described by its parameters.
struct FloatFormat {
  int bits;  // total width: 8, 16
  int exponentBits;
  int mantissaBits;  // stored, without the implicit bit
  bool hasInfinity;  // fp16, bf16, e5m2: all-ones exponent is inf/NaN; e4m3: only S.1111.111 is NaN
  bool saturates;    // fp8: overflow (and inf) becomes the largest finite value
  uint32_t nanCode;  // what a NaN is stored as

  int bias() const { return (1 << (exponentBits - 1)) - 1; }
  int minExponent() const { return 1 - bias(); }
  double largestFinite() const {
    int topExponent = hasInfinity ? (1 << exponentBits) - 2 - bias() : (1 << exponentBits) - 1 - bias();
    // e4m3's top binade loses its all-ones mantissa to NaN.
    double topMantissa = hasInfinity ? 2.0 - std::ldexp(1.0, -mantissaBits) : 2.0 - std::ldexp(2.0, -mantissaBits);
    return std::ldexp(topMantissa, topExponent);
  }

  double decode(uint32_t code) const {
    bool negative = (code >> (bits - 1)) & 1u;
    uint32_t exponentField = (code >> mantissaBits) & ((1u << exponentBits) - 1u);
    uint32_t mantissa = code & ((1u << mantissaBits) - 1u);
    double value;
    if (hasInfinity && exponentField == (1u << exponentBits) - 1u) {
      value = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    } else if (!hasInfinity && exponentField == (1u << exponentBits) - 1u && mantissa == (1u << mantissaBits) - 1u) {
      value = std::numeric_limits<double>::quiet_NaN();
    } else if (exponentField == 0) {
      value = std::ldexp(double(mantissa), minExponent() - mantissaBits);
    } else {
      value = std::ldexp(1.0 + std::ldexp(double(mantissa), -mantissaBits), int(exponentField) - bias());
    }
    return negative ? -value : value;
  }

  uint32_t encode(double v) const {
    if (std::isnan(v)) return nanCode;
    uint32_t sign = std::signbit(v) ? 1u << (bits - 1) : 0u;
    double magnitude = std::fabs(v);
    // Round to a multiple of the quantum of v's binade (subnormal binade below the smallest
    // normal); nearbyint rounds ties to even in the default rounding mode.
    double rounded = magnitude;
    if (std::isfinite(magnitude) && magnitude != 0) {
      int exponent = std::max(std::ilogb(magnitude), minExponent());
      double quantum = std::ldexp(1.0, exponent - mantissaBits);
      rounded = std::nearbyint(magnitude / quantum) * quantum;
    }
    if (rounded > largestFinite()) {
      if (saturates)
        rounded = largestFinite();
      else
        return sign | (((1u << exponentBits) - 1u) << mantissaBits);  // inf
    }
    if (rounded == 0) return sign;
    int exponent = std::ilogb(rounded);
    if (exponent < minExponent()) {
      return sign | uint32_t(std::ldexp(rounded, mantissaBits - minExponent()));
    }
    uint32_t exponentField = uint32_t(exponent + bias());
    uint32_t mantissa = uint32_t(std::ldexp(std::ldexp(rounded, -exponent) - 1.0, mantissaBits));
    return sign | (exponentField << mantissaBits) | mantissa;
  }
};

constexpr FloatFormat kHalf{16, 5, 10, true, false, 0x7fffu};
constexpr FloatFormat kBfloat16{16, 8, 7, true, false, 0x7fffu};
constexpr FloatFormat kE4M3{8, 4, 3, false, true, 0x7fu};
constexpr FloatFormat kE5M2{8, 5, 2, true, true, 0x7fu};

// A narrow format's conversions, tabulated once from FloatFormat (the tests convert millions of
// elements): every code decoded, and the codes of the quarters k / 4 with 0 < |k| <= kQuarters,
// which is what the generated inputs and results are; other values are encoded directly.
struct NarrowCodes {
  static constexpr int kQuarters = 4096;
  const FloatFormat* format;
  std::vector<double> decoded;
  std::vector<uint16_t> quarters;  // index k + kQuarters

  explicit NarrowCodes(const FloatFormat* f) : format(f), decoded(size_t(1) << f->bits), quarters(2 * kQuarters + 1) {
    for (size_t code = 0; code < decoded.size(); ++code) decoded[code] = f->decode(uint32_t(code));
    for (int k = -kQuarters; k <= kQuarters; ++k) quarters[size_t(k + kQuarters)] = uint16_t(f->encode(k / 4.0));
  }
  uint32_t encode(double v) const {
    double k = v * 4;
    if (k != 0 && std::fabs(k) <= kQuarters && k == std::trunc(k)) return quarters[size_t(int(k) + kQuarters)];
    return format->encode(v);
  }
};

const NarrowCodes& narrowCodes(ncclDataType_t type) {
  static const NarrowCodes half(&kHalf), bfloat16(&kBfloat16), e4m3(&kE4M3), e5m2(&kE5M2);
  switch (type) {
    case ncclFloat16: return half;
    case ncclBfloat16: return bfloat16;
    case ncclFloat8e4m3: return e4m3;
    default: return e5m2;
  }
}

// Significant bits and smallest normal exponent of each floating type.
int precisionBits(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return 11;
    case ncclBfloat16: return 8;
    case ncclFloat8e4m3: return 4;
    case ncclFloat8e5m2: return 3;
    case ncclFloat32: return 24;
    case ncclFloat64: return 53;
    default: return 0;
  }
}

int minNormalExponent(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return -14;
    case ncclBfloat16: return -126;
    case ncclFloat8e4m3: return -6;
    case ncclFloat8e5m2: return -14;
    case ncclFloat32: return -126;
    case ncclFloat64: return -1022;
    default: return 0;
  }
}

// Largest positive value of an integer type that generated inputs may use (within 2^53, so
// doubles hold it and sums of it exactly).
double integerLimit(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return 127;
    case ncclUint8: return 255;
    case ncclInt32: return 2147483647.0;
    case ncclUint32: return 4294967295.0;
    default: return std::ldexp(1.0, 52);
  }
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t inputHash(ncclDataType_t type, ncclRedOp_t op, int rank, size_t index) {
  return mix(mix(mix(uint64_t(type) * 131 + uint64_t(op)) ^ uint64_t(rank)) ^ uint64_t(index));
}

// A value in [-limit, limit] (or [0, limit] when !isSigned) from a hash.
double spread(uint64_t hash, double limit, bool isSigned) {
  uint64_t span = uint64_t(limit);
  if (isSigned) return double(int64_t(hash % (2 * span + 1)) - int64_t(span));
  return double(hash % (span + 1));
}

// The largest |k| of the sum/avg generator, and whether its sums are exact in any order.
double sumGeneratorLimit(ncclDataType_t type, int nranks, bool* exact) {
  if (!isFloatingType(type)) {
    *exact = true;
    return std::floor(integerLimit(type) / nranks);
  }
  double roomy = std::ldexp(1.0, precisionBits(type)) / nranks;
  *exact = roomy >= 1;
  return std::max(1.0, std::min(64.0, std::floor(roomy)));
}

// Tighter than tolerance() when every input is within maxInput: a partial result of k inputs
// is within k * maxInput, and whatever the order (chain or tree), the i-th largest of the
// nranks - 1 partial results combines at most nranks - i + 1 inputs. Rounding each costs
// `ulps` units in its last place (terms from k = firstTerm on).
double growingSumTolerance(ncclDataType_t type, int nranks, double maxInput, int firstTerm, double ulps) {
  double bound = 0;
  for (int k = firstTerm; k <= nranks; ++k) bound += ulps * ulpOf(type, k * maxInput * 1.0625);
  return bound;
}

bool isBuiltInOp(ncclRedOp_t op) {
  return op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin || op == ncclAvg;
}

}  // namespace

const std::vector<ncclDataType_t>& allDataTypes() {
  static const std::vector<ncclDataType_t> types = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                                    ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
  return types;
}

size_t elementBytes(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

bool isFloatingType(ncclDataType_t type) { return precisionBits(type) != 0; }

bool isSignedInteger(ncclDataType_t type) { return type == ncclInt8 || type == ncclInt32 || type == ncclInt64; }

double toDouble(ncclDataType_t type, const void* p, size_t i) {
  const unsigned char* at = static_cast<const unsigned char*>(p) + i * elementBytes(type);
  switch (type) {
    case ncclInt8: {
      int8_t v;
      std::memcpy(&v, at, 1);
      return v;
    }
    case ncclUint8: {
      uint8_t v;
      std::memcpy(&v, at, 1);
      return v;
    }
    case ncclInt32: {
      int32_t v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case ncclUint32: {
      uint32_t v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case ncclInt64: {
      int64_t v;
      std::memcpy(&v, at, 8);
      return double(v);
    }
    case ncclUint64: {
      uint64_t v;
      std::memcpy(&v, at, 8);
      return double(v);
    }
    case ncclFloat32: {
      float v;
      std::memcpy(&v, at, 4);
      return v;
    }
    case ncclFloat64: {
      double v;
      std::memcpy(&v, at, 8);
      return v;
    }
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t code;
      std::memcpy(&code, at, 2);
      return narrowCodes(type).decoded[code];
    }
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return narrowCodes(type).decoded[*at];
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

void fromDouble(ncclDataType_t type, void* p, size_t i, double v) {
  unsigned char* at = static_cast<unsigned char*>(p) + i * elementBytes(type);
  // Integers: truncate, then wrap modulo 2^64 (and the type's width below).
  uint64_t wrapped = 0;
  if (!isFloatingType(type) && std::isfinite(v)) {
    double whole = std::trunc(v);
    wrapped = whole < 0 ? uint64_t(int64_t(whole)) : uint64_t(whole);
  }
  switch (type) {
    case ncclInt8: {
      int8_t x = int8_t(wrapped);
      std::memcpy(at, &x, 1);
      return;
    }
    case ncclUint8: {
      uint8_t x = uint8_t(wrapped);
      std::memcpy(at, &x, 1);
      return;
    }
    case ncclInt32: {
      int32_t x = int32_t(wrapped);
      std::memcpy(at, &x, 4);
      return;
    }
    case ncclUint32: {
      uint32_t x = uint32_t(wrapped);
      std::memcpy(at, &x, 4);
      return;
    }
    case ncclInt64: {
      int64_t x = int64_t(wrapped);
      std::memcpy(at, &x, 8);
      return;
    }
    case ncclUint64: {
      std::memcpy(at, &wrapped, 8);
      return;
    }
    case ncclFloat32: {
      float x = float(v);
      std::memcpy(at, &x, 4);
      return;
    }
    case ncclFloat64: {
      std::memcpy(at, &v, 8);
      return;
    }
    case ncclFloat16:
    case ncclBfloat16: {
      uint16_t code = uint16_t(narrowCodes(type).encode(v));
      std::memcpy(at, &code, 2);
      return;
    }
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: *at = uint8_t(narrowCodes(type).encode(v)); return;
    default: return;
  }
}

double roundToType(ncclDataType_t type, double v) {
  unsigned char element[8];
  fromDouble(type, element, 0, v);
  return toDouble(type, element, 0);
}

double ulpOf(ncclDataType_t type, double v) {
  if (!isFloatingType(type)) return 0;
  int exponent = minNormalExponent(type);
  if (v != 0 && std::isfinite(v)) exponent = std::max(std::ilogb(std::fabs(v)), exponent);
  return std::ldexp(1.0, exponent - (precisionBits(type) - 1));
}

double tolerance(ncclDataType_t type, ncclRedOp_t op, int nranks, double magnitude) {
  if (!isFloatingType(type) || op == ncclMax || op == ncclMin || (nranks <= 1 && op != ncclAvg)) return 0;
  // Each pairwise operation rounds once, by at most half a unit in the last place of its
  // result, and every partial result is within magnitude. Widening magnitude by 1/16 covers
  // rounding errors that push a partial over a binade boundary.
  const double bound = magnitude * 1.0625;
  switch (op) {
    case ncclSum: return (nranks - 1) * 0.5 * ulpOf(type, bound);
    case ncclProd: return (nranks - 1) * ulpOf(type, bound);
    // avg: each input is scaled by 1/nranks (one rounding in float, one more when the first
    // enters a narrow type), then summed: partials within magnitude / nranks. A whole ulp
    // per rank rather than half also covers summing first and dividing at the end.
    case ncclAvg: return nranks * ulpOf(type, bound / nranks);
    // PreMulSum: magnitude is already over the scaled inputs.
    default: return nranks * ulpOf(type, bound);
  }
}

double inputValue(ncclDataType_t type, ncclRedOp_t op, int nranks, int rank, size_t index) {
  uint64_t hash = inputHash(type, op, rank, index);
  bool floating = isFloatingType(type);
  bool isSigned = floating || isSignedInteger(type);
  switch (op) {
    case ncclProd: {
      bool active = size_t(rank) == index % size_t(nranks) || size_t(rank) == (index + 1) % size_t(nranks);
      double magnitude = 1;
      if (active) magnitude = floating ? std::ldexp(1.0, int(hash % 4) - 1) : double(2 + hash % 2);
      bool negative = isSigned && ((hash >> 8) & 1u);
      return negative ? -magnitude : magnitude;
    }
    case ncclMax:
    case ncclMin: {
      if (floating) return roundToType(type, spread(hash, 400, true) / 4);
      return spread(hash, std::min(integerLimit(type), std::ldexp(1.0, 40)), isSigned);
    }
    default: {  // sum, avg
      bool exact;
      double limit = sumGeneratorLimit(type, nranks, &exact);
      double k = spread(hash, limit, isSigned);
      if (!floating) return k;
      // avg: nranks * k / 4, so that every input scaled by 1/nranks is a quarter again.
      return op == ncclAvg && exact ? nranks * k / 4 : k / 4;
    }
  }
}

void fillInput(ncclDataType_t type, ncclRedOp_t op, int nranks, int rank, void* p, size_t count, size_t firstIndex) {
  for (size_t i = 0; i < count; ++i) fromDouble(type, p, i, inputValue(type, op, nranks, rank, firstIndex + i));
}

double expectedValue(ncclDataType_t type, ncclRedOp_t op, int nranks, size_t index) {
  double result = inputValue(type, op, nranks, 0, index);
  for (int rank = 1; rank < nranks; ++rank) {
    double v = inputValue(type, op, nranks, rank, index);
    switch (op) {
      case ncclProd: result *= v; break;
      case ncclMax: result = std::max(result, v); break;
      case ncclMin: result = std::min(result, v); break;
      default: result += v; break;  // sum, avg: exact (integers below 2^53, quarters)
    }
  }
  if (op == ncclAvg) {
    // Integers: C division truncates toward zero (the sums stay below 2^53, exact in int64).
    result = isFloatingType(type) ? result / nranks : double(int64_t(result) / int64_t(nranks));
  }
  return result;
}

double expectedTolerance(ncclDataType_t type, ncclRedOp_t op, int nranks, size_t index) {
  if (!isFloatingType(type)) return 0;
  bool exact;
  double limit = sumGeneratorLimit(type, nranks, &exact) / 4;
  switch (op) {
    case ncclSum: return exact ? 0 : growingSumTolerance(type, nranks, limit, 2, 0.5);
    case ncclAvg:
      if (!exact) return growingSumTolerance(type, nranks, limit / nranks, 1, 1.0);
      // Inputs nranks * k / 4: fp32 and fp64 carry the float rounding of 1/nranks and of each
      // scaled input through their sums. The narrow types round every partial sum to an exact
      // quarter again, except that a float residue of a partial sum that should be zero can
      // survive as a tiny value (bf16 keeps float's exponent range); bound it by float ulps.
      if (type == ncclFloat32 || type == ncclFloat64) return tolerance(type, op, nranks, nranks * nranks * limit);
      return nranks * ulpOf(ncclFloat32, nranks * limit);
    default: return 0;  // prod, max, min: exact
  }
}

std::string checkReduced(ncclDataType_t type, ncclRedOp_t op, int nranks, const void* got, size_t count,
                         size_t firstIndex) {
  if (!isBuiltInOp(op)) return "checkReduced: op " + std::to_string(int(op)) + " is not a built-in operation";
  size_t mismatches = 0;
  std::ostringstream first;
  first.precision(17);
  for (size_t i = 0; i < count; ++i) {
    size_t index = firstIndex + i;
    double expected = expectedValue(type, op, nranks, index);
    double tol = expectedTolerance(type, op, nranks, index);
    double actual = toDouble(type, got, i);
    bool ok = std::fabs(actual - expected) <= tol;  // false for NaN
    if (!ok && mismatches++ == 0) {
      first << "element " << index << ": got " << actual << ", expected " << expected << " (tolerance " << tol << ", "
            << nranks << " ranks)";
    }
  }
  if (mismatches == 0) return "";
  return first.str() + "; " + std::to_string(mismatches) + " of " + std::to_string(count) + " elements differ";
}

}  // namespace tutti_test
