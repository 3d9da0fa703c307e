/* Compiles nccl.h and checks, at compile time, the facts a compiler can prove (built as C99,
 * C11 and C++ by tests/abi/CMakeLists.txt; a failure here fails the build). */
#include <stddef.h>

#include "function_list.h"
#include "nccl.h"

#if defined(__cplusplus)
#define ABI_CHECK(condition, name) static_assert(condition, #name)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define ABI_CHECK(condition, name) _Static_assert(condition, #name)
#else
#define ABI_CHECK(condition, name) typedef char abi_check_##name[(condition) ? 1 : -1]
#endif

ABI_CHECK(sizeof(ncclUniqueId) == NCCL_UNIQUE_ID_BYTES && NCCL_UNIQUE_ID_BYTES == 128, unique_id_bytes);
ABI_CHECK(NCCL_VERSION_CODE == NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), version_code);
ABI_CHECK(NCCL_VERSION(2, 28, 9) == 22809 && NCCL_VERSION(2, 8, 4) == 2804, version_macro);
ABI_CHECK(ncclMaxRedOp == 0x7fffffff && sizeof(ncclRedOp_t) == 4, max_red_op);
ABI_CHECK(ncclNumTypes == 12 && ncclNumResults == 9 && ncclNumOps == 5, enum_counts);
ABI_CHECK(sizeof(void*) != 8 || sizeof(ncclConfig_t) == 96, config_size_lp64);
ABI_CHECK(sizeof(void*) != 8 || offsetof(ncclConfig_t, graphStreamOrdering) == 92, config_last_field);
ABI_CHECK(sizeof(ncclWaitSignalDesc_t) == 4 * sizeof(int), wait_signal_desc_size);
ABI_CHECK(sizeof(void*) != 8 || sizeof(ncclSimInfo_t) == 24, sim_info_size_lp64);

/* Naming every function proves each is declared, in both spellings. void(*)(void) is the
 * generic function pointer type that casts from any other without a warning. */
typedef void (*AnyFunction)(void);
#define ABI_ADDRESS(Name) (AnyFunction) nccl##Name, (AnyFunction)pnccl##Name,
static const AnyFunction everyFunction[] = {TUTTI_ABI_FOR_EACH_FUNCTION(ABI_ADDRESS)};

int tutti_abi_header_check(void);
int tutti_abi_header_check(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t simInfo = NCCL_SIM_INFO_INITIALIZER;
  ncclUniqueId id;
  ncclComm_t comm = NCCL_COMM_NULL;
  ncclWindow_t window = NULL;
  cudaStream_t stream = NULL;
  ncclRedOp_t op = ncclAvg;
  ncclDataType_t type = ncclBfloat16;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  id.internal[0] = 0;
  return (int)(sizeof everyFunction / sizeof everyFunction[0]) + (int)config.size + (int)simInfo.size + id.internal[0] +
         (comm == NULL) + (window == NULL) + (stream == NULL) + (int)op + (int)type + (int)residence;
}
