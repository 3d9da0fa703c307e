// The CUDA MPS check that init makes before processes share a GPU (runtime/comm/gpu_sharing.h).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "runtime/comm/gpu_sharing.h"
#include "tests/common/env_support.h"

TEST_CASE("gpu sharing: processes on one GPU need the MPS daemon's control pipe, and the error says where it looked",
          "[runtime][gpu]") {
  char pattern[] = "/tmp/tutti-mps-XXXXXX";
  const std::string directory = mkdtemp(pattern);
  tutti_test::ScopedEnv pipes("CUDA_MPS_PIPE_DIRECTORY", directory.c_str());
  const std::string control = directory + "/control";

  std::string problem = tutti::mpsProblem();
  INFO(problem);
  CHECK(problem.find("no CUDA MPS daemon is running (no control pipe at " + control + ")") != std::string::npos);
  CHECK(problem.find("nvidia-cuda-mps-control -d") != std::string::npos);

  std::ofstream(control) << "not a pipe";  // a stale file is not a daemon
  CHECK_FALSE(tutti::mpsProblem().empty());
  unlink(control.c_str());

  REQUIRE(mkfifo(control.c_str(), 0600) == 0);
  CHECK(tutti::mpsProblem() == "");
  unlink(control.c_str());
  rmdir(directory.c_str());
}
