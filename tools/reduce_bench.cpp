// A benchmark of reduceHost beside memcpy (not a test; it measures an internal function, so it is a tool that
// links the static library). Built as build/tools/reduce_bench.
// Prints GB/s of bytes moved (two inputs read and one output written per element) beside memcpy.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels/host_reduce.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double secondsPerCall(F&& call) {
  call();  // warm: pages touched, caches filled
  int calls = 0;
  auto start = Clock::now();
  double elapsed = 0;
  while (elapsed < 0.3) {
    call();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return elapsed / calls;
}

}  // namespace

int main() {
  using tutti::kern::RedKind;
  using tutti::kern::RedOp;
  const size_t bytes = size_t(4) << 20;
  std::vector<unsigned char> a(bytes + 64, 1), b(bytes + 64, 2), dst(bytes + 64, 0);

  double copy = secondsPerCall([&] { std::memcpy(dst.data(), a.data(), bytes); });
  std::printf("%-28s %8.2f GB/s (2 x 4 MiB moved)\n", "memcpy 4 MiB", 2.0 * bytes / copy / 1e9);

  struct Row {
    const char* name;
    ncclDataType_t type;
    RedOp op;
    unsigned flags;
  };
  const Row rows[] = {
      {"float32 sum", ncclFloat32, RedOp{RedKind::Sum}, 0},
      {"float32 premulsum", ncclFloat32, RedOp{RedKind::PreMulSum, 0.25, 1}, tutti::kern::kPreOnB},
      {"float32 max", ncclFloat32, RedOp{RedKind::Max}, 0},
      {"float64 sum", ncclFloat64, RedOp{RedKind::Sum}, 0},
      {"int32 sum", ncclInt32, RedOp{RedKind::Sum}, 0},
      {"int64 prod", ncclInt64, RedOp{RedKind::Prod}, 0},
      {"float16 sum", ncclFloat16, RedOp{RedKind::Sum}, 0},
      {"bfloat16 sum", ncclBfloat16, RedOp{RedKind::Sum}, 0},
      {"float8e4m3 sum", ncclFloat8e4m3, RedOp{RedKind::Sum}, 0},
      {"float8e5m2 sum", ncclFloat8e5m2, RedOp{RedKind::Sum}, 0},
  };
  for (const Row& row : rows) {
    size_t n = bytes / tutti::kern::dtypeSize(row.type);
    double distinct = secondsPerCall(
        [&] { tutti::kern::reduceHost(row.type, row.op, dst.data(), a.data(), b.data(), n, row.flags); });
    double inPlace = secondsPerCall(
        [&] { tutti::kern::reduceHost(row.type, row.op, dst.data(), dst.data(), b.data(), n, row.flags); });
    double unaligned = secondsPerCall(
        [&] { tutti::kern::reduceHost(row.type, row.op, dst.data() + 1, a.data() + 3, b.data() + 2, n, row.flags); });
    std::printf("%-28s %8.2f GB/s  in place %8.2f GB/s  unaligned %8.2f GB/s  (%.2f Gelem/s)\n", row.name,
                3.0 * bytes / distinct / 1e9, 3.0 * bytes / inPlace / 1e9, 3.0 * bytes / unaligned / 1e9,
                n / distinct / 1e9);
  }
  return 0;
}
