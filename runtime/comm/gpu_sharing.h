// Ranks in several processes on one GPU: their kernels run side by side only under CUDA MPS, and
// without it each waits for the others' kernels to finish, which the collectives' kernels (each
// waiting for its peers) turn into a crawl or a timeout. So init checks for the daemon first.
#pragma once

#include <string>

namespace tutti {

// Why processes sharing a GPU cannot run side by side here ("" when the MPS daemon's control pipe
// is present: CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps).
std::string mpsProblem();

}  // namespace tutti
