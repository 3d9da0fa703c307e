// The default WaitHooks: bare rank numbers, no peers' calls, no network.
#include "kernels/wait_hooks.h"

namespace tutti::kern {

namespace {
// Constant-initialised and stateless: shared by every context that is given no hooks.
constinit const WaitHooks kNoHooks;
}  // namespace

const WaitHooks& WaitHooks::none() { return kNoHooks; }

std::string WaitHooks::describePeer(int peer) const { return "rank " + std::to_string(peer); }

}  // namespace tutti::kern
