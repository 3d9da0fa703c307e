// tuttiAllToAllvDevice and tuttiAllToAllvDynamic: counts in device memory (ncclMemAlloc's, host
// memory on the host backend), read when the operation runs. Count matrices with zeros (whole rows
// and columns) and one hot column, float64 and int8, ranks as threads and as processes, on the NULL
// stream and a host stream; every receive buffer compared with a reference computed on the host
// from the matrix alone, float64 values exact, untouched elements checked too. Stream order: the
// counts are written by collectives queued before the call on the same stream, which cannot run
// until a gate opens after every rank's call has returned. Then the refusals: counts past a
// capacity or maximum fail the operation naming the pair, and what the host can check is refused
// at the call, leaving the communicator usable.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

using tutti_test::check;
using tutti_test::ScopedEnv;

namespace {

using Matrix = std::vector<std::vector<size_t>>;  // [i][j]: elements rank i sends rank j

enum class Form { Device, Dynamic };
enum class Pattern { Zeros, HotColumn };

const char* formName(Form f) { return f == Form::Device ? "tuttiAllToAllvDevice" : "tuttiAllToAllvDynamic"; }

Matrix countMatrix(Pattern pattern, int n, unsigned seed) {
  std::mt19937 rng(seed);
  Matrix m(size_t(n), std::vector<size_t>(size_t(n), 0));
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      m[size_t(i)][size_t(j)] = pattern == Pattern::Zeros
                                    ? ((i == 1 || j == 0 || (i + j) % 3 == 0) ? 0 : 1 + rng() % 37)
                                    : (j == n - 1 ? 60000 + rng() % 5000 : rng() % 4);
  return m;
}

// Element `index` of rank's send buffer, exact in both types.
template <typename T>
T sendValue(int rank, size_t index) {
  if constexpr (sizeof(T) == 1)
    return static_cast<T>((rank * 37 + int(index % 251) * 11 + 5) & 0x7f);
  else
    return T(double(rank) * 1048576.0 + double(index) + 0.25);
}
template <typename T>
T sentinel() {
  return sizeof(T) == 1 ? T(-100) : T(-7.5);
}

std::vector<size_t> exclusiveSums(const std::vector<size_t>& counts) {
  std::vector<size_t> s(counts.size(), 0);
  for (size_t p = 1; p < counts.size(); p++) s[p] = s[p - 1] + counts[p - 1];
  return s;
}

std::vector<size_t> column(const Matrix& m, int j) {
  std::vector<size_t> c;
  for (const auto& row : m) c.push_back(row[size_t(j)]);
  return c;
}

// The reference: each peer's block from its send buffer (blocks back to back there), the rest untouched.
template <typename T>
std::vector<T> expected(const Matrix& m, int rank, size_t recvElems) {
  std::vector<T> want(recvElems, sentinel<T>());
  const std::vector<size_t> rd = exclusiveSums(column(m, rank));  // both forms pack them in rank order
  for (size_t p = 0; p < m.size(); p++) {
    const size_t from = exclusiveSums(m[p])[size_t(rank)];
    for (size_t k = 0; k < m[p][size_t(rank)]; k++) want[rd[p] + k] = sendValue<T>(int(p), from + k);
  }
  return want;
}

// Counts where the executor reads them: ncclMemAlloc's memory, freed with the object.
struct DeviceArray {
  size_t* data = nullptr;
  explicit DeviceArray(size_t n) {
    void* p = nullptr;
    TUTTI_NCCL_CHECK(ncclMemAlloc(&p, std::max<size_t>(1, n) * sizeof(size_t)));
    data = static_cast<size_t*>(p);
  }
  ~DeviceArray() { ncclMemFree(data); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
};

size_t firstDifference(const std::vector<double>& got, const std::vector<double>& want) {
  for (size_t i = 0; i < want.size(); i++)
    if (got[i] != want[i]) return i;
  return want.size();
}
size_t firstDifference(const std::vector<int8_t>& got, const std::vector<int8_t>& want) {
  for (size_t i = 0; i < want.size(); i++)
    if (got[i] != want[i]) return i;
  return want.size();
}

// The buffers of one rank's call, counts still to be written.
template <typename T>
struct Call {
  Form form;
  std::vector<T> in, out;
  DeviceArray sendCounts, recvCounts;
  size_t maxRecv = 0, recvElems = 0;
  Call(const Matrix& m, int rank, Form f) : form(f), sendCounts(m.size()), recvCounts(m.size()) {
    const std::vector<size_t> row = m[size_t(rank)], col = column(m, rank);
    size_t sent = 0;
    for (size_t c : row) sent += c;
    in.resize(sent + 3);  // room past the blocks: capacities need not be tight
    for (size_t i = 0; i < in.size(); i++) in[i] = sendValue<T>(rank, i);
    maxRecv = *std::max_element(col.begin(), col.end()) + 2;
    size_t received = 0;
    for (size_t c : col) received += c;
    recvElems = received + 5;
    out.assign(recvElems, sentinel<T>());
    // A found count must overwrite what was there.
    std::fill(recvCounts.data, recvCounts.data + m.size(), size_t(0xdeadbeef));
  }
  ncclResult_t issue(ncclDataType_t type, ncclComm_t comm, cudaStream_t stream) {
    if (form == Form::Device)
      return tuttiAllToAllvDevice(in.data(), sendCounts.data, in.size(), out.data(), recvCounts.data, recvElems, type,
                                  comm, stream);
    return tuttiAllToAllvDynamic(in.data(), sendCounts.data, in.size(), out.data(), recvElems, maxRecv, recvCounts.data,
                                 type, comm, stream);
  }
  void checkResult(const Matrix& m, int rank, const std::string& what) {
    const std::vector<T> want = expected<T>(m, rank, recvElems);
    const size_t at = firstDifference(out, want);
    check(at == want.size(), what + ": element " + std::to_string(at) + " of " + std::to_string(want.size()) + " is " +
                                 std::to_string(double(at < out.size() ? out[at] : 0)) + ", expected " +
                                 std::to_string(double(at < want.size() ? want[at] : 0)));
    if (form == Form::Dynamic)
      for (size_t p = 0; p < m.size(); p++)
        check(recvCounts.data[p] == m[p][size_t(rank)], what + ": the found count from rank " + std::to_string(p) +
                                                            " is " + std::to_string(recvCounts.data[p]) +
                                                            ", expected " + std::to_string(m[p][size_t(rank)]));
  }
};

// Every pattern, form and type, half on the NULL stream and half on a host stream.
template <typename T>
void exchangeAll(int rank, int n, ncclComm_t comm, ncclDataType_t type, cudaStream_t stream, unsigned* seed) {
  for (Pattern pattern : {Pattern::Zeros, Pattern::HotColumn})
    for (Form form : {Form::Device, Form::Dynamic}) {
      (*seed)++;
      const Matrix m = countMatrix(pattern, n, *seed);
      Call<T> call(m, rank, form);
      const std::vector<size_t> row = m[size_t(rank)], col = column(m, rank);
      std::copy(row.begin(), row.end(), call.sendCounts.data);
      if (form == Form::Device) std::copy(col.begin(), col.end(), call.recvCounts.data);
      const bool queued = (*seed % 2) == 0;
      TUTTI_NCCL_CHECK(call.issue(type, comm, queued ? stream : nullptr));
      if (queued) TUTTI_NCCL_CHECK(tuttiStreamSynchronize(stream));
      call.checkResult(m, rank,
                       std::string(formName(form)) + (pattern == Pattern::Zeros ? ", zeros" : ", hot column") +
                           ", type " + std::to_string(int(type)) + (queued ? ", host stream" : ", NULL stream") +
                           ", rank " + std::to_string(rank) + " of " + std::to_string(n));
    }
}

void exchangeEverything(int rank, int n, ncclComm_t comm) {
  cudaStream_t stream = nullptr;
  TUTTI_NCCL_CHECK(tuttiStreamCreate(&stream));
  unsigned seed = 40;
  exchangeAll<double>(rank, n, comm, ncclFloat64, stream, &seed);
  exchangeAll<int8_t>(rank, n, comm, ncclInt8, stream, &seed);
  TUTTI_NCCL_CHECK(tuttiStreamDestroy(stream));
}

// The counts are written on the call's stream by collectives queued before it (an all-gather of
// every rank's send counts; an all-to-all of them gives each rank its receive counts), and those
// cannot run before the gate in front of them on the stream opens: a receive (on a communicator of
// its own) whose send comes only once every rank's call has returned and every rank has seen its
// count arrays still hold zeros,
// which would move nothing. The call must use what the collectives wrote.
void countsWrittenOnTheStream(Form form, int rank, int n, ncclComm_t comm, std::latch& called, std::latch& seen) {
  const Matrix m = countMatrix(Pattern::HotColumn, n, 7);
  const std::string who = std::string(formName(form)) + ", rank " + std::to_string(rank) + " of " + std::to_string(n);
  {
    // The same exchange once with counts already in place (and its connections made).
    Call<double> warm(m, rank, form);
    const std::vector<size_t> row = m[size_t(rank)], col = column(m, rank);
    std::copy(row.begin(), row.end(), warm.sendCounts.data);
    std::copy(col.begin(), col.end(), warm.recvCounts.data);
    TUTTI_NCCL_CHECK(warm.issue(ncclFloat64, comm, nullptr));
    warm.checkResult(m, rank, who + ", counts written before the call");
  }
  Call<double> call(m, rank, form);
  cudaStream_t stream = nullptr;
  TUTTI_NCCL_CHECK(tuttiStreamCreate(&stream));
  const size_t nn = size_t(n);
  DeviceArray all(nn * nn), columnCounts(nn);
  std::fill(all.data, all.data + nn * nn, size_t(0));
  std::fill(columnCounts.data, columnCounts.data + nn, size_t(0));
  std::fill(call.recvCounts.data, call.recvCounts.data + nn, size_t(0));
  const std::vector<size_t> row = m[size_t(rank)];
  int64_t gate = 0;
  const int64_t key = 1234;
  // The gate travels on a communicator of its own: a host stream of one communicator is not ordered
  // with that communicator's other streams, so the gate's send must not share its connections with
  // the collectives behind the gate.
  ncclComm_t gateComm = nullptr;
  TUTTI_NCCL_CHECK(ncclCommSplit(comm, 0, rank, &gateComm, nullptr));
  {  // its connections made now, both ends together: the gate's receive must not wait for them
    int64_t out = 1, in = 0;
    TUTTI_NCCL_CHECK(ncclGroupStart());
    TUTTI_NCCL_CHECK(ncclSend(&out, 1, ncclInt64, (rank + n - 1) % n, gateComm, nullptr));
    TUTTI_NCCL_CHECK(ncclRecv(&in, 1, ncclInt64, (rank + 1) % n, gateComm, nullptr));
    TUTTI_NCCL_CHECK(ncclGroupEnd());
  }
  TUTTI_NCCL_CHECK(ncclRecv(&gate, 1, ncclInt64, (rank + 1) % n, gateComm, stream));
  TUTTI_NCCL_CHECK(ncclAllGather(row.data(), all.data, nn, ncclUint64, comm, stream));
  // Row `rank` of the gathered matrix, one count to each peer: each rank gets its column.
  const size_t* sendCounts = all.data + size_t(rank) * nn;
  TUTTI_NCCL_CHECK(ncclAlltoAll(sendCounts, columnCounts.data, 1, ncclUint64, comm, stream));
  if (form == Form::Device)
    TUTTI_NCCL_CHECK(tuttiAllToAllvDevice(call.in.data(), sendCounts, call.in.size(), call.out.data(),
                                          columnCounts.data, call.recvElems, ncclFloat64, comm, stream));
  else
    TUTTI_NCCL_CHECK(tuttiAllToAllvDynamic(call.in.data(), sendCounts, call.in.size(), call.out.data(), call.recvElems,
                                           call.maxRecv, call.recvCounts.data, ncclFloat64, comm, stream));
  called.arrive_and_wait();
  bool zeros = true;
  for (size_t i = 0; i < nn * nn; i++) zeros = zeros && all.data[i] == 0;
  for (size_t i = 0; i < nn; i++) zeros = zeros && columnCounts.data[i] == 0;
  check(zeros, who + ": the counts were written before the gate opened");
  seen.arrive_and_wait();
  TUTTI_NCCL_CHECK(ncclSend(&key, 1, ncclInt64, (rank + n - 1) % n, gateComm, nullptr));
  TUTTI_NCCL_CHECK(tuttiStreamSynchronize(stream));
  TUTTI_NCCL_CHECK(ncclCommDestroy(gateComm));
  check(gate == key, who + ": the gate received " + std::to_string(gate));
  call.checkResult(m, rank, who + ", counts written on the stream after the call");
  TUTTI_NCCL_CHECK(tuttiStreamDestroy(stream));
}

}  // namespace

TEST_CASE("alltoallv device counts: both forms, zeros and a hot column, 2, 4 and 6 ranks as threads, host backend",
          "[alltoallv][device-counts][threads]") {
  ScopedEnv backend("TUTTI_DEVICE", "host");
  for (int n : {2, 4, 6}) {
    INFO(n << " ranks as threads");
    REQUIRE(tutti_test::runThreads(n, exchangeEverything) == "");
  }
}

TEST_CASE("alltoallv device counts: both forms, 2 and 4 rank processes, host backend (shm)",
          "[alltoallv][device-counts][processes]") {
  ScopedEnv backend("TUTTI_DEVICE", "host");
  for (int n : {2, 4}) {
    INFO(n << " ranks as processes");
    REQUIRE(tutti_test::runProcesses(n, exchangeEverything) == "");
  }
}

TEST_CASE("alltoallv device counts: counts written on the stream after the call was queued are the ones used",
          "[alltoallv][device-counts][stream]") {
  ScopedEnv backend("TUTTI_DEVICE", "host");
  ScopedEnv timeout("TUTTI_TIMEOUT", "120");
  for (int n : {2, 4})
    for (Form form : {Form::Device, Form::Dynamic}) {
      INFO(n << " ranks as threads, " << formName(form));
      std::latch called(n), seen(n);
      REQUIRE(tutti_test::runThreads(n, [&](int rank, int nranks, ncclComm_t comm) {
                countsWrittenOnTheStream(form, rank, nranks, comm, called, seen);
              }) == "");
    }
}

namespace {

// Every rank runs `body`, which must end in a failure of the communicator: each rank's error must
// name `words` (rank `faulty`'s own, ncclInvalidUsage; the others' from its notice).
void requireFailureNamed(int n, int faulty, const std::string& words,
                         const std::function<ncclResult_t(int rank, int n, ncclComm_t comm, cudaStream_t s)>& body) {
  ScopedEnv backend("TUTTI_DEVICE", "host");
  ScopedEnv timeout("TUTTI_TIMEOUT", "60");
  const std::string failures = tutti_test::runThreads(n, [&](int rank, int nranks, ncclComm_t comm) {
    cudaStream_t stream = nullptr;
    TUTTI_NCCL_CHECK(tuttiStreamCreate(&stream));
    const ncclResult_t issued = body(rank, nranks, comm, stream);
    // A rank whose own blocks all went through learns of the failure by the failing rank's notice,
    // maybe after its stream is done.
    tuttiStreamSynchronize(stream);
    ncclResult_t async = ncclSuccess;
    const auto start = std::chrono::steady_clock::now();
    while (ncclCommGetAsyncError(comm, &async) == ncclSuccess && async == ncclSuccess &&
           tutti_test::secondsSince(start) < 120)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const std::string message = ncclGetLastError(comm);  // the communicator's error, as ncclCommGetAsyncError left it
    const std::string who = "rank " + std::to_string(rank) + ": ";
    // Another rank may hear of the failure before it calls, and then be refused at once for it.
    check(issued == ncclSuccess || rank != faulty, who + "the call was refused at once: " + message);
    check(async != ncclSuccess, who + "the communicator did not fail");
    check(rank != faulty || async == ncclInvalidUsage,
          who + "a bad count failed the communicator with " + std::to_string(int(async)) + ", not ncclInvalidUsage");
    check(message.find(words) != std::string::npos, who + "the error does not say \"" + words + "\": " + message);
    tuttiStreamDestroy(stream);
    throw tutti_test::RankFailure("expected: " + message);
  });
  INFO(failures);
  for (int r = 0; r < n; r++)
    CHECK(failures.find("rank " + std::to_string(r) + "/" + std::to_string(n) + ": expected: ") != std::string::npos);
}

}  // namespace

TEST_CASE("alltoallv device counts: a send block past sendCapacity fails the operation naming the pair",
          "[alltoallv][device-counts][refusal]") {
  const Matrix m = countMatrix(Pattern::HotColumn, 4, 3);
  std::vector<std::unique_ptr<Call<double>>> calls(4);
  requireFailureNamed(4, 0, "the block rank 0 -> rank 3 (count ",
                      [&](int rank, int n, ncclComm_t comm, cudaStream_t s) {
                        calls[size_t(rank)] = std::make_unique<Call<double>>(m, rank, Form::Device);
                        Call<double>& call = *calls[size_t(rank)];
                        const std::vector<size_t> row = m[size_t(rank)], col = column(m, rank);
                        std::copy(row.begin(), row.end(), call.sendCounts.data);
                        std::copy(col.begin(), col.end(), call.recvCounts.data);
                        if (rank == 0) call.sendCounts.data[n - 1] += 4;  // 1 past the 3 spare elements
                        return call.issue(ncclFloat64, comm, s);
                      });
}

TEST_CASE("alltoallv device counts: a receive block past recvCapacity fails the operation naming the pair",
          "[alltoallv][device-counts][refusal]") {
  const Matrix m = countMatrix(Pattern::Zeros, 4, 5);
  std::vector<std::unique_ptr<Call<double>>> calls(4);
  requireFailureNamed(4, 2, "the block rank 3 -> rank 2 (count ", [&](int rank, int, ncclComm_t comm, cudaStream_t s) {
    calls[size_t(rank)] = std::make_unique<Call<double>>(m, rank, Form::Device);
    Call<double>& call = *calls[size_t(rank)];
    const std::vector<size_t> row = m[size_t(rank)], col = column(m, rank);
    std::copy(row.begin(), row.end(), call.sendCounts.data);
    std::copy(col.begin(), col.end(), call.recvCounts.data);
    if (rank == 2) call.recvCounts.data[3] += call.recvElems;
    return call.issue(ncclFloat64, comm, s);
  });
}

TEST_CASE("alltoallv device counts: a block larger than the receiver's maxRecvCount fails naming the pair",
          "[alltoallv][device-counts][refusal]") {
  const Matrix good = countMatrix(Pattern::HotColumn, 3, 9);
  Matrix bad = good;
  const std::vector<size_t> col0 = column(good, 0);
  const size_t max0 = *std::max_element(col0.begin(), col0.end()) + 2;  // rank 0's maxRecvCount (Call)
  bad[1][0] = max0 + 1;
  std::vector<std::unique_ptr<Call<double>>> calls(3);
  requireFailureNamed(3, 0,
                      "the block rank 1 -> rank 0 (count " + std::to_string(max0 + 1) +
                          ") is larger than maxRecvCount (" + std::to_string(max0),
                      [&](int rank, int, ncclComm_t comm, cudaStream_t s) {
                        const Matrix& m = rank == 0 ? good : bad;
                        calls[size_t(rank)] = std::make_unique<Call<double>>(m, rank, Form::Dynamic);
                        Call<double>& call = *calls[size_t(rank)];
                        const std::vector<size_t> row = m[size_t(rank)];
                        std::copy(row.begin(), row.end(), call.sendCounts.data);
                        return call.issue(ncclFloat64, comm, s);
                      });
}

// Counts that disagree within a pair are read by different ranks; the receiver's executor finds
// the block's size wrong at its first message, named as an all-to-all-v block.
TEST_CASE("alltoallv device counts: a pair whose counts disagree fails at the first message",
          "[alltoallv][device-counts][refusal]") {
  const Matrix m = countMatrix(Pattern::Zeros, 3, 13);
  std::vector<std::unique_ptr<Call<double>>> calls(3);
  requireFailureNamed(3, -1, "ncclAllToAllv", [&](int rank, int, ncclComm_t comm, cudaStream_t s) {
    calls[size_t(rank)] = std::make_unique<Call<double>>(m, rank, Form::Device);
    Call<double>& call = *calls[size_t(rank)];
    const std::vector<size_t> row = m[size_t(rank)], col = column(m, rank);
    std::copy(row.begin(), row.end(), call.sendCounts.data);
    std::copy(col.begin(), col.end(), call.recvCounts.data);
    if (rank == 2) call.recvCounts.data[0] += 2;  // rank 0 sends m[0][2] (not 0); rank 2 expects 2 more
    return call.issue(ncclFloat64, comm, s);
  });
}

TEST_CASE("alltoallv device counts: what the host can check is refused at the call, and the communicator stays usable",
          "[alltoallv][device-counts][refusal]") {
  ScopedEnv backend("TUTTI_DEVICE", "host");
  REQUIRE(tutti_test::runThreads(3, [&](int rank, int n, ncclComm_t comm) {
            const Matrix m = countMatrix(Pattern::Zeros, n, 21);
            Call<double> call(m, rank, Form::Device);
            const std::vector<size_t> row = m[size_t(rank)], col = column(m, rank);
            std::copy(row.begin(), row.end(), call.sendCounts.data);
            std::copy(col.begin(), col.end(), call.recvCounts.data);
            const std::string who = "rank " + std::to_string(rank) + ": ";
            auto refused = [&](ncclResult_t got, ncclResult_t want, const char* operation, const std::string& words) {
              const std::string message = ncclGetLastError(comm);
              check(got == want, who + "expected " + std::to_string(int(want)) + " for \"" + words + "\", got " +
                                     std::to_string(int(got)) + ": " + message);
              check(message.find(operation) != std::string::npos && message.find(words) != std::string::npos &&
                        message.find("rank " + std::to_string(rank)) != std::string::npos,
                    who + "the message does not name " + operation + ", the rank and \"" + words + "\": " + message);
            };
            TUTTI_NCCL_CHECK(ncclGroupStart());
            refused(call.issue(ncclFloat64, comm, nullptr), ncclInvalidUsage, "tuttiAllToAllvDevice", "inside a group");
            check(ncclGroupEnd() != ncclSuccess, who + "the group with a refused call succeeded");
            refused(tuttiAllToAllvDevice(call.in.data(), nullptr, call.in.size(), call.out.data(), call.recvCounts.data,
                                         call.recvElems, ncclFloat64, comm, nullptr),
                    ncclInvalidArgument, "tuttiAllToAllvDevice", "sendcounts is NULL");
            refused(tuttiAllToAllvDevice(call.in.data(), call.sendCounts.data, call.in.size(), call.out.data(), nullptr,
                                         call.recvElems, ncclFloat64, comm, nullptr),
                    ncclInvalidArgument, "tuttiAllToAllvDevice", "recvcounts is NULL");
            refused(tuttiAllToAllvDynamic(call.in.data(), call.sendCounts.data, call.in.size(), call.out.data(),
                                          call.recvElems, 4, nullptr, ncclFloat64, comm, nullptr),
                    ncclInvalidArgument, "tuttiAllToAllvDynamic", "recvcounts is NULL");
            refused(tuttiAllToAllvDevice(call.in.data(), call.sendCounts.data, call.in.size(), call.in.data(),
                                         call.recvCounts.data, call.recvElems, ncclFloat64, comm, nullptr),
                    ncclInvalidArgument, "tuttiAllToAllvDevice", "same buffer");
            refused(tuttiAllToAllvDynamic(call.in.data(), call.sendCounts.data, call.in.size(), call.out.data(),
                                          SIZE_MAX / 2, 4, call.recvCounts.data, ncclFloat64, comm, nullptr),
                    ncclInvalidArgument, "tuttiAllToAllvDynamic", "overflows");
            TUTTI_NCCL_CHECK(call.issue(ncclFloat64, comm, nullptr));
            call.checkResult(m, rank, who + "the call after the refusals");
          }) == "");
}

// The emulated device (and the cuda backend) copy a launch's arena to the device when it is queued,
// so the counts cannot be set there by a host job: both calls are refused by name, before any
// buffer or count is looked at, and the communicator stays usable.
TEST_CASE("alltoallv device counts: refused on the emulated device, naming the backend",
          "[alltoallv][device-counts][device]") {
  ScopedEnv backend("TUTTI_DEVICE", "emulated");
  REQUIRE(tutti_test::runThreads(2, [&](int rank, int n, ncclComm_t comm) {
            std::vector<size_t> counts(size_t(n), 0);
            const std::string who = "rank " + std::to_string(rank) + ": ";
            for (Form form : {Form::Device, Form::Dynamic}) {
              const ncclResult_t got = form == Form::Device
                                           ? tuttiAllToAllvDevice(nullptr, counts.data(), 0, nullptr, counts.data(), 0,
                                                                  ncclFloat32, comm, nullptr)
                                           : tuttiAllToAllvDynamic(nullptr, counts.data(), 0, nullptr, 0, 0,
                                                                   counts.data(), ncclFloat32, comm, nullptr);
              const std::string message = ncclGetLastError(comm);
              check(got == ncclInvalidUsage && message.find(formName(form)) != std::string::npos &&
                        message.find("not supported by tutti yet on the emulated backend") != std::string::npos,
                    who + formName(form) + " was not refused by name: " + std::to_string(int(got)) + ": " + message);
            }
            ncclResult_t async = ncclSuccess;
            TUTTI_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
            check(async == ncclSuccess, who + "the refusals failed the communicator");
          }) == "");
}
