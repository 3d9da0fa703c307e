// The check every executor makes of a compiled plan before it trusts the plan's indices.
#pragma once

#include "algorithms/flat_plan.h"
#include "algorithms/lane.h"

namespace tutti::kern {

// Checks that every index a plan's steps use is in range (connections, chunks, blocks, scratch
// chunks) and that each step names the buffers it needs, so the executor can trust them.
// Throws tutti::Error (InvalidUsage) naming the algorithm, lane and step.
void checkPlanBounds(const plan::RankPlan& plan, int rank, int nranks);

}  // namespace tutti::kern
