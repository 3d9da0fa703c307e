/* nccl.h before CUDA's runtime header: its own cudaStream_t must agree with CUDA's. */
#include "nccl.h"

#include <cuda_runtime.h>

int tutti_abi_cuda_after(cudaStream_t stream);
int tutti_abi_cuda_after(cudaStream_t stream) {
  struct CUstream_st* sameType = stream;
  return sameType == NULL;
}
