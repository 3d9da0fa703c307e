// Checking passes (checking.h): inputs as small integers, exact in every type, and the reference they reduce to.
#include "perf/sweep/checking.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tutti::perf {
namespace {

double inputValue(const CheckedOperation& op, int rank, size_t index) {
  // Small integers: exact in every type, so sums over a few ranks are exact even in fp8; prod stays in {1, 2}.
  size_t range = op.op.op == ncclProd ? 2 : 4;
  return double(1 + (size_t(rank) * 7 + index * 3 + size_t(op.repetition)) % range);
}

double reference(const CheckedOperation& op, size_t index) {
  double acc = inputValue(op, 0, index) * (op.op.op == ncclNumOps ? 2 : 1);
  for (int k = 1; k < op.groupRanks; k++) {
    double x = inputValue(op, k, index);
    switch (op.op.op) {
      case ncclProd: acc *= x; break;
      case ncclMax: acc = std::max(acc, x); break;
      case ncclMin: acc = std::min(acc, x); break;
      case ncclNumOps: acc += 2 * x; break;
      default: acc += x; break;
    }
  }
  if (op.op.op == ncclAvg) acc = op.type.isInteger ? std::trunc(acc / op.groupRanks) : acc / op.groupRanks;
  return acc;
}

}  // namespace

void writeInputs(const CheckedOperation& op, char* send) {
  for (size_t i = 0; i < op.counts.send; i++) writeElement(op.type.type, send, i, inputValue(op, op.groupRank, i));
}

WrongElements compareOutputs(const CheckedOperation& op, const char* output, size_t checked) {
  InputValue input = [&](int rank, size_t index) { return inputValue(op, rank, index); };
  ReducedValue reduced = [&](size_t index) { return reference(op, index); };
  const DataTypeInfo& type = op.type;
  WrongElements wrong;
  for (size_t i = 0; i < checked; i++) {
    double want = op.collective.expected(i, op.groupRank, op.groupRanks, op.root, op.counts, input, reduced);
    unsigned char rounded[8];
    writeElement(type.type, rounded, 0, want);
    want = readElement(type.type, rounded, 0);
    double got = readElement(type.type, output, i);
    double tolerance = type.isInteger ? 0 : 2.0 * op.groupRanks * type.epsilon * std::fabs(want);
    if (!(std::fabs(got - want) <= tolerance)) {
      if (wrong.count == 0) wrong.first = i, wrong.expected = want, wrong.got = got;
      wrong.count++;
    }
  }
  return wrong;
}

void injectCorruption(char* output, size_t checked, const DataTypeInfo& type, int rank) {
  const char* hook = std::getenv("TUTTI_PERF_CORRUPT");
  if (!hook) return;
  int target = -1;
  unsigned long long offset = 0;
  if (std::sscanf(hook, "%d:%llu", &target, &offset) != 2 || target != rank || offset >= checked) return;
  output[offset * type.size] = char(~output[offset * type.size]);
}

}  // namespace tutti::perf
