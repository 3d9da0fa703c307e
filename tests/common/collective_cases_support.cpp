// The shared collective case runner (see collective_cases_support.h).
#include "tests/common/collective_cases_support.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "tests/common/ranks_support.h"
#include "tests/common/reference_support.h"

namespace tutti_test {
namespace {

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,   ncclUint32,   ncclInt64,      ncclUint64,
                                 ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};
const ncclRedOp_t kOps[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg};

bool isUnsigned(ncclDataType_t t) { return t == ncclUint8 || t == ncclUint32 || t == ncclUint64; }
bool isInteger(ncclDataType_t t) { return t <= ncclUint64; }
int integerBits(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 8;
    case ncclInt32:
    case ncclUint32: return 32;
    default: return 64;
  }
}

// Input of `rank` at element i: small integers, so sums are exact in every integer type and
// in float32/float64, and products (values 1, 2, -1) stay within every type's range.
double inputValue(ncclDataType_t type, ncclRedOp_t op, int rank, size_t i) {
  uint64_t h = (uint64_t(rank) * 0x9E3779B97F4A7C15ull) ^ (uint64_t(i) * 0xC2B2AE3D27D4EB4Full);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  if (op == ncclProd) {
    static const double kSigned[] = {1, 2, -1, 1}, kUnsigned[] = {1, 2, 1, 1};
    return isUnsigned(type) ? kUnsigned[h % 4] : kSigned[h % 4];
  }
  if (isUnsigned(type)) return double(h % 9);
  return double(int(h % 9) - 4);
}

// Wraps an integer result to the type, as two's complement arithmetic does.
double wrapInteger(ncclDataType_t type, double value) {
  int bits = integerBits(type);
  if (bits == 64) return value;  // values here never leave the int64 range
  int64_t v = int64_t(value);
  uint64_t mask = (uint64_t(1) << bits) - 1;
  uint64_t u = uint64_t(v) & mask;
  if (!isUnsigned(type) && (u >> (bits - 1))) return double(int64_t(u) - int64_t(uint64_t(1) << bits));
  return double(u);
}

// The float64 reduction of every rank's input at element i.
double reference(ncclDataType_t type, ncclRedOp_t op, int nranks, size_t i) {
  double acc = inputValue(type, op, 0, i);
  for (int r = 1; r < nranks; r++) {
    double v = inputValue(type, op, r, i);
    switch (op) {
      case ncclSum:
      case ncclAvg: acc += v; break;
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: break;
    }
  }
  if (isInteger(type)) {
    acc = wrapInteger(type, acc);
    if (op == ncclAvg) acc = std::trunc(acc / nranks);
    return acc;
  }
  if (op == ncclAvg) acc /= nranks;
  return acc;
}

double magnitude(ncclDataType_t type, ncclRedOp_t op, int nranks, size_t i) {
  double m = 0;
  for (int r = 0; r < nranks; r++) m += std::fabs(inputValue(type, op, r, i));
  return m;
}

// Element i of a reduction's result against the reference; the tolerance (which needs every
// rank's |input| at i) is worked out only for an element that is not exact.
void expectClose(ncclDataType_t type, ncclRedOp_t op, int nranks, double got, size_t i, const std::string& where) {
  double want = reference(type, op, nranks, i);
  if (got == want) return;
  double tol = isInteger(type) ? 0 : tutti_test::tolerance(type, op, nranks, magnitude(type, op, nranks, i));
  if (!(std::fabs(got - want) <= tol))
    throw RankFailure(where + " element " + std::to_string(i) + ": got " + std::to_string(got) + ", want " +
                      std::to_string(want) + " (tolerance " + std::to_string(tol) + ")");
}

// Sets elements [0, count) of p to v, converted once.
void fill(ncclDataType_t type, char* p, size_t count, double v) {
  const size_t elt = tutti_test::elementBytes(type);
  if (count == 0) return;
  tutti_test::fromDouble(type, p, 0, v);
  for (size_t done = elt, total = count * elt; done < total; done *= 2)
    std::memcpy(p + done, p, std::min(done, total - done));
}

// Writes value(j) into elements [0, count) of p, as fromDouble does (integers truncated and
// wrapped), with the type's switch outside the loop.
template <typename T, typename F>
void storeAs(char* p, size_t count, F value) {
  for (size_t j = 0; j < count; j++) {
    T x;
    if constexpr (std::is_floating_point_v<T>)
      x = T(value(j));
    else
      x = T(uint64_t(int64_t(value(j))));  // the generated values are integers within int64
    std::memcpy(p + j * sizeof(T), &x, sizeof(T));
  }
}

template <typename F>
void store(ncclDataType_t type, char* p, size_t count, F value) {
  switch (type) {
    case ncclInt8: storeAs<int8_t>(p, count, value); return;
    case ncclUint8: storeAs<uint8_t>(p, count, value); return;
    case ncclInt32: storeAs<int32_t>(p, count, value); return;
    case ncclUint32: storeAs<uint32_t>(p, count, value); return;
    case ncclInt64: storeAs<int64_t>(p, count, value); return;
    case ncclUint64: storeAs<uint64_t>(p, count, value); return;
    case ncclFloat32: storeAs<float>(p, count, value); return;
    case ncclFloat64: storeAs<double>(p, count, value); return;
    default:
      for (size_t j = 0; j < count; j++) tutti_test::fromDouble(type, p, j, value(j));
  }
}

// A rank thread's case buffers, kept from case to case: allocating tens of MiB afresh for every
// case cost more in page faults than the collectives themselves.
struct Scratch {
  std::unique_ptr<char[]> bytes;
  size_t capacity = 0, used = 0;
  void resize(size_t n) {  // the contents are not kept
    if (n > capacity) {
      bytes.reset(new char[n]);
      capacity = n;
    }
    used = n;
  }
  char* data() { return bytes.get(); }
  size_t size() const { return used; }
};
thread_local Scratch sendScratch, recvScratch;

}  // namespace

const char* collName(Coll c) {
  static const char* names[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
                                "AlltoAll",  "Gather",    "Scatter",       "SendRecv"};
  return names[int(c)];
}
bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce; }

bool fromPlanColl(tutti::plan::Coll c, Coll* out) {
  switch (c) {
    case tutti::plan::Coll::AllReduce: *out = Coll::AllReduce; return true;
    case tutti::plan::Coll::AllGather: *out = Coll::AllGather; return true;
    case tutti::plan::Coll::ReduceScatter: *out = Coll::ReduceScatter; return true;
    case tutti::plan::Coll::Broadcast: *out = Coll::Broadcast; return true;
    case tutti::plan::Coll::Reduce: *out = Coll::Reduce; return true;
    case tutti::plan::Coll::AlltoAll: *out = Coll::AlltoAll; return true;
    case tutti::plan::Coll::Gather: *out = Coll::Gather; return true;
    case tutti::plan::Coll::Scatter: *out = Coll::Scatter; return true;
    default: return false;
  }
}

std::string describe(const Case& c, int rank, int nranks) {
  return std::string(collName(c.coll)) + " " + std::string("type ") + std::to_string(int(c.type)) + " op " +
         std::to_string(int(c.op)) + " count " + std::to_string(c.count) + (c.inPlace ? " in-place" : " out-of-place") +
         " root " + std::to_string(c.root) + " rank " + std::to_string(rank) + "/" + std::to_string(nranks);
}

// Runs one case on this rank and checks its output.
void runCase(const Case& c, int rank, int nranks, ncclComm_t comm, CaseBuffers* buffers, std::vector<char>* output) {
  const size_t elt = tutti_test::elementBytes(c.type), n = size_t(nranks), count = c.count;
  const ncclDataType_t t = c.type;
  size_t inCount = count, outCount = count;
  switch (c.coll) {
    case Coll::AllGather:
    case Coll::Gather: outCount = count * n; break;
    case Coll::ReduceScatter:
    case Coll::Scatter: inCount = count * n; break;
    case Coll::AlltoAll: inCount = outCount = count * n; break;
    default: break;
  }
  // Element j of rank r's input: for block layouts, the block index joins the index so that
  // every (source, destination) pair carries distinct data.
  auto in = [&](int r, size_t j) { return inputValue(t, c.op, r, j); };
  Scratch& sendBuf = sendScratch;
  Scratch& recvBuf = recvScratch;
  sendBuf.resize((inCount + 1) * elt);
  recvBuf.resize(std::max(inCount, outCount) * elt + elt);
  // Unaligned by one element for odd cases, to exercise unaligned pointers.
  char* send = sendBuf.data() + (count % 2 ? elt : 0);
  char* recv = recvBuf.data();
  store(t, send, inCount, [&](size_t j) { return in(rank, j); });
  fill(t, recv, outCount, 99);
  const void* sendArg = send;
  if (c.inPlace) {
    // In place as NCCL defines it: the input lies where this rank's part of the output is.
    switch (c.coll) {
      case Coll::AllGather:
      case Coll::Gather:
        store(t, recv + rank * count * elt, count, [&](size_t j) { return in(rank, j); });
        sendArg = recv + rank * count * elt;
        break;
      case Coll::ReduceScatter:
      case Coll::Scatter:
        recvBuf.resize(inCount * elt + elt);
        recv = recvBuf.data();
        store(t, recv, inCount, [&](size_t j) { return in(rank, j); });
        sendArg = recv;
        recv = recv + rank * count * elt;
        break;
      default:
        store(t, recv, inCount, [&](size_t j) { return in(rank, j); });
        sendArg = recv;
        break;
    }
  }
  std::string where = describe(c, rank, nranks);
  // With device buffers the same layout is mirrored there: staging -> device, call, device ->
  // staging, then the same checks.
  cudaStream_t stream = nullptr;
  char* dSend = nullptr;
  char* dRecv = nullptr;
  auto onDevice = [&](const void* p) -> char* {
    const char* q = static_cast<const char*>(p);
    if (q >= sendBuf.data() && q <= sendBuf.data() + sendBuf.size()) return dSend + (q - sendBuf.data());
    return dRecv + (q - recvBuf.data());
  };
  if (buffers != nullptr) {
    dSend = static_cast<char*>(buffers->allocate(sendBuf.size()));
    dRecv = static_cast<char*>(buffers->allocate(recvBuf.size()));
    buffers->upload(dSend, sendBuf.data(), sendBuf.size());
    buffers->upload(dRecv, recvBuf.data(), recvBuf.size());
    sendArg = onDevice(sendArg);
    recv = onDevice(recv);
    stream = buffers->stream();
  }
  struct Release {
    CaseBuffers* buffers;
    char* a;
    char* b;
    ~Release() {
      if (buffers) {
        buffers->release(a);
        buffers->release(b);
      }
    }
  } release{buffers, dSend, dRecv};
  switch (c.coll) {
    case Coll::AllReduce: TUTTI_NCCL_CHECK(ncclAllReduce(sendArg, recv, count, t, c.op, comm, stream)); break;
    case Coll::AllGather: TUTTI_NCCL_CHECK(ncclAllGather(sendArg, recv, count, t, comm, stream)); break;
    case Coll::ReduceScatter: TUTTI_NCCL_CHECK(ncclReduceScatter(sendArg, recv, count, t, c.op, comm, stream)); break;
    case Coll::Broadcast: TUTTI_NCCL_CHECK(ncclBroadcast(sendArg, recv, count, t, c.root, comm, stream)); break;
    case Coll::Reduce: TUTTI_NCCL_CHECK(ncclReduce(sendArg, recv, count, t, c.op, c.root, comm, stream)); break;
    case Coll::AlltoAll: TUTTI_NCCL_CHECK(ncclAlltoAll(sendArg, recv, count, t, comm, stream)); break;
    case Coll::Gather: TUTTI_NCCL_CHECK(ncclGather(sendArg, recv, count, t, c.root, comm, stream)); break;
    case Coll::Scatter: TUTTI_NCCL_CHECK(ncclScatter(sendArg, recv, count, t, c.root, comm, stream)); break;
    case Coll::SendRecv: {
      // A ring exchange: send to the next rank, receive from the previous, in one group.
      TUTTI_NCCL_CHECK(ncclGroupStart());
      TUTTI_NCCL_CHECK(ncclSend(sendArg, count, t, (rank + 1) % nranks, comm, stream));
      TUTTI_NCCL_CHECK(ncclRecv(recv, count, t, (rank + nranks - 1) % nranks, comm, stream));
      TUTTI_NCCL_CHECK(ncclGroupEnd());
      break;
    }
  }
  if (buffers != nullptr) {
    buffers->synchronize();
    ncclResult_t async = ncclSuccess;
    TUTTI_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
    if (async != ncclSuccess) throw RankFailure(where + ": ncclCommGetAsyncError: " + ncclGetLastError(comm));
    buffers->download(recvBuf.data(), dRecv, recvBuf.size());
    recv = recvBuf.data() + (recv - dRecv);
  }
  if (output != nullptr) output->assign(recv, recv + outCount * elt);

  auto got = [&](size_t j) { return tutti_test::toDouble(t, recv, j); };
  auto exact = [&](double g, double w, size_t j) {
    if (g != w)
      throw RankFailure(where + ": element " + std::to_string(j) + " is " + std::to_string(g) + ", want " +
                        std::to_string(w));
  };
  // What the type makes of an input value (inputs are small integers, exact in every type).
  switch (c.coll) {
    case Coll::AllReduce:
      for (size_t j = 0; j < count; j++) expectClose(t, c.op, nranks, got(j), j, where);
      break;
    case Coll::Reduce:
      if (rank == c.root)
        for (size_t j = 0; j < count; j++) expectClose(t, c.op, nranks, got(j), j, where);
      break;
    case Coll::ReduceScatter:
      for (size_t j = 0; j < count; j++) expectClose(t, c.op, nranks, got(j), size_t(rank) * count + j, where);
      break;
    case Coll::AllGather:
      for (int r = 0; r < nranks; r++)
        for (size_t j = 0; j < count; j++) exact(got(r * count + j), in(r, j), r * count + j);
      break;
    case Coll::Gather:
      if (rank == c.root)
        for (int r = 0; r < nranks; r++)
          for (size_t j = 0; j < count; j++) exact(got(r * count + j), in(r, j), r * count + j);
      break;
    case Coll::Broadcast:
      for (size_t j = 0; j < count; j++) exact(got(j), in(c.root, j), j);
      break;
    case Coll::Scatter:
      for (size_t j = 0; j < count; j++) exact(got(j), in(c.root, rank * count + j), j);
      break;
    case Coll::AlltoAll:
      for (int r = 0; r < nranks; r++)
        for (size_t j = 0; j < count; j++) exact(got(r * count + j), in(r, rank * count + j), r * count + j);
      break;
    case Coll::SendRecv:
      for (size_t j = 0; j < count; j++) exact(got(j), in((rank + nranks - 1) % nranks, j), j);
      break;
  }
}

std::vector<Case> allCases(const std::vector<size_t>& counts, int nranks) {
  std::vector<Case> cases;
  const Coll colls[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce,
                        Coll::AlltoAll,  Coll::Gather,    Coll::Scatter,       Coll::SendRecv};
  for (Coll coll : colls)
    for (ncclDataType_t type : kTypes)
      for (ncclRedOp_t op : kOps) {
        if (!reduces(coll) && op != ncclSum) continue;
        for (size_t count : counts)
          for (bool inPlace : {false, true}) {
            if (inPlace && coll == Coll::SendRecv) continue;
            int root = int(count % size_t(nranks));
            cases.push_back({coll, type, op, count, inPlace, root});
          }
      }
  return cases;
}

void runAll(const std::vector<Case>& cases, int rank, int nranks, ncclComm_t comm, CaseBuffers* buffers) {
  for (const Case& c : cases) runCase(c, rank, nranks, comm, buffers);
}

}  // namespace tutti_test
