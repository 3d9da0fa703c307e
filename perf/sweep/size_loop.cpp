// The per-size loop of a thread's ranks (thread_runner.h): the warm-up, then for every size each placement timed
// (-n, -m, -z, -a, -C, -I, -G) and checked (-c), one table row per size.
#include <algorithm>
#include <cstdio>

#include "perf/sweep/checking.h"
#include "perf/sweep/machine.h"
#include "perf/sweep/thread_runner.h"
#include "tutti/tutti.h"

namespace tutti::perf {

void ThreadRunner::runTest(const DataTypeInfo& type, const RedOpInfo& opInfo, int root) {
  try {
    makeOps(type, opInfo);
    runSizes(type, opInfo, root);
  } catch (...) {
    destroyOps(false);
    throw;
  }
  destroyOps(true);
}

// The op each rank runs the test with: mulsum is a PreMulSum by 2 made for the rank's communicator and the type.
void ThreadRunner::makeOps(const DataTypeInfo& type, const RedOpInfo& opInfo) {
  for (Rank& r : ranks_) {
    r.op = opInfo.op == ncclNumOps ? ncclSum : opInfo.op;
    if (opInfo.op != ncclNumOps || !coll_.usesOp || std::string(coll_.name) == "sendrecv") continue;
    unsigned char scalar[8];
    writeElement(type.type, scalar, 0, 2.0);
    check(ncclRedOpCreatePreMulSum(&r.op, scalar, type.type, ncclScalarHostImmediate, r.comm), r.rank,
          "ncclRedOpCreatePreMulSum");
    r.customOp = true;
  }
}

void ThreadRunner::destroyOps(bool checked) {
  for (Rank& r : ranks_) {
    if (!r.customOp) continue;
    r.customOp = false;
    ncclResult_t result = ncclRedOpDestroy(r.op, r.comm);
    if (checked) check(result, r.rank, "ncclRedOpDestroy");
  }
}

BufferCounts ThreadRunner::countsFor(size_t bytes, const DataTypeInfo& type) const {
  return coll_.counts(bytes / type.size, type.size, ranks_.front().groupRanks);
}

void ThreadRunner::runSizes(const DataTypeInfo& type, const RedOpInfo& opInfo, int root) {
  busy(std::string("the barrier before the warm-up of ") + coll_.name + " " + type.name);
  barrier();
  // Warm-up over all sizes, doubling, as nccl-tests does.
  for (size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes; bytes = bytes ? bytes * 2 : 1) {
    busy(std::string("the warm-up of ") + coll_.name + " " + std::to_string(bytes) + " B " + type.name);
    BufferCounts counts = countsFor(bytes, type);
    for (int i = 0; i < opt_.warmupIters; i++) launch(type, root, false, counts);
    synchronize();
  }
  idle();
  for (long cycle = 0; opt_.runCycles == 0 || cycle < opt_.runCycles; cycle++) {
    for (size_t bytes = opt_.minBytes; bytes <= opt_.maxBytes;) {
      runSize(type, opInfo, root, bytes);
      size_t next = opt_.stepFactor > 1 ? bytes * opt_.stepFactor : bytes + opt_.stepBytes;
      if (next <= bytes) next = bytes ? bytes * 2 : 1;  // -b 0 with -f, or -i 0 with -b == -e
      if (bytes == opt_.maxBytes) break;
      bytes = next;
    }
  }
}

// What tutti's selector runs for this call, "algorithm/protocol/channels" (for example
// "ring/Simple/2ch", "ring/LL/1ch"); the collective table's name if the library cannot say.
std::string ThreadRunner::algorithmFor(size_t count, ncclDataType_t type) const {
  std::string collective;
  for (const char* c = coll_.name; *c; c++)
    if (*c != '_') collective += *c;
  if (collective == "sendrecv" || collective == "hypercube") collective = "send";
  char name[64] = {};
  int channels = 0;
  if (tuttiCommAlgorithm(ranks_.front().comm, collective.c_str(), count, type, name, sizeof name, &channels) !=
      ncclSuccess)
    return coll_.algorithm;
  char protocol[16] = "Simple";
  if (tuttiCommProtocol(ranks_.front().comm, collective.c_str(), count, type, protocol, sizeof protocol) != ncclSuccess)
    std::snprintf(protocol, sizeof protocol, "Simple");
  return std::string(name) + "/" + protocol + "/" + std::to_string(channels) + "ch";
}

void ThreadRunner::runSize(const DataTypeInfo& type, const RedOpInfo& opInfo, int root, size_t bytes) {
  BufferCounts counts = countsFor(bytes, type);
  ResultRow row;
  row.bytes = std::max(counts.send, counts.recv) * type.size;
  row.count = counts.param;
  row.type = type.name;
  row.redop = coll_.usesOp ? opInfo.name : "none";
  row.root = root;
  row.algorithm = algorithmFor(counts.param, type.type);
  for (bool inPlace : {false, true}) {
    if (inPlace && coll_.noInPlace) continue;  // the row keeps zeros and N/A there
    busy(std::string(coll_.name) + " " + std::to_string(row.bytes) + " B " + type.name +
         (inPlace ? " in-place" : " out-of-place"));
    Timing timing = timePlacement(type, root, inPlace, counts);
    double seconds = timing.seconds;
    Measurement& m = inPlace ? row.inPlace : row.outOfPlace;
    m.timeUs = seconds * 1e6;
    coll_.bandwidth(counts.param, type.size, seconds, ranks_.front().groupRanks, &m.algBw, &m.busBw);
    if (opt_.check > 0) {
      int64_t wrong = 0;
      for (int pass = 0; pass < opt_.check && wrong == 0; pass++) {
        std::vector<int64_t> mine = checkPlacement(type, opInfo, root, inPlace, counts, row.bytes);
        // Sum of wrong elements, and how many ranks saw any (nccl-tests' out-of-bounds count).
        std::vector<double> elements, ranks;
        for (int64_t w : mine) elements.push_back(double(w)), ranks.push_back(w ? 1.0 : 0.0);
        wrong = int64_t(combine(elements, ncclSum));
        int ranksWrong = int(combine(ranks, ncclSum));
        if (wrong) report_.outOfBounds += ranksWrong;
      }
      m.wrong = wrong;
    }
    if (opt_.perIterTiming) m.perIteration = iterationStatsOverRanks(timing.iterationSeconds);
    idle();
    busBwSum_ += m.busBw;
    busBwCount_++;
  }
  if (opt_.reportTimestamps) row.timestamp = nowString();
  if (printing()) std::printf("%s", tableRow(row).c_str()), std::fflush(stdout);
  report_.rows.push_back(row);
}

// One operation on every rank of the thread, in one group.
void ThreadRunner::launch(const DataTypeInfo& type, int root, bool inPlace, const BufferCounts& counts) {
  grouped([&](Rank& r, size_t) {
    char* recv = r.recv + size_t(opt_.unalign) * type.size;
    char* send = r.send + size_t(opt_.unalign) * type.size;
    const void* sendPointer = inPlace ? recv + counts.sendInPlaceOffset * size_t(r.groupRank) * type.size : send;
    void* recvPointer = inPlace ? recv + counts.recvInPlaceOffset * size_t(r.groupRank) * type.size : recv;
    if (coll_.runWindowed) {
      // Every window is a receive buffer: the put lands where the peer's receive would.
      const size_t offset = size_t(static_cast<char*>(recvPointer) - r.recv);
      check(coll_.runWindowed(sendPointer, counts.param, type.type, r.window, offset, r.comm, r.memory->stream()),
            r.rank, std::string("one-sided ") + coll_.name);
      return;
    }
    check(coll_.run(sendPointer, recvPointer, counts.param, type.type, r.op, root, r.comm, r.memory->stream()), r.rank,
          std::string("nccl ") + coll_.name);
  });
}

// The -n iterations of -m operations each, as the -z and -I options wait for them.
void ThreadRunner::issueIterations(const DataTypeInfo& type, int root, bool inPlace, const BufferCounts& counts,
                                   Timing& timing, double& collectiveOnly) {
  for (int iter = 0; iter < opt_.iters; iter++) {
    Clock::time_point iterStart = Clock::now();
    if (opt_.aggIters > 1) check(ncclGroupStart(), firstRank(), "ncclGroupStart");
    for (int a = 0; a < opt_.aggIters; a++) launch(type, root, inPlace, counts);
    if (opt_.aggIters > 1) check(ncclGroupEnd(), firstRank(), "ncclGroupEnd");
    // Per-iteration times are host clock times: each iteration waits for its stream.
    if (opt_.blocking || opt_.perIterTiming) synchronize();
    if (opt_.perIterTiming) timing.iterationSeconds.push_back(secondsSince(iterStart) / opt_.aggIters);
    if (opt_.blocking == 3) collectiveOnly += secondsSince(iterStart);
    if (opt_.blocking == 1 || opt_.blocking == 3) barrier();
  }
}

// One placement's time per operation. The rank's memory times the iterations: the host clock until the stream is
// done, or CUDA events on the stream. With -G the iterations are captured once into a graph per rank, which is then
// launched -G times, as nccl-tests does; the time per operation divides by the launches too.
ThreadRunner::Timing ThreadRunner::timePlacement(const DataTypeInfo& type, int root, bool inPlace,
                                                 const BufferCounts& counts) {
  barrier();
  Timing timing;
  double collectiveOnly = 0;
  if (opt_.cudaGraph) {
    for (Rank& r : ranks_) r.memory->beginCapture();
    issueIterations(type, root, inPlace, counts, timing, collectiveOnly);
    for (Rank& r : ranks_) r.memory->endCapture();
    barrier();
  }
  Clock::time_point start = Clock::now();
  for (Rank& r : ranks_) r.memory->startTimer();
  if (opt_.cudaGraph) {
    for (int launch = 0; launch < opt_.cudaGraph; launch++)
      for (Rank& r : ranks_) r.memory->launchGraph();
  } else {
    issueIterations(type, root, inPlace, counts, timing, collectiveOnly);
  }
  double cpuSeconds = secondsSince(start);
  double operations = double(opt_.iters) * opt_.aggIters * std::max(opt_.cudaGraph, 1);
  std::vector<double> perOp;
  for (Rank& r : ranks_) {
    double seconds = r.memory->stopTimer();
    if (opt_.blocking == 3) seconds = collectiveOnly;
    perOp.push_back((opt_.reportCpuTime ? cpuSeconds : seconds) / operations);
  }
  timing.seconds = combineTime(perOp);
  return timing;
}

// One checking pass on every rank: fresh inputs, one operation, every output element against the reference; each
// rank's count of wrong elements.
std::vector<int64_t> ThreadRunner::checkPlacement(const DataTypeInfo& type, const RedOpInfo& opInfo, int root,
                                                  bool inPlace, const BufferCounts& counts, size_t bytes) {
  repetition_++;
  for (Rank& r : ranks_) {
    CheckedOperation checked{coll_, type, opInfo, r.groupRank, r.groupRanks, root, counts, repetition_};
    char* recv = r.recv + size_t(opt_.unalign) * type.size;
    char* send = inPlace ? recv + counts.sendInPlaceOffset * size_t(r.groupRank) * type.size
                         : r.send + size_t(opt_.unalign) * type.size;
    r.memory->fill(recv, 0xff, std::max(counts.recv, counts.send) * type.size);  // -1 or NaN: never a right answer
    size_t sendBytes = counts.send * type.size;
    writeInputs(checked, r.memory->hostInput(send, sendBytes));
    r.memory->upload(send, sendBytes);
  }
  // A put lands whenever its origin issues it: every rank clears its window before any puts into it.
  if (coll_.runWindowed) barrier();
  launch(type, root, inPlace, counts);
  synchronize();
  std::vector<int64_t> wrongPerRank;
  for (Rank& r : ranks_) {
    CheckedOperation checked{coll_, type, opInfo, r.groupRank, r.groupRanks, root, counts, repetition_};
    char* output = r.recv + size_t(opt_.unalign) * type.size +
                   (inPlace ? counts.recvInPlaceOffset * size_t(r.groupRank) * type.size : 0);
    size_t elements = coll_.checkedCount(counts, r.groupRank, root);
    char* host = r.memory->hostOutput(output, elements * type.size);
    injectCorruption(host, elements, type, r.rank);
    WrongElements wrong = compareOutputs(checked, host, elements);
    if (wrong.count) {
      std::lock_guard lock(ctx_.outputMutex);
      std::fprintf(
          stderr,
          "%s: rank %d: %s %zu B %s %s root %d %s: %lld wrong elements, first at element %zu (expected %g, got %g)\n",
          ctx_.program.c_str(), r.rank, coll_.name, bytes, type.name, opInfo.name, root,
          inPlace ? "in-place" : "out-of-place", static_cast<long long>(wrong.count), wrong.first, wrong.expected,
          wrong.got);
    }
    wrongPerRank.push_back(wrong.count);
  }
  return wrongPerRank;
}

}  // namespace tutti::perf
