// The idle policy of a host thread's wait (kernels/execution_context.h).
#include "kernels/execution_context.h"

#include <sched.h>

namespace tutti::kern {

bool idlePoll(int idle, const ExecutionContext& ctx) {
  if (idle < ctx.spin) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
    return true;
  }
  if (idle < ctx.spin + ctx.yields) {
    sched_yield();
    return true;
  }
  return false;
}

}  // namespace tutti::kern
