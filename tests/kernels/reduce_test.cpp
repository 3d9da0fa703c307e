// reduceHost against a reference computed here: every type, operation, flag set and aliasing
// case, counts from 0 to 1M+3, pointers at odd byte addresses.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "kernels/host_reduce.h"
#include "tests/common/reference_support.h"

namespace {

using tutti::kern::RedKind;
using tutti::kern::RedOp;
using tutti::kern::reduceHost;
using tutti_test::elementBytes;

const RedKind kAllKinds[] = {RedKind::Sum, RedKind::Prod,      RedKind::Max,
                             RedKind::Min, RedKind::PreMulSum, RedKind::SumPostDiv};

const char* kindName(RedKind kind) {
  switch (kind) {
    case RedKind::Sum: return "sum";
    case RedKind::Prod: return "prod";
    case RedKind::Max: return "max";
    case RedKind::Min: return "min";
    case RedKind::PreMulSum: return "premulsum";
    case RedKind::SumPostDiv: return "sumpostdiv";
  }
  return "?";
}

// Where dst, a and b live relative to each other.
enum class Aliasing { Distinct, DstIsA, DstIsB, AIsB, AllSame, NoA, NoAInPlace };
const Aliasing kAllAliasings[] = {Aliasing::Distinct, Aliasing::DstIsA, Aliasing::DstIsB,    Aliasing::AIsB,
                                  Aliasing::AllSame,  Aliasing::NoA,    Aliasing::NoAInPlace};
const char* aliasingName(Aliasing aliasing) {
  const char* names[] = {"distinct", "dst==a", "dst==b", "a==b", "dst==a==b", "a=null", "a=null,dst==b"};
  return names[int(aliasing)];
}

struct Rng {
  uint64_t state;
  uint64_t next() {
    state += 0x9e3779b97f4a7c15ull;
    uint64_t x = state;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
};

// Random elements: integers over their whole range (so wrap-around is exercised); floating
// types half raw bit patterns (inf, NaN, subnormals, huge and tiny values) and half values
// k / 4096 of moderate size, whose sums and products round in the narrow types.
void fillRandom(ncclDataType_t type, std::vector<unsigned char>& bytes, size_t offset, size_t n, Rng& rng) {
  size_t size = elementBytes(type);
  unsigned char* base = bytes.data() + offset;
  for (size_t i = 0; i < n; ++i) {
    uint64_t raw = rng.next();
    if (tutti_test::isFloatingType(type) && (raw & 1u)) {
      double k = double(int64_t(rng.next() % (1u << 25)) - (1 << 24));
      tutti_test::fromDouble(type, base, i, k / 4096);
    } else {
      std::memcpy(base + i * size, &raw, size);  // little-endian: the low bytes
    }
  }
}

// ---- The reference ----------------------------------------------------------------------------
//
// Integers: computed on the raw bits in uint64 modulo 2^bits (signed values sign-extended
// where order or division needs them). Floating types: the documented accumulation rule with
// the compiler's own arithmetic: fp16/bf16/fp8/fp32 operands widened to float, one float
// operation (PreMulSum's product is its own float operation), the result rounded to the type
// by the reference's conversion; fp64 in double. volatile keeps each operation separately
// rounded (no fused multiply-add).

struct Reference {
  ncclDataType_t type;
  RedOp op;
  bool pre, post;

  uint64_t integer(const uint64_t* a, uint64_t b) const {
    int bits = int(elementBytes(type)) * 8;
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    bool isSigned = tutti_test::isSignedInteger(type);
    auto signedValue = [&](uint64_t v) {
      v &= mask;
      if (bits < 64 && (v >> (bits - 1))) v |= ~mask;
      return int64_t(v);
    };
    if (pre) b = b * op.intScalar;
    uint64_t r = b & mask;
    if (a) {
      uint64_t x = *a & mask;
      switch (op.kind) {
        case RedKind::Prod: r = x * r; break;
        case RedKind::Max: r = isSigned ? (signedValue(x) > signedValue(r) ? x : r) : (x > r ? x : r); break;
        case RedKind::Min: r = isSigned ? (signedValue(x) < signedValue(r) ? x : r) : (x < r ? x : r); break;
        default: r = x + r; break;
      }
    }
    if (post) {
      r = isSigned ? uint64_t(signedValue(r) / int64_t(op.intScalar)) : (r & mask) / op.intScalar;
    }
    return r & mask;
  }

  template <typename F>
  F floating(const F* a, F b) const {
    volatile F value = b;
    if (pre) value = value * F(op.floatScalar);
    if (a) {
      F x = *a, y = value;
      switch (op.kind) {
        case RedKind::Prod: value = x * y; break;
        case RedKind::Max:
          value = std::isnan(x) || std::isnan(y) ? std::numeric_limits<F>::quiet_NaN() : x > y ? x : y;
          break;
        case RedKind::Min:
          value = std::isnan(x) || std::isnan(y) ? std::numeric_limits<F>::quiet_NaN() : x < y ? x : y;
          break;
        default: value = x + y; break;
      }
    }
    if (post) value = value / F(op.intScalar);
    return value;
  }

  // Whether element i of got is right: raw bits for integers, values for floating types.
  bool match(const unsigned char* got, const unsigned char* aBytes, const unsigned char* bBytes, size_t i) const {
    size_t size = elementBytes(type);
    // No accumulator and nothing to apply: a copy, bit for bit (NaN payloads and e5m2's
    // infinities, which any arithmetic would turn into NaN/saturate, included).
    if (!aBytes && !pre && !post) return std::memcmp(got + i * size, bBytes + i * size, size) == 0;
    if (!tutti_test::isFloatingType(type)) {
      uint64_t a = 0, b = 0, g = 0;
      if (aBytes) std::memcpy(&a, aBytes + i * size, size);
      std::memcpy(&b, bBytes + i * size, size);
      std::memcpy(&g, got + i * size, size);
      return g == integer(aBytes ? &a : nullptr, b);
    }
    double a = aBytes ? tutti_test::toDouble(type, aBytes, i) : 0;
    double b = tutti_test::toDouble(type, bBytes, i);
    double expected;
    if (type == ncclFloat64) {
      expected = floating<double>(aBytes ? &a : nullptr, b);
    } else {
      float af = float(a);
      expected = tutti_test::roundToType(type, floating<float>(aBytes ? &af : nullptr, float(b)));
    }
    double actual = tutti_test::toDouble(type, got, i);
    if (std::isnan(expected)) return std::isnan(actual);
    return actual == expected;  // +0 and -0 compare equal: max/min may return either
  }
};

struct Case {
  ncclDataType_t type;
  RedOp op;
  unsigned flags;
  Aliasing aliasing;
  size_t count;
  size_t dstOffset, aOffset, bOffset;  // bytes past an aligned start
};

std::string describe(const Case& c) {
  return std::string(tutti::kern::dtypeName(c.type)) + " " + kindName(c.op.kind) + " flags=" + std::to_string(c.flags) +
         " " + aliasingName(c.aliasing) + " n=" + std::to_string(c.count) + " offsets=" + std::to_string(c.dstOffset) +
         "/" + std::to_string(c.aOffset) + "/" + std::to_string(c.bOffset);
}

// Runs one case and returns "" or a description of the first wrong element.
std::string runCase(const Case& c, Rng& rng) {
  size_t size = elementBytes(c.type);
  size_t bytes = c.count * size + 16;
  std::vector<unsigned char> aInput(bytes), bInput(bytes), dstBuffer(bytes);
  fillRandom(c.type, aInput, c.aOffset, c.count, rng);
  fillRandom(c.type, bInput, c.bOffset, c.count, rng);
  if (c.aliasing == Aliasing::AIsB || c.aliasing == Aliasing::AllSame) bInput = aInput;
  size_t bOffset = (c.aliasing == Aliasing::AIsB || c.aliasing == Aliasing::AllSame) ? c.aOffset : c.bOffset;
  const unsigned char* aRef =
      c.aliasing == Aliasing::NoA || c.aliasing == Aliasing::NoAInPlace ? nullptr : aInput.data() + c.aOffset;
  const unsigned char* bRef = bInput.data() + bOffset;

  // The buffers reduceHost sees; in-place cases start from a copy of the input they replace.
  std::vector<unsigned char> aWork = aInput, bWork = bInput;
  void* dst = dstBuffer.data() + c.dstOffset;
  const void* a = aWork.data() + c.aOffset;
  const void* b = bWork.data() + bOffset;
  switch (c.aliasing) {
    case Aliasing::Distinct: break;
    case Aliasing::DstIsA: dst = aWork.data() + c.aOffset; break;
    case Aliasing::DstIsB: dst = bWork.data() + bOffset; break;
    case Aliasing::AIsB: b = a; break;
    case Aliasing::AllSame:
      dst = aWork.data() + c.aOffset;
      b = a;
      break;
    case Aliasing::NoA: a = nullptr; break;
    case Aliasing::NoAInPlace:
      a = nullptr;
      dst = bWork.data() + bOffset;
      break;
  }
  reduceHost(c.type, c.op, dst, a, b, c.count, c.flags);

  Reference reference{c.type, c.op, c.op.kind == RedKind::PreMulSum && (c.flags & tutti::kern::kPreOnB),
                      c.op.kind == RedKind::SumPostDiv && (c.flags & tutti::kern::kPost)};
  const unsigned char* got = static_cast<const unsigned char*>(dst);
  size_t wrong = 0, firstWrong = 0;
  for (size_t i = 0; i < c.count; ++i) {
    if (!reference.match(got, aRef, bRef, i) && wrong++ == 0) firstWrong = i;
  }
  // Bytes around dst (outside [dst, dst + count)) must be untouched.
  bool guardsIntact = true;
  if (c.aliasing == Aliasing::Distinct || c.aliasing == Aliasing::AIsB || c.aliasing == Aliasing::NoA) {
    for (size_t byte = 0; byte < bytes; ++byte) {
      bool inside = byte >= c.dstOffset && byte < c.dstOffset + c.count * size;
      if (!inside && dstBuffer[byte] != 0) guardsIntact = false;
    }
  }
  if (wrong == 0 && guardsIntact) return "";
  std::string text = describe(c) + ": ";
  if (!guardsIntact) text += "wrote outside dst; ";
  if (wrong > 0) {
    text += std::to_string(wrong) + " wrong elements, first at " + std::to_string(firstWrong) + ": got " +
            std::to_string(tutti_test::toDouble(c.type, got, firstWrong)) +
            " from a=" + (aRef ? std::to_string(tutti_test::toDouble(c.type, aRef, firstWrong)) : std::string("null")) +
            " b=" + std::to_string(tutti_test::toDouble(c.type, bRef, firstWrong));
  }
  return text;
}

RedOp makeOp(RedKind kind, ncclDataType_t type, Rng& rng) {
  static const double kScalars[] = {0.5, -3.0, 1.0 / 3.0, 0.1, 1e-3, 1e5, 1.0 / 7.0};
  static const uint64_t kCounts[] = {1, 2, 3, 7, 200, 1000003};
  RedOp op;
  op.kind = kind;
  if (kind == RedKind::PreMulSum) {
    op.floatScalar = kScalars[rng.next() % 7];
    op.intScalar = rng.next();
  } else if (kind == RedKind::SumPostDiv) {
    op.intScalar = kCounts[rng.next() % 6];
  }
  return op;
}

// Large counts run the vector body for a long time and end in a tail; each type gets a sum
// between unaligned buffers, a PreMulSum in place, and a max or SumPostDiv without a.
void runLargeCounts(bool floating) {
  Rng rng{floating ? 3u : 2u};
  const size_t count = (size_t(1) << 20) + 3;
  const unsigned flags = tutti::kern::kPreOnB | tutti::kern::kPost;
  size_t failures = 0;
  for (ncclDataType_t type : tutti_test::allDataTypes()) {
    if (tutti_test::isFloatingType(type) != floating) continue;
    const Case cases[] = {
        {type, makeOp(RedKind::Sum, type, rng), flags, Aliasing::Distinct, count, 3, 1, 2},
        {type, makeOp(RedKind::PreMulSum, type, rng), flags, Aliasing::DstIsA, count, 5, 5, 0},
        {type, makeOp(RedKind::Max, type, rng), flags, Aliasing::DstIsB, count, 0, 7, 0},
        {type, makeOp(RedKind::SumPostDiv, type, rng), flags, Aliasing::NoA, count, 1, 0, 6},
    };
    for (const Case& c : cases) {
      std::string failure = runCase(c, rng);
      if (!failure.empty() && failures++ < 5) FAIL_CHECK(failure);
    }
  }
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("reduceHost: every type, operation, flag set and aliasing, small counts, odd addresses") {
  Rng rng{1};
  const size_t counts[] = {0, 1, 7, 1023};
  size_t cases = 0, failures = 0;
  for (ncclDataType_t type : tutti_test::allDataTypes()) {
    for (RedKind kind : kAllKinds) {
      for (unsigned flags = 0; flags < 4; ++flags) {
        for (Aliasing aliasing : kAllAliasings) {
          for (size_t count : counts) {
            for (int misaligned = 0; misaligned < 2; ++misaligned) {
              Case c{type, makeOp(kind, type, rng), flags, aliasing, count, 0, 0, 0};
              if (misaligned) {
                c.dstOffset = 1 + rng.next() % 7;
                c.aOffset = 1 + rng.next() % 7;
                c.bOffset = rng.next() % 8;
              }
              ++cases;
              std::string failure = runCase(c, rng);
              if (!failure.empty() && failures++ < 5) FAIL_CHECK(failure);
            }
          }
        }
      }
    }
  }
  CHECK(failures == 0);
  CHECK(cases == 12u * 6 * 4 * 7 * 4 * 2);
}

TEST_CASE("reduceHost: 1M+3 elements of integer types, unaligned and in place") { runLargeCounts(false); }

TEST_CASE("reduceHost: 1M+3 elements of floating types, unaligned and in place") { runLargeCounts(true); }

TEST_CASE("reduceHost: special values") {
  auto reduce1 = [](ncclDataType_t type, RedOp op, double a, double b, unsigned flags = 0) {
    unsigned char x[8], y[8], out[8];
    tutti_test::fromDouble(type, x, 0, a);
    tutti_test::fromDouble(type, y, 0, b);
    reduceHost(type, op, out, x, y, 1, flags);
    return tutti_test::toDouble(type, out, 0);
  };
  const RedOp sum{RedKind::Sum}, prod{RedKind::Prod}, max{RedKind::Max}, min{RedKind::Min};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();

  for (ncclDataType_t type : {ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2}) {
    CAPTURE(tutti::kern::dtypeName(type));
    // Max and min: NaN in either operand wins.
    CHECK(std::isnan(reduce1(type, max, nan, 1.0)));
    CHECK(std::isnan(reduce1(type, max, 1.0, nan)));
    CHECK(std::isnan(reduce1(type, min, nan, 1.0)));
    CHECK(std::isnan(reduce1(type, min, -1.0, nan)));
    CHECK(reduce1(type, max, -2.0, 3.0) == 3.0);
    CHECK(reduce1(type, min, -2.0, 3.0) == -2.0);
    CHECK(std::isnan(reduce1(type, sum, nan, 1.0)));
  }
  // Overflow: fp16 and bf16 go to inf, fp8 saturates.
  CHECK(reduce1(ncclFloat16, sum, 65504, 65504) == inf);
  CHECK(reduce1(ncclBfloat16, prod, 1e38, 1e38) == inf);
  CHECK(reduce1(ncclFloat8e4m3, sum, 448, 448) == 448);
  CHECK(reduce1(ncclFloat8e4m3, prod, -448, 448) == -448);
  CHECK(reduce1(ncclFloat8e5m2, sum, 57344, 57344) == 57344);
  CHECK(reduce1(ncclFloat32, sum, inf, -inf) != reduce1(ncclFloat32, sum, inf, -inf));  // NaN
  // Low precision rounds once per operation: 2048 + 1 is a tie in fp16, kept even.
  CHECK(reduce1(ncclFloat16, sum, 2048, 1) == 2048);
  CHECK(reduce1(ncclFloat16, sum, 2048, 3) == 2052);
  // PreMulSum keeps the scalar in float: 3 * (1/3 as float) rounds to exactly 1 in fp16,
  // where a scalar rounded to fp16 first (0.33325) would give 0.99976.
  RedOp third{RedKind::PreMulSum, 1.0 / 3.0, 1};
  CHECK(reduce1(ncclFloat16, third, 0, 3, tutti::kern::kPreOnB) == 1.0);
  // Integers wrap, and avg truncates toward zero.
  CHECK(reduce1(ncclInt8, sum, 127, 1) == -128);
  CHECK(reduce1(ncclUint8, prod, 16, 16) == 0);
  CHECK(reduce1(ncclInt32, prod, -2147483648.0, -1) == -2147483648.0);
  RedOp avg2{RedKind::SumPostDiv, 1.0, 2};
  CHECK(reduce1(ncclInt32, avg2, -4, -3, tutti::kern::kPost) == -3);
  CHECK(reduce1(ncclInt32, avg2, 4, 3, tutti::kern::kPost) == 3);
  RedOp avg200{RedKind::SumPostDiv, 1.0, 200};                            // a count the type cannot hold
  CHECK(reduce1(ncclInt8, avg200, -100, -100, tutti::kern::kPost) == 0);  // -200 wraps to 56
  CHECK(reduce1(ncclUint8, avg200, 250, 150, tutti::kern::kPost) == 0);   // 400 wraps to 144
  CHECK(reduce1(ncclInt64, avg200, -1000, -1000, tutti::kern::kPost) == -10);
}

TEST_CASE("reduceHost: bad arguments throw, count 0 touches nothing") {
  float x = 1, y = 2;
  CHECK_THROWS_AS(reduceHost(ncclNumTypes, RedOp{}, &x, &x, &y, 1, 0), tutti::Error);
  try {
    reduceHost(ncclDataType_t(13), RedOp{}, &x, &x, &y, 1, 0);
    FAIL("no throw");
  } catch (const tutti::Error& error) {
    CHECK(error.code() == tutti::ErrorCode::InvalidArgument);
    CHECK(std::string(error.what()).find("data type 13") != std::string::npos);
  }
  CHECK_THROWS_AS(reduceHost(ncclInt32, RedOp{RedKind::SumPostDiv, 1.0, 0}, &x, &x, &y, 1, tutti::kern::kPost),
                  tutti::Error);
  CHECK_THROWS_AS(reduceHost(ncclFloat32, RedOp{RedKind(17), 1.0, 1}, &x, &x, &y, 1, 0), tutti::Error);
  reduceHost(ncclFloat32, RedOp{}, nullptr, nullptr, nullptr, 0, 0);
  reduceHost(ncclFloat32, RedOp{}, &x, &x, &y, 0, 0);
  CHECK(x == 1);
}

TEST_CASE("dtypeSize and dtypeName cover every ncclDataType_t") {
  for (ncclDataType_t type : tutti_test::allDataTypes()) {
    CHECK(tutti::kern::dtypeSize(type) == elementBytes(type));
    CHECK(std::string(tutti::kern::dtypeName(type)) != "unknown");
    CHECK(tutti::kern::dtypeIsFloating(type) == tutti_test::isFloatingType(type));
  }
  CHECK(tutti::kern::dtypeSize(ncclNumTypes) == 0);
  CHECK(std::string(tutti::kern::dtypeName(ncclFloat32)) == "float32");
  CHECK(std::string(tutti::kern::dtypeName(ncclDataType_t(14))) == "unknown");
}
