/* Calls the deprecated ncclResetDebugInit: compiling it must warn (a CTest test checks that). */
#include "nccl.h"

void tutti_abi_deprecated_use(void);
void tutti_abi_deprecated_use(void) { ncclResetDebugInit(); }
