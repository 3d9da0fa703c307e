// Tests of host identity: the host name, the host hash and NCCL_HOSTID, the process token.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>

#include "base/host_identity.h"
#include "tests/common/env_support.h"

using tutti_test::ScopedEnv;

TEST_CASE("host identity: the host name is gethostname's", "[host_identity]") {
  char name[256] = {};
  REQUIRE(gethostname(name, sizeof name - 1) == 0);
  CHECK(tutti::hostname() == name);
}

TEST_CASE("host identity: the host hash is stable, and NCCL_HOSTID replaces it", "[host_identity]") {
  ScopedEnv unset("NCCL_HOSTID", nullptr);
  uint64_t own = tutti::hostHash();
  CHECK(tutti::hostHash() == own);
  ScopedEnv set("NCCL_HOSTID", "rack1-node7");
  uint64_t named = tutti::hostHash();
  CHECK(named != own);
  CHECK(tutti::hostHash() == named);
  setenv("NCCL_HOSTID", "rack1-node8", 1);
  CHECK(tutti::hostHash() != named);
}

TEST_CASE("host identity: the process token is stable across threads and differs in a forked child",
          "[host_identity]") {
  uint64_t token = tutti::processToken();
  CHECK(token != 0);
  uint64_t seen = 0;
  std::thread([&] { seen = tutti::processToken(); }).join();
  CHECK(seen == token);

  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    uint64_t childToken = tutti::processToken();
    _exit(write(fds[1], &childToken, sizeof childToken) == sizeof childToken ? 0 : 1);
  }
  close(fds[1]);
  uint64_t childToken = 0;
  CHECK(read(fds[0], &childToken, sizeof childToken) == sizeof childToken);
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(childToken != 0);
  CHECK(childToken != token);
}
