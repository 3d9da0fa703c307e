// The environment that makes the IB backend run on the software verbs stand-in
// (tests/ibverbs_standin) over loopback, for the tests of the binaries that are given its path
// (TUTTI_TEST_IBVERBS_STANDIN, tests/CMakeLists.txt).
#pragma once

#include "tests/common/env_support.h"

namespace tutti_test {

struct IbStandinEnv {
  ScopedEnv library{"TUTTI_IBVERBS_LIB", TUTTI_TEST_IBVERBS_STANDIN};
  ScopedEnv ifname{"NCCL_SOCKET_IFNAME", "lo"};
};

}  // namespace tutti_test
