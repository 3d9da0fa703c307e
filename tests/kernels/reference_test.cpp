// The shared float64 reference (tests/common/reference_support) checked on its own and used
// the way collective tests use it: reductions over R ranks built from reduceHost, in chain
// and tree order, must pass checkReduced, and a reduction missing a rank must not.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/host_reduce.h"
#include "tests/common/reference_support.h"

namespace {

using tutti::kern::RedKind;
using tutti::kern::RedOp;
using tutti_test::elementBytes;

const ncclRedOp_t kBuiltInOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

// How the runtime maps a built-in op onto the executors' RedOp.
RedOp executorOp(ncclDataType_t type, ncclRedOp_t op, int nranks) {
  switch (op) {
    case ncclProd: return RedOp{RedKind::Prod};
    case ncclMax: return RedOp{RedKind::Max};
    case ncclMin: return RedOp{RedKind::Min};
    case ncclAvg:
      if (tutti_test::isFloatingType(type)) return RedOp{RedKind::PreMulSum, 1.0 / nranks, 1};
      return RedOp{RedKind::SumPostDiv, 1.0, uint64_t(nranks)};
    default: return RedOp{RedKind::Sum};
  }
}

using Buffer = std::vector<unsigned char>;

// Reduces ranks [first, last) of inputs into a new buffer: as a chain (first, then each next
// rank added on), or as a tree (halves reduced separately, then combined). Every rank's input
// gets the pre-multiplication (kPreOnB) when it first enters; the final combination gets kPost.
Buffer reduceRanks(ncclDataType_t type, const RedOp& op, const std::vector<Buffer>& inputs, int first, int last,
                   size_t count, bool tree, bool outermost) {
  unsigned post = outermost ? tutti::kern::kPost : 0u;
  Buffer result(count * elementBytes(type));
  if (last - first == 1) {
    tutti::kern::reduceHost(type, op, result.data(), nullptr, inputs[first].data(), count, tutti::kern::kPreOnB | post);
    return result;
  }
  if (tree) {
    int middle = (first + last) / 2;
    Buffer left = reduceRanks(type, op, inputs, first, middle, count, tree, false);
    Buffer right = reduceRanks(type, op, inputs, middle, last, count, tree, false);
    tutti::kern::reduceHost(type, op, result.data(), left.data(), right.data(), count, post);
    return result;
  }
  tutti::kern::reduceHost(type, op, result.data(), nullptr, inputs[first].data(), count, tutti::kern::kPreOnB);
  for (int rank = first + 1; rank < last; ++rank) {
    unsigned flags = tutti::kern::kPreOnB | (rank == last - 1 ? post : 0u);
    tutti::kern::reduceHost(type, op, result.data(), result.data(), inputs[rank].data(), count, flags);
  }
  return result;
}

}  // namespace

TEST_CASE("reference: conversions of integers wrap and truncate, floats round and saturate") {
  unsigned char element[8];
  tutti_test::fromDouble(ncclInt8, element, 0, 300);
  CHECK(tutti_test::toDouble(ncclInt8, element, 0) == 44);
  tutti_test::fromDouble(ncclUint8, element, 0, -1);
  CHECK(tutti_test::toDouble(ncclUint8, element, 0) == 255);
  tutti_test::fromDouble(ncclInt32, element, 0, -2.7);
  CHECK(tutti_test::toDouble(ncclInt32, element, 0) == -2);
  tutti_test::fromDouble(ncclUint64, element, 0, 18446744073709549568.0);  // 2^64 - 2048
  CHECK(tutti_test::toDouble(ncclUint64, element, 0) == 18446744073709549568.0);

  CHECK(tutti_test::roundToType(ncclFloat16, 1.0 + 1.0 / 2048) == 1.0);  // tie, even
  CHECK(tutti_test::roundToType(ncclFloat16, 1.0 + 3.0 / 2048) == 1.0 + 2.0 / 1024);
  CHECK(std::isinf(tutti_test::roundToType(ncclFloat16, 70000)));
  CHECK(tutti_test::roundToType(ncclFloat8e4m3, 1000) == 448);
  CHECK(tutti_test::roundToType(ncclFloat8e5m2, -1e9) == -57344);
  CHECK(tutti_test::roundToType(ncclBfloat16, 1.0 / 3) == 0.333984375);
  CHECK(tutti_test::roundToType(ncclFloat32, 0.1) == double(0.1f));
  CHECK(std::isnan(tutti_test::roundToType(ncclFloat8e4m3, NAN)));

  CHECK(tutti_test::ulpOf(ncclFloat16, 1.0) == std::ldexp(1.0, -10));
  CHECK(tutti_test::ulpOf(ncclFloat16, 0.0) == std::ldexp(1.0, -24));
  CHECK(tutti_test::ulpOf(ncclFloat8e4m3, 300) == 32);
  CHECK(tutti_test::ulpOf(ncclInt32, 5) == 0);
  CHECK(tutti_test::tolerance(ncclFloat32, ncclMax, 8, 1.0) == 0);
  CHECK(tutti_test::tolerance(ncclInt8, ncclSum, 8, 1.0) == 0);
  CHECK(tutti_test::tolerance(ncclFloat16, ncclSum, 2, 2.0) == std::ldexp(1.0, -10));  // half an ulp of 2
  CHECK(tutti_test::tolerance(ncclFloat16, ncclSum, 5, 2.0) == 4 * std::ldexp(1.0, -10));
}

TEST_CASE("reference: generated inputs are representable and sized as documented") {
  for (ncclDataType_t type : tutti_test::allDataTypes()) {
    for (ncclRedOp_t op : kBuiltInOps) {
      for (int nranks : {1, 2, 8, 300}) {
        for (size_t index = 0; index < 200; ++index) {
          for (int rank = 0; rank < nranks; rank += 1 + nranks / 7) {
            double v = tutti_test::inputValue(type, op, nranks, rank, index);
            INFO(tutti::kern::dtypeName(type) << " op " << int(op) << " rank " << rank << " index " << index);
            REQUIRE(tutti_test::roundToType(type, v) == v);
            if (op == ncclProd) REQUIRE(std::fabs(v) <= 4);
          }
          if (op == ncclProd) REQUIRE(std::fabs(tutti_test::expectedValue(type, op, nranks, index)) <= 16);
        }
      }
    }
  }
}

TEST_CASE("reference: reductions through reduceHost pass checkReduced in chain and tree order") {
  const size_t count = 1000;
  size_t failures = 0;
  for (ncclDataType_t type : tutti_test::allDataTypes()) {
    for (ncclRedOp_t op : kBuiltInOps) {
      for (int nranks : {1, 2, 3, 8, 17}) {
        std::vector<Buffer> inputs(nranks, Buffer(count * elementBytes(type)));
        for (int rank = 0; rank < nranks; ++rank)
          tutti_test::fillInput(type, op, nranks, rank, inputs[rank].data(), count, 0);
        RedOp executor = executorOp(type, op, nranks);
        for (bool tree : {false, true}) {
          Buffer result = reduceRanks(type, executor, inputs, 0, nranks, count, tree, true);
          std::string failure = tutti_test::checkReduced(type, op, nranks, result.data(), count, 0);
          if (!failure.empty() && failures++ < 5) {
            FAIL_CHECK(tutti::kern::dtypeName(type)
                       << " op " << int(op) << " ranks " << nranks << (tree ? " tree: " : " chain: ") << failure);
          }
        }
      }
    }
  }
  CHECK(failures == 0);
}

TEST_CASE("reference: a reduction that misses a rank fails checkReduced") {
  const size_t count = 1000;
  for (ncclDataType_t type : tutti_test::allDataTypes()) {
    for (ncclRedOp_t op : kBuiltInOps) {
      for (int nranks : {2, 3, 8}) {
        std::vector<Buffer> inputs(nranks, Buffer(count * elementBytes(type)));
        for (int rank = 0; rank < nranks; ++rank)
          tutti_test::fillInput(type, op, nranks, rank, inputs[rank].data(), count, 0);
        // The last rank's contribution is lost; avg still divides by nranks.
        Buffer result = reduceRanks(type, executorOp(type, op, nranks), inputs, 0, nranks - 1, count, false, true);
        INFO(tutti::kern::dtypeName(type) << " op " << int(op) << " ranks " << nranks);
        CHECK_FALSE(tutti_test::checkReduced(type, op, nranks, result.data(), count, 0).empty());
      }
    }
  }
}

TEST_CASE("reference: checkReduced honours firstIndex") {
  const size_t count = 64, offset = 1000;
  std::vector<Buffer> inputs(4, Buffer(count * 4));
  for (int rank = 0; rank < 4; ++rank)
    tutti_test::fillInput(ncclInt32, ncclSum, 4, rank, inputs[rank].data(), count, offset);
  Buffer result = reduceRanks(ncclInt32, RedOp{RedKind::Sum}, inputs, 0, 4, count, false, true);
  CHECK(tutti_test::checkReduced(ncclInt32, ncclSum, 4, result.data(), count, offset).empty());
  CHECK_FALSE(tutti_test::checkReduced(ncclInt32, ncclSum, 4, result.data(), count, 0).empty());
}
