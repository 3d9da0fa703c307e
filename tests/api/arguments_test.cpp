// Bad arguments get ncclInvalidArgument or ncclInvalidUsage, a message in ncclGetLastError, and
// leave the communicator usable.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "nccl.h"
#include "tests/common/ranks_support.h"

using tutti_test::check;

namespace {

void expectError(ncclResult_t got, ncclResult_t want, const char* what, const char* mention) {
  std::string last = ncclGetLastError(nullptr);
  check(got == want, std::string(what) + ": got " + ncclGetErrorString(got) + ", want " + ncclGetErrorString(want));
  check(last.find(mention) != std::string::npos,
        std::string(what) + ": the last error '" + last + "' does not mention '" + mention + "'");
}

}  // namespace

TEST_CASE("every bad argument is refused with a message and the comm stays usable", "[arguments]") {
  std::string failures = tutti_test::runThreads(2, [](int rank, int n, ncclComm_t comm) {
    std::vector<float> a(16, 1.0f), b(16);
    expectError(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument,
                "NULL comm", "NULL");
    expectError(ncclAllReduce(nullptr, b.data(), 16, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument,
                "NULL sendbuff", "sendbuff");
    expectError(ncclAllReduce(a.data(), nullptr, 16, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument,
                "NULL recvbuff", "recvbuff");
    expectError(ncclAllReduce(a.data(), b.data(), 16, ncclDataType_t(42), ncclSum, comm, nullptr), ncclInvalidArgument,
                "bad type", "datatype");
    expectError(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclRedOp_t(17), comm, nullptr), ncclInvalidArgument,
                "bad op", "reduction op");
    expectError(ncclBroadcast(a.data(), b.data(), 16, ncclFloat32, n, comm, nullptr), ncclInvalidArgument,
                "root out of range", "root");
    expectError(ncclReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, -1, comm, nullptr), ncclInvalidArgument,
                "negative root", "root");
    expectError(ncclSend(a.data(), 16, ncclFloat32, n + 3, comm, nullptr), ncclInvalidArgument, "peer out of range",
                "peer");
    expectError(ncclRecv(b.data(), 16, ncclFloat32, -2, comm, nullptr), ncclInvalidArgument, "negative peer", "peer");
    expectError(
        ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, comm, reinterpret_cast<cudaStream_t>(0x1234)),
        ncclInvalidArgument, "foreign stream", "stream");
    expectError(ncclGroupEnd(), ncclInvalidUsage, "unmatched group end", "ncclGroupStart");
    // NULL buffers with count 0 are fine.
    TUTTI_NCCL_CHECK(ncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, comm, nullptr));
    // A failed call inside a group fails the group and drops its operations.
    TUTTI_NCCL_CHECK(ncclGroupStart());
    ncclResult_t inside = ncclAllReduce(nullptr, b.data(), 16, ncclFloat32, ncclSum, comm, nullptr);
    check(inside == ncclInvalidArgument, "bad call inside a group");
    TUTTI_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, comm, nullptr));
    check(ncclGroupEnd() != ncclSuccess, "a group with a failed call must fail");
    // Still usable.
    TUTTI_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, comm, nullptr));
    check(b[3] == float(n), "the comm works after bad calls");
  });
  REQUIRE(failures == "");
}

TEST_CASE("bad init arguments and configs", "[arguments][config]") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  CHECK(ncclCommInitRank(nullptr, 2, id, 0) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(&comm, 0, id, 0) == ncclInvalidArgument);
  CHECK(ncclCommInitRank(&comm, 2, id, 2) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("rank 2") != std::string::npos);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.magic = 0;  // not made with the initializer
  CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &config) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("NCCL_CONFIG_INITIALIZER") != std::string::npos);
  CHECK(ncclGetUniqueId(nullptr) == ncclInvalidArgument);
  CHECK(ncclCommInitAll(nullptr, 2, nullptr) == ncclInvalidArgument);
}

TEST_CASE("a destroyed or aborted comm is refused, not dereferenced", "[arguments][lifecycle]") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
  float x = 1, y = 0;
  REQUIRE(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess);
  CHECK(y == 1);
  REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
  CHECK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidUsage);
  CHECK(std::string(ncclGetLastError(nullptr)).find("not a live communicator") != std::string::npos);
  CHECK(ncclCommDestroy(comm) == ncclInvalidUsage);

  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
  REQUIRE(ncclCommAbort(comm) == ncclSuccess);
  int count = 0;
  CHECK(ncclCommCount(comm, &count) == ncclInvalidUsage);
}

TEST_CASE("unsupported functions say so", "[arguments][unsupported]") {
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  ncclComm_t comm = nullptr;
  REQUIRE(ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess);
  ncclWindow_t win = nullptr;
  float buf[4];
  CHECK(ncclCommWindowRegister(comm, buf, sizeof buf, &win, 2) == ncclInvalidArgument);
  CHECK(std::string(ncclGetLastError(nullptr)).find("winFlags 2 is neither") != std::string::npos);
  CHECK(ncclCommWindowRegister(comm, buf, sizeof buf, nullptr, 0) == ncclInvalidArgument);
  REQUIRE(ncclCommWindowRegister(comm, buf, sizeof buf, &win, NCCL_WIN_COLL_SYMMETRIC) == ncclSuccess);
  CHECK(ncclCommWindowDeregister(comm, win) == ncclSuccess);
  CHECK(ncclCommWindowDeregister(comm, win) == ncclInvalidArgument);  // once only
  // A simInfo that was not initialised is refused, and the group still ends.
  REQUIRE(ncclGroupStart() == ncclSuccess);
  CHECK(ncclGroupSimulateEnd(nullptr) == ncclInvalidArgument);
  ncclSimInfo_t unset{};
  REQUIRE(ncclGroupStart() == ncclSuccess);
  CHECK(ncclGroupSimulateEnd(&unset) == ncclInvalidArgument);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  CHECK(ncclGroupSimulateEnd(&sim) == ncclInvalidUsage);  // not in a group
  // Registration gives a real, checked handle (registration_test.cpp; zero-copy: zero_copy_test.cpp).
  void* handle = nullptr;
  REQUIRE(ncclCommRegister(comm, buf, sizeof buf, &handle) == ncclSuccess);
  REQUIRE(ncclCommDeregister(comm, handle) == ncclSuccess);
  REQUIRE(ncclCommDestroy(comm) == ncclSuccess);
}
