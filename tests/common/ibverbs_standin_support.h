// The environment that makes the IB backend run on the software verbs stand-in
// (tests/ibverbs_standin) over loopback, for the tests of the binaries that are given its path
// (TUTTI_TEST_IBVERBS_STANDIN, tests/CMakeLists.txt).
#pragma once

#include <dlfcn.h>

#include "tests/common/env_support.h"

namespace tutti_test {

struct IbStandinEnv {
  ScopedEnv library{"TUTTI_IBVERBS_LIB", TUTTI_TEST_IBVERBS_STANDIN};
  ScopedEnv ifname{"NCCL_SOCKET_IFNAME", "lo"};
};

// A test-only function of the stand-in this process has loaded (through the IB backend), as type
// F; nullptr when the stand-in is not loaded or lacks `name`. Valid while the backend holds it.
template <class F>
F loadedStandinSymbol(const char* name) {
  void* library = dlopen(TUTTI_TEST_IBVERBS_STANDIN, RTLD_NOW | RTLD_NOLOAD);
  if (library == nullptr) return nullptr;
  F symbol = reinterpret_cast<F>(dlsym(library, name));
  dlclose(library);  // NOLOAD took a reference; the backend's keeps the library loaded
  return symbol;
}

}  // namespace tutti_test
