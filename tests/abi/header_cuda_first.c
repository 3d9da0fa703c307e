/* nccl.h after CUDA's runtime header: it must take CUDA's cudaStream_t, not declare its own. */
#include <cuda_runtime.h>

#include "nccl.h"

int tutti_abi_cuda_first(cudaStream_t stream);
int tutti_abi_cuda_first(cudaStream_t stream) {
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t) =
      ncclAllReduce;
  return (allReduce != NULL) + (stream == NULL);
}
