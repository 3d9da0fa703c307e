// The CUDA MPS check (see gpu_sharing.h).
#include "runtime/comm/gpu_sharing.h"

#include <sys/stat.h>

#include <cstdlib>

namespace tutti {

std::string mpsProblem() {
  const char* configured = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string directory = configured != nullptr && *configured != '\0' ? configured : "/tmp/nvidia-mps";
  const std::string control = directory + "/control";
  struct stat st {};
  if (stat(control.c_str(), &st) == 0 && S_ISFIFO(st.st_mode)) return "";
  return "no CUDA MPS daemon is running (no control pipe at " + control +
         "), so their kernels would take turns on the GPU instead of running side by side; start it with "
         "`nvidia-cuda-mps-control -d` (and the same CUDA_MPS_PIPE_DIRECTORY for every rank), or give each process its "
         "own GPU";
}

}  // namespace tutti
