// NCCL 2.30's parameter API over tutti's catalogue (every parameter bound, listed, read in every
// width against values worked out by hand, refused where a value does not fit, ncclParamDumpAll
// against tutti-info --env), and ncclCommMemStats and ncclWinGetUserPtr on communicators.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/params.h"
#include "nccl.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"

using tutti_test::check;
using tutti_test::runThreads;
using tutti_test::ScopedEnv;

namespace {

ncclParamHandle_t bound(const char* key) {
  ncclParamHandle_t handle = nullptr;
  REQUIRE(ncclParamBind(&handle, key) == ncclSuccess);
  REQUIRE(handle != nullptr);
  return handle;
}

// The call failed with `want` and the last error names `name`.
void requireFailure(ncclResult_t got, ncclResult_t want, const std::string& name) {
  CHECK(got == want);
  INFO(ncclGetLastError(nullptr));
  CHECK(std::string(ncclGetLastError(nullptr)).find(name) != std::string::npos);
}

// What fn writes to stdout, through a temporary file.
template <typename Fn>
std::string stdoutOf(Fn fn) {
  std::fflush(stdout);
  char path[] = "/tmp/tutti-param-dump-XXXXXX";
  int file = mkstemp(path);
  REQUIRE(file >= 0);
  int saved = dup(STDOUT_FILENO);
  dup2(file, STDOUT_FILENO);
  fn();
  std::fflush(stdout);
  dup2(saved, STDOUT_FILENO);
  close(saved);
  std::string text;
  char buffer[4096];
  lseek(file, 0, SEEK_SET);
  for (ssize_t n; (n = read(file, buffer, sizeof buffer)) > 0;) text.append(buffer, size_t(n));
  close(file);
  unlink(path);
  return text;
}

}  // namespace

TEST_CASE("param api: every parameter of the catalogue is listed, in its order, and bindable") {
  const char** keys = nullptr;
  int count = 0;
  REQUIRE(ncclParamGetAllParameterKeys(&keys, &count) == ncclSuccess);
  const auto& all = tutti::params::registry().all();
  REQUIRE(count == int(all.size()));
  REQUIRE(count > 60);  // NCCL's names and ours: the catalogue is not empty or cut short
  for (int i = 0; i < count; i++) {
    INFO(keys[i]);
    CHECK(std::string(keys[i]) == all[size_t(i)]->name());
    ncclParamHandle_t handle = nullptr;
    CHECK(ncclParamBind(&handle, keys[i]) == ncclSuccess);
    const char* text = nullptr;
    int length = -1;
    // Every default parses, so every parameter reads as text, by handle and by key alike.
    CHECK(ncclParamGetStr(handle, &text) == ncclSuccess);
    std::string byHandle = text != nullptr ? text : "(null)";
    CHECK(ncclParamGetParameter(keys[i], &text, &length) == ncclSuccess);
    CHECK(std::string(text) == byHandle);
    CHECK(length == int(byHandle.size()));
  }
  requireFailure(ncclParamBind(nullptr, "NCCL_BUFFSIZE"), ncclInvalidArgument, "ncclParamBind");
  requireFailure(ncclParamGetAllParameterKeys(nullptr, &count), ncclInvalidArgument, "ncclParamGetAllParameterKeys");
}

TEST_CASE("param api: numbers, sizes and flags read in every width, refused where they do not fit") {
  ScopedEnv buffsize("NCCL_BUFFSIZE", "4K");
  ScopedEnv timeout("TUTTI_TIMEOUT", "0x7f");
  ScopedEnv spin("TUTTI_SPIN", "-129");
  ScopedEnv ibDisable("NCCL_IB_DISABLE", "yes");
  ScopedEnv nsteps("TUTTI_NSTEPS", "65535");

  int8_t i8 = 0;
  uint8_t u8 = 0;
  int16_t i16 = 0;
  uint16_t u16 = 0;
  int32_t i32 = 0;
  uint32_t u32 = 0;
  int64_t i64 = 0;
  uint64_t u64 = 0;

  ncclParamHandle_t size = bound("NCCL_BUFFSIZE");  // 4K = 4096
  CHECK(ncclParamGetI16(size, &i16) == ncclSuccess);
  CHECK(i16 == 4096);
  CHECK(ncclParamGetU64(size, &u64) == ncclSuccess);
  CHECK(u64 == 4096u);
  requireFailure(ncclParamGetU8(size, &u8), ncclInvalidArgument, "NCCL_BUFFSIZE");

  ncclParamHandle_t hex = bound("TUTTI_TIMEOUT");  // 0x7f = 127: the largest int8_t
  CHECK(ncclParamGetI8(hex, &i8) == ncclSuccess);
  CHECK(i8 == 127);
  {
    ScopedEnv more("TUTTI_TIMEOUT", "128");
    requireFailure(ncclParamGetI8(hex, &i8), ncclInvalidArgument, "TUTTI_TIMEOUT");
    CHECK(ncclParamGetU8(hex, &u8) == ncclSuccess);
    CHECK(u8 == 128);
  }

  ncclParamHandle_t negative = bound("TUTTI_SPIN");  // -129: below int8_t, fits int16_t
  requireFailure(ncclParamGetI8(negative, &i8), ncclInvalidArgument, "int8_t");
  CHECK(ncclParamGetI16(negative, &i16) == ncclSuccess);
  CHECK(i16 == -129);
  CHECK(ncclParamGetI64(negative, &i64) == ncclSuccess);
  CHECK(i64 == -129);
  requireFailure(ncclParamGetU64(negative, &u64), ncclInvalidArgument, "TUTTI_SPIN");
  requireFailure(ncclParamGetU32(negative, &u32), ncclInvalidArgument, "uint32_t");

  ncclParamHandle_t wide = bound("TUTTI_NSTEPS");  // 65535: the largest uint16_t
  CHECK(ncclParamGetU16(wide, &u16) == ncclSuccess);
  CHECK(u16 == 65535);
  requireFailure(ncclParamGetI16(wide, &i16), ncclInvalidArgument, "TUTTI_NSTEPS");
  CHECK(ncclParamGetI32(wide, &i32) == ncclSuccess);
  CHECK(i32 == 65535);

  ncclParamHandle_t flag = bound("NCCL_IB_DISABLE");  // "yes" = 1
  CHECK(ncclParamGetU8(flag, &u8) == ncclSuccess);
  CHECK(u8 == 1);
  const char* text = nullptr;
  CHECK(ncclParamGetStr(flag, &text) == ncclSuccess);
  CHECK(std::string(text) == "1");

  // Raw bytes: int64_t for numbers, one byte for flags; *len says what it takes when too small.
  unsigned char raw[16] = {};
  int length = 0;
  CHECK(ncclParamGet(size, raw, sizeof raw, &length) == ncclSuccess);
  CHECK(length == 8);
  std::memcpy(&i64, raw, sizeof i64);
  CHECK(i64 == 4096);
  CHECK(ncclParamGet(flag, raw, sizeof raw, &length) == ncclSuccess);
  CHECK((length == 1 && raw[0] == 1));
  requireFailure(ncclParamGet(size, raw, 7, &length), ncclInvalidArgument, "NCCL_BUFFSIZE");
  CHECK(length == 8);
}

TEST_CASE("param api: text reads as text only, and a value that does not parse is refused, naming it") {
  ScopedEnv ifname("NCCL_SOCKET_IFNAME", "=eth0");
  ncclParamHandle_t handle = bound("NCCL_SOCKET_IFNAME");
  const char* text = nullptr;
  CHECK(ncclParamGetStr(handle, &text) == ncclSuccess);
  CHECK(std::string(text) == "=eth0");
  char raw[16];
  int length = 0;
  CHECK(ncclParamGet(handle, raw, sizeof raw, &length) == ncclSuccess);
  CHECK(length == 6);
  CHECK(std::string(raw) == "=eth0");
  int32_t i32 = 0;
  requireFailure(ncclParamGetI32(handle, &i32), ncclInvalidArgument, "NCCL_SOCKET_IFNAME");

  ScopedEnv bad("NCCL_BUFFSIZE", "lots");
  int64_t i64 = 0;
  requireFailure(ncclParamGetI64(bound("NCCL_BUFFSIZE"), &i64), ncclInvalidUsage, "NCCL_BUFFSIZE=lots");
  int valueLength = 0;
  requireFailure(ncclParamGetParameter("NCCL_BUFFSIZE", &text, &valueLength), ncclInvalidUsage, "NCCL_BUFFSIZE");

  requireFailure(ncclParamBind(&handle, "NCCL_NOT_A_PARAMETER"), ncclInvalidArgument, "NCCL_NOT_A_PARAMETER");
  requireFailure(ncclParamGetI32(reinterpret_cast<ncclParamHandle_t>(&i32), &i32), ncclInvalidArgument,
                 "not one from ncclParamBind");
  requireFailure(ncclParamGetI32(nullptr, &i32), ncclInvalidArgument, "ncclParamGetI32");
}

TEST_CASE("param api: ncclParamDumpAll prints what tutti-info --env prints") {
  ScopedEnv set("NCCL_BUFFSIZE", "2M");
  ScopedEnv typo("NCCL_BUFSIZE", "1M");
  std::string dump = stdoutOf([] { ncclParamDumpAll(); });

  // The tool, run as a user would, in this environment.
  std::string tool;
  FILE* pipe = popen(TUTTI_INFO_BINARY " --env", "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) tool.append(buffer, n);
  CHECK(pclose(pipe) == 0);
  CHECK(dump == tool);

  // And what it holds: a line per parameter, the set value as written and as read, the typo named.
  for (const tutti::params::Param* param : tutti::params::registry().all())
    CHECK(dump.find("\n" + std::string(param->name()) + " ") != std::string::npos);
  CHECK(dump.find("2M = 2097152") != std::string::npos);
  CHECK(dump.find("NCCL_BUFSIZE") != std::string::npos);
  CHECK(dump.find("not a parameter tutti reads") != std::string::npos);
}

TEST_CASE("mem stats: every statistic answers on a running communicator, and bad arguments are refused") {
  std::string failures = runThreads(2, [](int rank, int, ncclComm_t comm) {
    uint64_t value = 7, total = 0, suspend = 0, persist = 0;
    TUTTI_NCCL_CHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &value));
    check(value == 0, "rank " + std::to_string(rank) + ": ncclStatGpuMemSuspended is " + std::to_string(value));
    TUTTI_NCCL_CHECK(ncclCommMemStats(comm, ncclStatGpuMemSuspend, &suspend));
    TUTTI_NCCL_CHECK(ncclCommMemStats(comm, ncclStatGpuMemPersist, &persist));
    TUTTI_NCCL_CHECK(ncclCommMemStats(comm, ncclStatGpuMemTotal, &total));
    check(suspend > 0 && persist > 0 && total == suspend + persist,
          "rank " + std::to_string(rank) + ": suspendable " + std::to_string(suspend) + ", persistent " +
              std::to_string(persist) + ", total " + std::to_string(total));
    check(ncclCommMemStats(comm, ncclStatGpuMemSuspended, nullptr) == ncclInvalidArgument, "a NULL value passed");
    check(ncclCommMemStats(comm, ncclCommMemStat_t(9), &value) == ncclInvalidArgument, "an unknown statistic passed");
    // The communicator stays usable after the refusals.
    double in = rank + 1, out = 0;
    TUTTI_NCCL_CHECK(ncclAllReduce(&in, &out, 1, ncclFloat64, ncclSum, comm, nullptr));
    check(out == 3, "all-reduce after the refusals gave " + std::to_string(out));
  });
  INFO(failures);
  CHECK(failures.empty());
}

TEST_CASE("windows: ncclWinGetUserPtr gives each rank its own buffer and refuses a window not registered") {
  std::string failures = runThreads(2, [](int rank, int, ncclComm_t comm) {
    std::vector<float> buffer(1024);
    ncclWindow_t window = nullptr;
    TUTTI_NCCL_CHECK(
        ncclCommWindowRegister(comm, buffer.data(), buffer.size() * sizeof(float), &window, NCCL_WIN_COLL_SYMMETRIC));
    void* user = nullptr;
    TUTTI_NCCL_CHECK(ncclWinGetUserPtr(comm, window, &user));
    check(user == buffer.data(), "rank " + std::to_string(rank) + ": not its buffer");
    // A window handle this communicator never registered.
    float other[4];
    check(ncclWinGetUserPtr(comm, reinterpret_cast<ncclWindow_t>(other), &user) == ncclInvalidArgument,
          "a foreign window was taken");
    TUTTI_NCCL_CHECK(ncclCommWindowDeregister(comm, window));
    check(ncclWinGetUserPtr(comm, window, &user) == ncclInvalidArgument, "a deregistered window was taken");
  });
  INFO(failures);
  CHECK(failures.empty());
}
