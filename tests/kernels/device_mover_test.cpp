// The device executor's data movement (kernels/device/block_mover.h), run on the emulated device
// with several threads per block, against the host executor's reduceHost: bitwise equal for every
// type, reduction, flag set and aliasing case, at aligned and unaligned addresses and counts that
// leave partial 16-byte packs. reduceHost itself is checked against a float64 reference
// (reduce_test.cpp).
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/device/block_mover.h"
#include "kernels/emulated/emulated_device.h"
#include "kernels/host_reduce.h"
#include "tests/common/reference_support.h"

namespace {

using tutti::kern::RedKind;
using tutti::kern::RedOp;

uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Bytes of which about half are raw patterns and half small values of the type (so that sums
// round rather than overflow).
void fill(ncclDataType_t type, unsigned char* p, size_t n, uint64_t seed) {
  const size_t size = tutti_test::elementBytes(type);
  for (size_t i = 0; i < n; i++) {
    uint64_t raw = mix(seed * 1000003 + i);
    if (tutti_test::isFloatingType(type) && (raw & 1u))
      tutti_test::fromDouble(type, p, i, double(int64_t(raw % 8192) - 4096) / 64);
    else
      std::memcpy(p + i * size, &raw, size);
  }
}

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
                                 ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

}  // namespace

TEST_CASE("device block reductions equal reduceHost bitwise, every type, op, flag and aliasing", "[kernels][device]") {
  const RedKind kinds[] = {RedKind::Sum, RedKind::Prod,      RedKind::Max,
                           RedKind::Min, RedKind::PreMulSum, RedKind::SumPostDiv};
  const int threads = GENERATE(1, 3, 4);
  for (ncclDataType_t type : kTypes) {
    const size_t size = tutti_test::elementBytes(type);
    for (RedKind kind : kinds)
      for (unsigned flags : {0u, 1u, 2u, 3u})
        for (size_t n : {size_t(0), size_t(1), size_t(17), size_t(1000)})
          for (size_t misalign : {size_t(0), size})             // whole elements off a 16-byte boundary
            for (int aliasing = 0; aliasing < 4; aliasing++) {  // distinct, dst==a, no a, no a with dst==b
              RedOp op;
              op.kind = kind;
              op.floatScalar = 0.375;
              op.intScalar = kind == RedKind::SumPostDiv ? 3 : 5;
              const size_t bytes = n * size + 64;
              std::vector<unsigned char> a(bytes), b(bytes), hostDst(bytes), devDst(bytes), devDst2(bytes);
              unsigned char* pa = a.data() + 16 + misalign;
              unsigned char* pb = b.data() + 16;  // b stays aligned: the loops then mix alignments
              fill(type, pa, n, 1);
              fill(type, pb, n, 2);
              unsigned char* hd = hostDst.data() + 16 + misalign;
              unsigned char* dd = devDst.data() + 16 + misalign;
              const unsigned char* ha = pa;
              const unsigned char* da = pa;
              if (aliasing == 1) {
                std::memcpy(hostDst.data(), a.data(), bytes);
                std::memcpy(devDst.data(), a.data(), bytes);
                ha = hd;
                da = dd;
              } else if (aliasing >= 2) {
                ha = da = nullptr;
              }
              const unsigned char* hb = pb;
              const unsigned char* db = pb;
              std::vector<unsigned char> bHost = b, bDev = b;
              if (aliasing == 3) {  // dst == b, in place
                hd = bHost.data() + 16;
                dd = bDev.data() + 16;
                hb = hd;
                db = dd;
              }
              tutti::kern::reduceHost(type, op, hd, ha, hb, n, flags);
              tutti::kern::OpWork work{};
              work.dtype = uint8_t(type);
              work.eltSize = uint8_t(size);
              work.redop = op;
              const tutti::kern::dev::BlockMover mover{&work, op};
              unsigned char* dd2 = devDst2.data() + 16 + misalign;
              tutti::kern::dev::runEmulatedBlock(threads, [&] {
                mover.reduce(reinterpret_cast<char*>(dd), aliasing == 0 ? reinterpret_cast<char*>(dd2) : nullptr,
                             reinterpret_cast<const char*>(da), reinterpret_cast<const char*>(db), n, flags);
              });
              INFO("type " << type << " kind " << int(kind) << " flags " << flags << " n " << n << " misalign "
                           << misalign << " aliasing " << aliasing << " threads " << threads);
              REQUIRE(std::memcmp(hd, dd, n * size) == 0);
              if (aliasing == 0) REQUIRE(std::memcmp(hd, dd2, n * size) == 0);
            }
  }
}

TEST_CASE("device block copies move every byte at any alignment", "[kernels][device]") {
  const int threads = GENERATE(1, 4);
  for (size_t bytes : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(33), size_t(4099)})
    for (size_t dstOff : {size_t(0), size_t(1), size_t(4), size_t(8)})
      for (size_t srcOff : {size_t(0), size_t(3), size_t(4), size_t(8)}) {
        std::vector<char> src(bytes + 32), dst(bytes + 32, 0), dst2(bytes + 32, 0);
        for (size_t i = 0; i < src.size(); i++) src[i] = char(mix(i) & 0xff);
        tutti::kern::dev::runEmulatedBlock(threads, [&] {
          tutti::kern::dev::blockCopy(dst.data() + dstOff, dst2.data() + dstOff, src.data() + srcOff, bytes);
        });
        INFO(bytes << " bytes, dst +" << dstOff << ", src +" << srcOff);
        REQUIRE(std::memcmp(dst.data() + dstOff, src.data() + srcOff, bytes) == 0);
        REQUIRE(std::memcmp(dst2.data() + dstOff, src.data() + srcOff, bytes) == 0);
        for (size_t i = 0; i < dstOff; i++) REQUIRE(dst[i] == 0);
        for (size_t i = dstOff + bytes; i < dst.size(); i++) REQUIRE(dst[i] == 0);
      }
}
