// Communicator life cycle through the C API: split, nonblocking init, InitAll, InitRankScalable,
// groups over several communicators, host streams, PreMulSum ops, point-to-point mixes, and
// tuttiCommDescribeWait on a rank whose peer is late.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

using tutti_test::check;
using tutti_test::initPair;
using tutti_test::runThreads;
using tutti_test::secondsSince;

namespace {

// All-reduce of (rank + 1) over comm; checks the sum on this rank.
void checkAllReduce(ncclComm_t comm, size_t count = 1000) {
  int rank = -1, n = 0;
  TUTTI_NCCL_CHECK(ncclCommUserRank(comm, &rank));
  TUTTI_NCCL_CHECK(ncclCommCount(comm, &n));
  std::vector<double> in(count, rank + 1), out(count, -1);
  TUTTI_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, ncclFloat64, ncclSum, comm, nullptr));
  for (size_t i = 0; i < count; i++)
    check(out[i] == n * (n + 1) / 2.0, "all-reduce on rank " + std::to_string(rank) + " got " + std::to_string(out[i]));
}

// A loopback port nobody listens on now: the kernel's pick for a socket bound to port 0.
int freeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  bool ok = fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  if (fd >= 0) close(fd);
  REQUIRE(ok);
  return ntohs(address.sin_port);
}

}  // namespace

TEST_CASE("split by color and key, NOCOLOR gives NULL", "[comm][split]") {
  std::string failures = runThreads(6, [](int rank, int n, ncclComm_t comm) {
    int color = rank == 5 ? NCCL_SPLIT_NOCOLOR : rank % 2;
    ncclComm_t sub = nullptr;
    TUTTI_NCCL_CHECK(ncclCommSplit(comm, color, -rank, &sub, nullptr));  // key -rank: reversed order
    checkAllReduce(comm);                                                // the parent keeps working
    if (color == NCCL_SPLIT_NOCOLOR) {
      check(sub == nullptr, "NOCOLOR must give a NULL communicator");
      return;
    }
    std::vector<int> members;
    for (int r = 0; r < n; r++)
      if (r != 5 && r % 2 == color) members.push_back(r);
    std::reverse(members.begin(), members.end());
    int subRank = -1, subCount = 0;
    TUTTI_NCCL_CHECK(ncclCommUserRank(sub, &subRank));
    TUTTI_NCCL_CHECK(ncclCommCount(sub, &subCount));
    check(subCount == int(members.size()), "split size " + std::to_string(subCount));
    check(members[size_t(subRank)] == rank,
          "rank " + std::to_string(rank) + " got split rank " + std::to_string(subRank));
    // The sum of the parent ranks in this color proves who is in it.
    int64_t mine = rank, sum = 0;
    TUTTI_NCCL_CHECK(ncclAllReduce(&mine, &sum, 1, ncclInt64, ncclSum, sub, nullptr));
    int64_t want = 0;
    for (int m : members) want += m;
    check(sum == want, "sum over the split communicator " + std::to_string(sum) + " want " + std::to_string(want));
    TUTTI_NCCL_CHECK(ncclCommDestroy(sub));
  });
  REQUIRE(failures == "");
}

TEST_CASE("split under NCCL_COMM_ID gives each color a root of its own", "[comm][split]") {
  // The parent meets at the user's fixed root; the children must not: two colors there would share its address and
  // secret and mix their ranks. A short bootstrap timeout ends the mixed-up case quickly.
  tutti_test::ScopedEnv loopback("NCCL_SOCKET_IFNAME", "lo"), timeout("TUTTI_BOOTSTRAP_TIMEOUT", "10"),
      commId("NCCL_COMM_ID", ("127.0.0.1:" + std::to_string(freeLoopbackPort())).c_str());
  std::string failures = runThreads(4, [](int rank, int, ncclComm_t comm) {
    ncclComm_t sub = nullptr;
    TUTTI_NCCL_CHECK(ncclCommSplit(comm, rank % 2, rank, &sub, nullptr));
    checkAllReduce(sub);
    TUTTI_NCCL_CHECK(ncclCommDestroy(sub));
  });
  REQUIRE(failures == "");
}

TEST_CASE("nonblocking init reports ncclInProgress until done", "[comm][nonblocking]") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  const int n = 3;
  std::string failures = tutti_test::runOnThreads(n, [&](int r) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ncclResult_t result = ncclCommInitRankConfig(&comm, n, id, r, &config);
    check(result == ncclInProgress || result == ncclSuccess,
          std::string("init returned ") + ncclGetErrorString(result));
    check(comm != nullptr, "a nonblocking init must hand out the communicator at once");
    ncclResult_t state = ncclInProgress;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (state == ncclInProgress && std::chrono::steady_clock::now() < deadline) {
      TUTTI_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    check(state == ncclSuccess, std::string("async state ") + ncclGetErrorString(state));
    checkAllReduce(comm);
    TUTTI_NCCL_CHECK(ncclCommDestroy(comm));
  });
  REQUIRE(failures == "");
}

TEST_CASE("InitAll drives every rank from one thread inside a group", "[comm][initall]") {
  const int n = 4;
  std::vector<ncclComm_t> comms(n);
  REQUIRE(ncclCommInitAll(comms.data(), n, nullptr) == ncclSuccess);
  const size_t count = 100000;
  std::vector<std::vector<float>> bufs(n, std::vector<float>(count));
  for (int r = 0; r < n; r++) std::iota(bufs[size_t(r)].begin(), bufs[size_t(r)].end(), float(r));
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < n; r++)
    REQUIRE(ncclAllReduce(bufs[size_t(r)].data(), bufs[size_t(r)].data(), count, ncclFloat32, ncclSum, comms[size_t(r)],
                          nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < count; i += 997) REQUIRE(bufs[size_t(r)][i] == float(4 * i + 6));
  for (int r = 0; r < n; r++) {
    int device = -1;
    REQUIRE(ncclCommCuDevice(comms[size_t(r)], &device) == ncclSuccess);
    CHECK(device == r);
    REQUIRE(ncclCommDestroy(comms[size_t(r)]) == ncclSuccess);
  }
}

TEST_CASE("InitAll takes a device list with repeats (ranks sharing a device) and refuses a negative index",
          "[comm][initall]") {
  const int devlist[3] = {0, 0, 1};
  std::vector<ncclComm_t> comms(3);
  REQUIRE(ncclCommInitAll(comms.data(), 3, devlist) == ncclSuccess);
  for (int r = 0; r < 3; r++) {
    int device = -1;
    REQUIRE(ncclCommCuDevice(comms[size_t(r)], &device) == ncclSuccess);
    CHECK(device == devlist[r]);
  }
  std::vector<std::vector<double>> bufs(3, std::vector<double>(1000));
  for (int r = 0; r < 3; r++) std::fill(bufs[size_t(r)].begin(), bufs[size_t(r)].end(), double(r + 1));
  REQUIRE(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < 3; r++)
    REQUIRE(ncclAllReduce(bufs[size_t(r)].data(), bufs[size_t(r)].data(), 1000, ncclFloat64, ncclSum, comms[size_t(r)],
                          nullptr) == ncclSuccess);
  REQUIRE(ncclGroupEnd() == ncclSuccess);
  for (int r = 0; r < 3; r++) CHECK(bufs[size_t(r)][999] == 6.0);
  for (ncclComm_t c : comms) REQUIRE(ncclCommDestroy(c) == ncclSuccess);
  const int negative[2] = {0, -1};
  CHECK(ncclCommInitAll(comms.data(), 2, negative) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("devlist[1] is -1") != std::string::npos);
}

TEST_CASE("InitRankScalable with several roots", "[comm][scalable]") {
  int nIds = GENERATE(1, 2, 3);
  const int n = 5;
  std::vector<ncclUniqueId> ids(static_cast<size_t>(nIds));
  for (auto& id : ids) REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::string failures = tutti_test::runOnThreads(n, [&](int r) {
    ncclComm_t comm = nullptr;
    TUTTI_NCCL_CHECK(ncclCommInitRankScalable(&comm, n, r, nIds, ids.data(), nullptr));
    checkAllReduce(comm);
    TUTTI_NCCL_CHECK(ncclCommDestroy(comm));
  });
  REQUIRE(failures == "");
}

TEST_CASE("one group over two communicators mixes collectives and point-to-point", "[comm][group]") {
  ncclUniqueId second;
  REQUIRE(ncclGetUniqueId(&second) == ncclSuccess);
  std::string failures = runThreads(4, [&](int rank, int n, ncclComm_t first) {
    ncclComm_t other = nullptr;
    TUTTI_NCCL_CHECK(ncclCommInitRank(&other, n, second, (rank + 1) % n));  // a rotated numbering
    const size_t count = 70000;
    std::vector<int32_t> a(count, rank), sum(count), gathered(count * size_t(n)), fromPrev(count), self(count);
    TUTTI_NCCL_CHECK(ncclGroupStart());
    TUTTI_NCCL_CHECK(ncclGroupStart());  // nesting: only the outermost end launches
    TUTTI_NCCL_CHECK(ncclAllReduce(a.data(), sum.data(), count, ncclInt32, ncclSum, first, nullptr));
    TUTTI_NCCL_CHECK(ncclGroupEnd());
    TUTTI_NCCL_CHECK(ncclAllGather(a.data(), gathered.data(), count, ncclInt32, other, nullptr));
    TUTTI_NCCL_CHECK(ncclSend(a.data(), count, ncclInt32, (rank + 1) % n, first, nullptr));
    TUTTI_NCCL_CHECK(ncclRecv(fromPrev.data(), count, ncclInt32, (rank + n - 1) % n, first, nullptr));
    TUTTI_NCCL_CHECK(ncclSend(a.data(), count, ncclInt32, rank, first, nullptr));
    TUTTI_NCCL_CHECK(ncclRecv(self.data(), count, ncclInt32, rank, first, nullptr));
    TUTTI_NCCL_CHECK(ncclGroupEnd());
    for (size_t i = 0; i < count; i += 101) {
      check(sum[i] == n * (n - 1) / 2, "all-reduce in the group");
      check(fromPrev[i] == (rank + n - 1) % n, "receive from the previous rank");
      check(self[i] == rank, "self send/receive");
      for (int r = 0; r < n; r++) {
        int parentRankOfR = (r + n - 1) % n;  // comm `other` rank r is parent rank r-1
        check(gathered[size_t(r) * count + i] == parentRankOfR, "all-gather on the second communicator");
      }
    }
    TUTTI_NCCL_CHECK(ncclCommDestroy(other));
  });
  REQUIRE(failures == "");
}

TEST_CASE("host streams run operations asynchronously and in order", "[comm][stream]") {
  std::string failures = runThreads(3, [](int rank, int n, ncclComm_t comm) {
    cudaStream_t stream = nullptr;
    TUTTI_NCCL_CHECK(tuttiStreamCreate(&stream));
    const size_t count = 300000;
    std::vector<float> x(count, float(rank + 1)), y(count), z(count);
    TUTTI_NCCL_CHECK(ncclAllReduce(x.data(), y.data(), count, ncclFloat32, ncclSum, comm, stream));
    TUTTI_NCCL_CHECK(
        ncclAllReduce(y.data(), z.data(), count, ncclFloat32, ncclSum, comm, stream));  // uses y: order matters
    TUTTI_NCCL_CHECK(tuttiStreamSynchronize(stream));
    check(tuttiStreamQuery(stream) == ncclSuccess, "a synchronised stream is idle");
    for (size_t i = 0; i < count; i += 1009) check(z[i] == 6.0f * 3, "stream result " + std::to_string(z[i]));
    TUTTI_NCCL_CHECK(tuttiStreamDestroy(stream));
    const char* backend = nullptr;
    TUTTI_NCCL_CHECK(tuttiCommDeviceBackend(comm, &backend));
    check(std::string(backend) == "host", "backend");
    char names[16];
    int nodes = 0;
    TUTTI_NCCL_CHECK(tuttiCommTransports(comm, names, sizeof names, &nodes));
    check(std::string(names) == "local" && nodes == 1,
          "tuttiCommTransports: " + std::string(names) + " on " + std::to_string(nodes) + " nodes");
    check(tuttiCommTransports(comm, names, 5, &nodes) == ncclInvalidArgument,
          "a buffer too short for \"local\" is refused");
    check(tuttiCommTransports(comm, nullptr, sizeof names, &nodes) == ncclInvalidArgument, "a NULL buffer is refused");
    // Each node's topology: these ranks are threads of one process, so one node holds them all.
    char host[256];
    int ranks = -1, numa = -1, cpus = -1, gpus = -1, nics = -1;
    TUTTI_NCCL_CHECK(tuttiCommNodeTopology(comm, 0, host, sizeof host, &ranks, &numa, &cpus, &gpus, &nics));
    check(ranks == n && numa >= 0 && cpus >= 0 && gpus == 0 && nics >= 0,
          "tuttiCommNodeTopology: " + std::to_string(ranks) + " ranks, " + std::to_string(numa) + " NUMA nodes, " +
              std::to_string(cpus) + " CPUs, " + std::to_string(gpus) + " GPUs, " + std::to_string(nics) + " NICs");
    check(std::string(host).size() > 0, "tuttiCommNodeTopology gave no hostname");
    check(tuttiCommNodeTopology(comm, 1, host, sizeof host, &ranks, &numa, &cpus, &gpus, &nics) == ncclInvalidArgument,
          "a node past the topology's is refused");
    check(std::string(ncclGetLastError(comm)).find("node 1 is not one of the 1") != std::string::npos,
          "the error does not name the node: " + std::string(ncclGetLastError(comm)));
    check(tuttiCommNodeTopology(comm, 0, host, sizeof host, nullptr, &numa, &cpus, &gpus, &nics) == ncclInvalidArgument,
          "a NULL output is refused");
    int speed = -1;
    for (int nic = 0; nic < nics; nic++) {
      char name[64] = "";
      TUTTI_NCCL_CHECK(tuttiCommNodeNic(comm, 0, nic, name, sizeof name, &speed));
      check(name[0] != '\0' && speed >= 0,
            "tuttiCommNodeNic " + std::to_string(nic) + ": \"" + name + "\" " + std::to_string(speed));
    }
    char name[64];
    check(tuttiCommNodeNic(comm, 0, nics, name, sizeof name, &speed) == ncclInvalidArgument,
          "a NIC port past the node's is refused");
    check(tuttiCommNodeNic(comm, 0, 0, nullptr, sizeof name, &speed) == ncclInvalidArgument, "a NULL name is refused");
  });
  REQUIRE(failures == "");
}

TEST_CASE("PreMulSum with host and device scalars", "[comm][premulsum]") {
  std::string failures = runThreads(4, [](int rank, int n, ncclComm_t comm) {
    double hostScalar = 0.5;
    float deviceScalar = 3.0f;
    ncclRedOp_t half, triple;
    TUTTI_NCCL_CHECK(ncclRedOpCreatePreMulSum(&half, &hostScalar, ncclFloat64, ncclScalarHostImmediate, comm));
    TUTTI_NCCL_CHECK(ncclRedOpCreatePreMulSum(&triple, &deviceScalar, ncclFloat32, ncclScalarDevice, comm));
    hostScalar = 100;     // host-immediate: the value was taken at creation
    deviceScalar = 2.0f;  // device residence: read when the operation runs
    std::vector<double> d(999, rank + 1), dOut(999);
    std::vector<float> f(999, float(rank + 1)), fOut(999);
    TUTTI_NCCL_CHECK(ncclAllReduce(d.data(), dOut.data(), d.size(), ncclFloat64, half, comm, nullptr));
    TUTTI_NCCL_CHECK(ncclAllReduce(f.data(), fOut.data(), f.size(), ncclFloat32, triple, comm, nullptr));
    for (size_t i = 0; i < d.size(); i++) {
      check(dOut[i] == 0.5 * 10, "PreMulSum host scalar: " + std::to_string(dOut[i]));
      check(fOut[i] == 2.0f * 10, "PreMulSum device scalar: " + std::to_string(fOut[i]));
    }
    // The op is tied to its type.
    check(ncclAllReduce(f.data(), fOut.data(), 1, ncclFloat32, half, comm, nullptr) == ncclInvalidArgument,
          "op/type mismatch");
    TUTTI_NCCL_CHECK(ncclRedOpDestroy(half, comm));
    TUTTI_NCCL_CHECK(ncclRedOpDestroy(triple, comm));
    check(ncclRedOpDestroy(half, comm) == ncclInvalidArgument, "double destroy");
    check(ncclAllReduce(d.data(), dOut.data(), 1, ncclFloat64, half, comm, nullptr) == ncclInvalidArgument,
          "destroyed op");
  });
  REQUIRE(failures == "");
}

TEST_CASE("version and error strings", "[comm][version]") {
  int version = 0;
  REQUIRE(ncclGetVersion(&version) == ncclSuccess);
  CHECK(version == NCCL_VERSION(2, 28, 9));
  CHECK(std::string(ncclGetErrorString(ncclInvalidUsage)).find("invalid usage") != std::string::npos);
  CHECK(std::string(tuttiVersionString()).find("tutti") == 0);
}

TEST_CASE("ranks as a mix of processes and threads", "[comm][mixed]") {
  // Two processes of two rank threads each: local connections inside a process, shared
  // memory between them.
  std::string failures = tutti_test::runProcesses(
      4,
      [](int rank, int n, ncclComm_t comm) {
        checkAllReduce(comm, 200000);
        const size_t count = 5000;
        std::vector<int64_t> in(count * size_t(n)), out(count * size_t(n));
        for (size_t i = 0; i < in.size(); i++) in[i] = rank * 1000000 + int64_t(i);
        TUTTI_NCCL_CHECK(ncclAlltoAll(in.data(), out.data(), count, ncclInt64, comm, nullptr));
        for (int r = 0; r < n; r++)
          for (size_t j = 0; j < count; j += 7)
            check(out[size_t(r) * count + j] == r * 1000000 + int64_t(size_t(rank) * count + j),
                  "all-to-all across the mix");
      },
      120, 2);
  REQUIRE(failures == "");
}

TEST_CASE("tuttiCommDescribeWait names the peer a rank waits for, and nothing once it is done",
          "[comm][describewait]") {
  ncclComm_t comms[2] = {nullptr, nullptr};
  initPair(comms);
  char text[4096] = "x";
  REQUIRE(tuttiCommDescribeWait(comms[0], text, sizeof text) == ncclSuccess);
  CHECK(std::string(text) == "");
  // A one-shot all-reduce through the mailboxes, then one through the FIFOs (too large for them).
  const size_t counts[] = {4, size_t(1) << 20};
  auto allReduce = [](ncclComm_t comm, std::vector<float>& in, std::vector<float>& out) {
    return ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comm, nullptr);
  };
  // What a line says: the operation and where in it, how long, and what it waits for from rank 1.
  const std::regex line(
      R"(AllReduce #[0-9]+ \((one-shot through shared memory|channel [0-9]+, tile [0-9]+/[0-9]+, step [a-z-]+)\) )"
      R"(waiting [0-9]+\.[0-9] s for (the input of|data from|free FIFO space at) rank 1 \(.* pid [0-9]+\))");
  for (size_t count : counts) {
    INFO(count << " elements");
    std::vector<float> in0(count, 1.0f), out0(count, -1.0f), in1(count, 2.0f), out1(count, -1.0f);
    // Once with both ranks, so that the connections are made: later, rank 0 waits in the executor, not in their setup.
    ncclResult_t first = ncclInternalError;
    std::thread warmUp([&] { first = allReduce(comms[0], in0, out0); });
    ncclResult_t second = allReduce(comms[1], in1, out1);
    warmUp.join();
    REQUIRE((first == ncclSuccess && second == ncclSuccess));

    std::fill(out0.begin(), out0.end(), -1.0f);
    std::fill(out1.begin(), out1.end(), -1.0f);
    first = ncclInternalError;
    std::thread rank0([&] { first = allReduce(comms[0], in0, out0); });
    // Rank 1 has not joined yet: rank 0's workers sleep waiting for it, and say so.
    std::string seen;
    auto start = std::chrono::steady_clock::now();
    while (seen.find("rank 1") == std::string::npos && secondsSince(start) < 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (tuttiCommDescribeWait(comms[0], text, sizeof text) != ncclSuccess) break;
      seen = text;
    }
    INFO("rank 0's description: \"" << seen << "\"");
    CHECK(seen.find("rank 1") != std::string::npos);
    std::istringstream lines(seen);
    for (std::string l; std::getline(lines, l);) CHECK(std::regex_match(l, line));
    if (count < 16)
      CHECK(seen.find("one-shot through shared memory") != std::string::npos);
    else
      CHECK(seen.find("one-shot") == std::string::npos);
    // The peer is idle, not waiting.
    CHECK(tuttiCommDescribeWait(comms[1], text, sizeof text) == ncclSuccess);
    CHECK(std::string(text) == "");
    // Too short for the line: refused, leaving "".
    char shortText[8] = "x";
    CHECK(tuttiCommDescribeWait(comms[0], shortText, sizeof shortText) == ncclInvalidArgument);
    CHECK(std::string(shortText) == "");
    CHECK(std::string(ncclGetLastError(comms[0])).find("tuttiCommDescribeWait: the description needs") !=
          std::string::npos);

    second = allReduce(comms[1], in1, out1);
    rank0.join();
    REQUIRE((first == ncclSuccess && second == ncclSuccess));
    CHECK(std::count(out0.begin(), out0.end(), 3.0f) == std::ptrdiff_t(count));
    CHECK(std::count(out1.begin(), out1.end(), 3.0f) == std::ptrdiff_t(count));
    REQUIRE(tuttiCommDescribeWait(comms[0], text, sizeof text) == ncclSuccess);
    CHECK(std::string(text) == "");
  }

  CHECK(tuttiCommDescribeWait(nullptr, text, sizeof text) == ncclInvalidArgument);
  CHECK(tuttiCommDescribeWait(comms[0], nullptr, sizeof text) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(comms[0])).find("tuttiCommDescribeWait: text is NULL") != std::string::npos);
  CHECK(tuttiCommDescribeWait(comms[0], text, 0) == ncclInvalidArgument);
  REQUIRE(ncclCommDestroy(comms[0]) == ncclSuccess);
  REQUIRE(ncclCommDestroy(comms[1]) == ncclSuccess);
}
