// The per-size loop of a rank (rank_runner.h): the warm-up, then for every size each placement timed (-n, -m, -z,
// -a, -C, -I) and checked (-c), one table row per size.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "perf/sweep/checking.h"
#include "perf/sweep/machine.h"
#include "perf/sweep/rank_runner.h"
#include "tutti/tutti.h"

namespace tutti::perf {

// The op a test runs with: mulsum is a PreMulSum by 2 made for this communicator and type.
void RankRunner::runTest(const DataTypeInfo& type, const RedOpInfo& opInfo, int root) {
  ncclRedOp_t op = opInfo.op;
  bool custom = false;
  if (opInfo.op == ncclNumOps && coll_.usesOp && std::string(coll_.name) != "sendrecv") {
    unsigned char scalar[8];
    writeElement(type.type, scalar, 0, 2.0);
    check(ncclRedOpCreatePreMulSum(&op, scalar, type.type, ncclScalarHostImmediate, comm_), rank_, "ncclRedOpCreatePreMulSum");
    custom = true;
  } else if (opInfo.op == ncclNumOps) {
    op = ncclSum;
  }
  try {
    runSizes(type, opInfo, op, root);
  } catch (...) {
    if (custom) ncclRedOpDestroy(op, comm_);
    throw;
  }
  if (custom) check(ncclRedOpDestroy(op, comm_), rank_, "ncclRedOpDestroy");
}

BufferCounts RankRunner::countsFor(size_t bytes, const DataTypeInfo& type) const {
  return coll_.counts(bytes / type.size, type.size, groupRanks_);
}

void RankRunner::runSizes(const DataTypeInfo& type, const RedOpInfo& opInfo, ncclRedOp_t op, int root) {
  ctx_.watchdog.busy(localIndex_, std::string("the barrier before the warm-up of ") + coll_.name + " " + type.name);
  barrier();
  // Warm-up over all sizes, doubling, as nccl-tests does.
  for (size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes; bytes = bytes ? bytes * 2 : 1) {
    ctx_.watchdog.busy(localIndex_, std::string("the warm-up of ") + coll_.name + " " + std::to_string(bytes) + " B " + type.name);
    BufferCounts counts = countsFor(bytes, type);
    for (int i = 0; i < opt_.warmupIters; i++) launch(type, op, root, false, counts);
    synchronize();
  }
  ctx_.watchdog.idle(localIndex_);
  for (long cycle = 0; opt_.runCycles == 0 || cycle < opt_.runCycles; cycle++) {
    for (size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes;) {
      runSize(type, opInfo, op, root, bytes);
      size_t next = opt_.stepFactor > 1 ? bytes * opt_.stepFactor : bytes + opt_.stepBytes;
      if (next <= bytes) next = bytes ? bytes * 2 : 1;  // -b 0 with -f, or -i 0 with -b == -e
      if (bytes == opt_.maxBytes) break;
      bytes = next;
    }
  }
}

// What tutti's selector runs for this call, "algorithm/protocol/channels" (for example
// "ring/Simple/2ch"); the collective table's name if the library cannot say.
std::string RankRunner::algorithmFor(size_t count, ncclDataType_t type) const {
  std::string collective;
  for (const char* c = coll_.name; *c; c++)
    if (*c != '_') collective += *c;
  if (collective == "sendrecv" || collective == "hypercube") collective = "send";
  char name[64] = {};
  int channels = 0;
  if (tuttiCommAlgorithm(comm_, collective.c_str(), count, type, name, sizeof name, &channels) != ncclSuccess)
    return coll_.algorithm;
  return std::string(name) + "/Simple/" + std::to_string(channels) + "ch";
}

void RankRunner::runSize(const DataTypeInfo& type, const RedOpInfo& opInfo, ncclRedOp_t op, int root, size_t bytes) {
  BufferCounts counts = countsFor(bytes, type);
  ResultRow row;
  row.bytes = std::max(counts.send, counts.recv) * type.size;
  row.count = counts.param;
  row.type = type.name;
  row.redop = coll_.usesOp ? opInfo.name : "none";
  row.root = root;
  row.algorithm = algorithmFor(counts.param, type.type);
  for (bool inPlace : {false, true}) {
    if (inPlace && !coll_.runsInPlace) continue;  // the row keeps zeros and N/A there
    ctx_.watchdog.busy(localIndex_, std::string(coll_.name) + " " + std::to_string(row.bytes) + " B " + type.name + (inPlace ? " in-place" : " out-of-place"));
    Timing timing = timePlacement(type, op, root, inPlace, counts);
    double seconds = timing.seconds;
    Measurement& m = inPlace ? row.inPlace : row.outOfPlace;
    m.timeUs = seconds * 1e6;
    coll_.bandwidth(counts.param, type.size, seconds, groupRanks_, &m.algBw, &m.busBw);
    if (opt_.check > 0) {
      int64_t wrong = 0;
      for (int pass = 0; pass < opt_.check && wrong == 0; pass++) {
        int64_t mine = checkPlacement(type, opInfo, op, root, inPlace, counts, row.bytes);
        // Sum of wrong elements, and how many ranks saw any (nccl-tests' out-of-bounds count).
        wrong = int64_t(combine(double(mine), ncclSum));
        int ranksWrong = int(combine(mine ? 1.0 : 0.0, ncclSum));
        if (wrong) report_.outOfBounds += ranksWrong;
      }
      m.wrong = wrong;
    }
    if (opt_.perIterTiming) m.perIteration = iterationStatsOverRanks(timing.iterationSeconds);
    ctx_.watchdog.idle(localIndex_);
    busBwSum_ += m.busBw;
    busBwCount_++;
  }
  if (opt_.reportTimestamps) row.timestamp = nowString();
  if (printing()) std::printf("%s", tableRow(row).c_str()), std::fflush(stdout);
  report_.rows.push_back(row);
}

void RankRunner::launch(const DataTypeInfo& type, ncclRedOp_t op, int root, bool inPlace, const BufferCounts& counts) {
  char* recv = recvBuffer_->bytes() + size_t(opt_.unalign) * type.size;
  char* send = sendBuffer_->bytes() + size_t(opt_.unalign) * type.size;
  const void* sendPointer = inPlace ? recv + counts.sendInPlaceOffset * size_t(groupRank_) * type.size : send;
  void* recvPointer = inPlace ? recv + counts.recvInPlaceOffset * size_t(groupRank_) * type.size : recv;
  check(coll_.run(sendPointer, recvPointer, counts.param, type.type, op, root, comm_, stream_), rank_, std::string("nccl ") + coll_.name);
}

RankRunner::Timing RankRunner::timePlacement(const DataTypeInfo& type, ncclRedOp_t op, int root, bool inPlace, const BufferCounts& counts) {
  barrier();
  Timing timing;
  double collectiveOnly = 0;
  Clock::time_point start = Clock::now();
  for (int iter = 0; iter < opt_.iters; iter++) {
    Clock::time_point iterStart = Clock::now();
    if (opt_.aggIters > 1) check(ncclGroupStart(), rank_, "ncclGroupStart");
    for (int a = 0; a < opt_.aggIters; a++) launch(type, op, root, inPlace, counts);
    if (opt_.aggIters > 1) check(ncclGroupEnd(), rank_, "ncclGroupEnd");
    // Host mode has no stream events: an iteration is timed on the host clock until its stream is done.
    if (opt_.blocking || opt_.perIterTiming) synchronize();
    if (opt_.perIterTiming) timing.iterationSeconds.push_back(secondsSince(iterStart) / opt_.aggIters);
    if (opt_.blocking == 3) collectiveOnly += secondsSince(iterStart);
    if (opt_.blocking == 1 || opt_.blocking == 3) barrier();
  }
  double cpuSeconds = secondsSince(start);
  synchronize();
  double seconds = opt_.blocking == 3 ? collectiveOnly : secondsSince(start);
  double perOp = (opt_.reportCpuTime ? cpuSeconds : seconds) / (opt_.iters * opt_.aggIters);
  timing.seconds = combineTime(perOp);
  return timing;
}

// One checking pass: fresh inputs, one operation, every output element against the reference.
int64_t RankRunner::checkPlacement(const DataTypeInfo& type, const RedOpInfo& opInfo, ncclRedOp_t op, int root, bool inPlace,
                                   const BufferCounts& counts, size_t bytes) {
  repetition_++;
  CheckedOperation checked{coll_, type, opInfo, groupRank_, groupRanks_, root, counts, repetition_};
  char* recv = recvBuffer_->bytes() + size_t(opt_.unalign) * type.size;
  char* send = inPlace ? recv + counts.sendInPlaceOffset * size_t(groupRank_) * type.size : sendBuffer_->bytes() + size_t(opt_.unalign) * type.size;
  std::memset(recv, 0xff, std::max(counts.recv, counts.send) * type.size);  // -1 or NaN: never a right answer
  writeInputs(checked, send);
  launch(type, op, root, inPlace, counts);
  synchronize();
  char* output = recv + (inPlace ? counts.recvInPlaceOffset * size_t(groupRank_) * type.size : 0);
  size_t elements = coll_.checkedCount(counts, groupRank_, root);
  injectCorruption(output, elements, type, rank_);
  WrongElements wrong = compareOutputs(checked, output, elements);
  if (wrong.count) {
    std::lock_guard lock(ctx_.outputMutex);
    std::fprintf(stderr, "%s: rank %d: %s %zu B %s %s root %d %s: %lld wrong elements, first at element %zu (expected %g, got %g)\n",
                 ctx_.program.c_str(), rank_, coll_.name, bytes, type.name, opInfo.name, root, inPlace ? "in-place" : "out-of-place",
                 static_cast<long long>(wrong.count), wrong.first, wrong.expected, wrong.got);
  }
  return wrong.count;
}

}  // namespace tutti::perf
