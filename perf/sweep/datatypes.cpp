// Data type and reduction tables of the perf sweep, and conversions between elements and doubles.
#include "perf/sweep/datatypes.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "perf/sweep/error.h"

namespace tutti::perf {
namespace {

// A binary floating format narrower than float: sign, exponent bits, mantissa bits.
struct SmallFloat {
  int exponentBits;
  int mantissaBits;
  bool hasInfinity;  // e4m3 has none: its top exponent holds finite values up to 448
};

constexpr SmallFloat kHalf{5, 10, true}, kBfloat16{8, 7, true}, kE4m3{4, 3, false}, kE5m2{5, 2, true};

double decode(SmallFloat f, uint32_t bits) {
  int bias = (1 << (f.exponentBits - 1)) - 1;
  uint32_t mantissa = bits & ((1u << f.mantissaBits) - 1);
  uint32_t exponent = (bits >> f.mantissaBits) & ((1u << f.exponentBits) - 1);
  bool negative = (bits >> (f.mantissaBits + f.exponentBits)) & 1;
  double value;
  uint32_t topExponent = (1u << f.exponentBits) - 1;
  if (exponent == topExponent && f.hasInfinity)
    value = mantissa ? NAN : INFINITY;
  else if (exponent == topExponent && mantissa == (1u << f.mantissaBits) - 1)
    value = NAN;  // e4m3's one NaN
  else if (exponent == 0)
    value = std::ldexp(double(mantissa), 1 - bias - f.mantissaBits);
  else
    value = std::ldexp(double(mantissa | (1u << f.mantissaBits)), int(exponent) - bias - f.mantissaBits);
  return negative ? -value : value;
}

uint32_t encode(SmallFloat f, double value) {
  int bias = (1 << (f.exponentBits - 1)) - 1;
  uint32_t signBit = 1u << (f.mantissaBits + f.exponentBits);
  uint32_t sign = std::signbit(value) ? signBit : 0;
  uint32_t topExponent = (1u << f.exponentBits) - 1;
  uint32_t nanBits = f.hasInfinity ? (topExponent << f.mantissaBits) | 1
                                   : (topExponent << f.mantissaBits) | ((1u << f.mantissaBits) - 1);
  if (std::isnan(value)) return sign | nanBits;
  double magnitude = std::fabs(value);
  double largest = f.hasInfinity ? decode(f, ((topExponent - 1) << f.mantissaBits) | ((1u << f.mantissaBits) - 1))
                                 : decode(f, (topExponent << f.mantissaBits) | ((1u << f.mantissaBits) - 2));
  // Every representable value is a multiple of the quantum of its binade; round there (nearest even).
  int exponent = magnitude > 0 ? std::ilogb(magnitude) : 1 - bias;
  if (exponent < 1 - bias) exponent = 1 - bias;
  double quantum = std::ldexp(1.0, exponent - f.mantissaBits);
  double rounded = std::nearbyint(magnitude / quantum) * quantum;
  if (rounded > largest) {
    if (!f.hasInfinity) return sign | (((topExponent << f.mantissaBits) | ((1u << f.mantissaBits) - 2)));  // saturate
    double halfwayAbove = largest + std::ldexp(1.0, bias - f.mantissaBits - 1);
    if (magnitude < halfwayAbove) return sign | (((topExponent - 1) << f.mantissaBits) | ((1u << f.mantissaBits) - 1));
    return sign | (topExponent << f.mantissaBits);
  }
  if (rounded == 0) return sign;
  int roundedExponent = rounded > 0 ? std::ilogb(rounded) : 1 - bias;
  if (roundedExponent < 1 - bias)  // subnormal (or zero)
    return sign | uint32_t(rounded / std::ldexp(1.0, 1 - bias - f.mantissaBits));
  uint32_t mantissa = uint32_t(std::ldexp(rounded, f.mantissaBits - roundedExponent)) & ((1u << f.mantissaBits) - 1);
  return sign | (uint32_t(roundedExponent + bias) << f.mantissaBits) | mantissa;
}

template <typename T>
T load(const void* buffer, size_t index) {
  T value;
  std::memcpy(&value, static_cast<const char*>(buffer) + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void store(void* buffer, size_t index, T value) {
  std::memcpy(static_cast<char*>(buffer) + index * sizeof(T), &value, sizeof(T));
}

// Integers wrap like the device does: reduce modulo 2^64 first, then truncate.
template <typename T>
T wrapped(double value) {
  double modulus = 18446744073709551616.0;
  double reduced = std::fmod(std::trunc(value), modulus);
  if (reduced < 0) reduced += modulus;
  return T(uint64_t(reduced));
}

}  // namespace

const std::vector<DataTypeInfo>& allDataTypes() {
  static const std::vector<DataTypeInfo> table = {
      {ncclInt8, "int8", 1, true, 0},
      {ncclUint8, "uint8", 1, true, 0},
      {ncclInt32, "int32", 4, true, 0},
      {ncclUint32, "uint32", 4, true, 0},
      {ncclInt64, "int64", 8, true, 0},
      {ncclUint64, "uint64", 8, true, 0},
      {ncclFloat16, "half", 2, false, 0x1p-11},
      {ncclFloat32, "float", 4, false, 0x1p-24},
      {ncclFloat64, "double", 8, false, 0x1p-53},
      {ncclBfloat16, "bfloat16", 2, false, 0x1p-8},
      {ncclFloat8e4m3, "f8e4m3", 1, false, 0x1p-4},
      {ncclFloat8e5m2, "f8e5m2", 1, false, 0x1p-3},
  };
  return table;
}

const std::vector<RedOpInfo>& allRedOps() {
  static const std::vector<RedOpInfo> table = {
      {ncclSum, "sum"}, {ncclProd, "prod"}, {ncclMax, "max"},
      {ncclMin, "min"}, {ncclAvg, "avg"},   {ncclNumOps, "mulsum"},
  };
  return table;
}

std::vector<DataTypeInfo> selectDataTypes(const std::string& name) {
  if (name == "all") return allDataTypes();
  for (const DataTypeInfo& info : allDataTypes())
    if (name == info.name) return {info};
  throw Error(
      ErrorCode::InvalidArgument,
      "option -d '" + name +
          "': unknown type (int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2 all)");
}

std::vector<RedOpInfo> selectRedOps(const std::string& name) {
  if (name == "all") return allRedOps();
  for (const RedOpInfo& info : allRedOps())
    if (name == info.name) return {info};
  throw Error(ErrorCode::InvalidArgument,
              "option -o '" + name + "': unknown reduction (sum prod max min avg mulsum all)");
}

double readElement(ncclDataType_t type, const void* buffer, size_t index) {
  switch (type) {
    case ncclInt8: return double(load<int8_t>(buffer, index));
    case ncclUint8: return double(load<uint8_t>(buffer, index));
    case ncclInt32: return double(load<int32_t>(buffer, index));
    case ncclUint32: return double(load<uint32_t>(buffer, index));
    case ncclInt64: return double(load<int64_t>(buffer, index));
    case ncclUint64: return double(load<uint64_t>(buffer, index));
    case ncclFloat16: return decode(kHalf, load<uint16_t>(buffer, index));
    case ncclFloat32: return double(load<float>(buffer, index));
    case ncclFloat64: return load<double>(buffer, index);
    case ncclBfloat16: return decode(kBfloat16, load<uint16_t>(buffer, index));
    case ncclFloat8e4m3: return decode(kE4m3, load<uint8_t>(buffer, index));
    case ncclFloat8e5m2: return decode(kE5m2, load<uint8_t>(buffer, index));
    default: throw Error(ErrorCode::InvalidArgument, "readElement: unknown data type " + std::to_string(int(type)));
  }
}

void writeElement(ncclDataType_t type, void* buffer, size_t index, double value) {
  switch (type) {
    case ncclInt8: return store(buffer, index, wrapped<int8_t>(value));
    case ncclUint8: return store(buffer, index, wrapped<uint8_t>(value));
    case ncclInt32: return store(buffer, index, wrapped<int32_t>(value));
    case ncclUint32: return store(buffer, index, wrapped<uint32_t>(value));
    case ncclInt64: return store(buffer, index, wrapped<int64_t>(value));
    case ncclUint64: return store(buffer, index, wrapped<uint64_t>(value));
    case ncclFloat16: return store(buffer, index, uint16_t(encode(kHalf, value)));
    case ncclFloat32: return store(buffer, index, float(value));
    case ncclFloat64: return store(buffer, index, value);
    case ncclBfloat16: return store(buffer, index, uint16_t(encode(kBfloat16, value)));
    case ncclFloat8e4m3: return store(buffer, index, uint8_t(encode(kE4m3, value)));
    case ncclFloat8e5m2: return store(buffer, index, uint8_t(encode(kE5m2, value)));
    default: throw Error(ErrorCode::InvalidArgument, "writeElement: unknown data type " + std::to_string(int(type)));
  }
}

}  // namespace tutti::perf
