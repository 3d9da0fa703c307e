// The bootstrap's root rendezvous servers: starting one on a fresh listener, or on the fixed
// address NCCL_COMM_ID names.
#pragma once

#include "base/clock.h"
#include "base/socket.h"
#include "bootstrap/id.h"
#include "bootstrap/wire.h"

namespace tutti::bootstrap {

// A rank waits this much past its deadline for the root's answer, so that the root's error
// (which it sends at the earliest rank's deadline) arrives before the rank gives up on it.
inline constexpr double kRootAnswerGraceSeconds = 3;
// Root 0 waits this much past its deadline for the other roots' blocks; a block root waits this
// much for root 0's answer. Both are below kRootAnswerGraceSeconds, so ranks hear the outcome.
inline constexpr double kBlockReportGraceSeconds = 1;
inline constexpr double kRootZeroAnswerGraceSeconds = 2;

// Starts a root thread on an open listener and detaches it: it ends by itself after one
// rendezvous or its timeout, and must not keep the process from exiting.
void startRoot(Socket listener, const bootstrap::wire::Secret& secret, double timeoutSeconds);

// NCCL_COMM_ID: the first rank of the block starts the root on the fixed address, unless this
// process already runs one there. The previous job's root may still be closing its listener.
void ensureCommIdRoot(const bootstrap::wire::UniqueIdContents& id, double timeoutSeconds, SteadyTime deadline);

}  // namespace tutti::bootstrap
