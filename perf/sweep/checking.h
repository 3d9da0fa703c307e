// What a checking pass (-c) writes into the send buffers and expects in the receive buffers, and how an output is
// compared with it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "perf/sweep/collectives.h"
#include "perf/sweep/datatypes.h"

namespace tutti::perf {

// One rank's check of one operation: the collective, type and op it ran, and where the rank stood in its group.
struct CheckedOperation {
  const Collective& collective;
  const DataTypeInfo& type;
  const RedOpInfo& op;
  int groupRank, groupRanks, root;
  BufferCounts counts;
  int repetition;  // a new input pattern for each pass, so that a stale output cannot pass
};

// Writes the rank's inputs: counts.send elements into send.
void writeInputs(const CheckedOperation& op, char* send);

// The elements of output (the rank's receive buffer, counts.recv elements or fewer) that differ from the expected
// result beyond the type's rounding, and the first of them.
struct WrongElements {
  int64_t count = 0;
  size_t first = 0;
  double expected = 0, got = 0;
};
WrongElements compareOutputs(const CheckedOperation& op, const char* output, size_t checked);

// TUTTI_PERF_CORRUPT=rank:offset (tests only): flips element offset of rank's output before the check.
void injectCorruption(char* output, size_t checked, const DataTypeInfo& type, int rank);

}  // namespace tutti::perf
