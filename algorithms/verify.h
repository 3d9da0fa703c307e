// The plan verifier: runs every rank's plan symbolically and proves the collective's
// postcondition, or says precisely why not.
//
// Every chunk of data is a symbolic value: which piece of the tile it is (tile, chunk or block),
// the set of ranks whose contributions it sums, on which of them the reduction's pre-operation
// was applied, and whether the post-operation was. The model follows the executor: per
// connection FIFOs keyed by (from, to, kind, tag) with a bounded capacity, blocking steps, lanes
// that share a connection run one after another in plan order, several tiles per lane with
// scratch cleared between them, in-place aliasing of each collective, and null buffers where the
// collective gives a rank none. One channel is modelled: every channel runs the same plan on its
// own connections.
// A joined run of steps (plan.h) is one message: it takes one FIFO slot, waits for a whole
// message and runs whole, and each message must be received as a run of as many steps as sent
// it. Every rank's widest run must be as wide, since the chunk is cut from it.
//
// Where the model is stricter than the executor, it is so on purpose: lanes that share a
// connection directly or through a third lane form one queue (a bounded-FIFO network with
// blocking steps makes the same progress under any fair schedule, so more concurrency can only
// help); two lanes of a rank that may run at the same time must not touch the same memory when
// one of them writes it, whatever the causal order between them (the IR's rule, checked
// statically); and every lane with steps must cut tiles the same way (layout and tileChunks), so
// that chunks line up between ranks. Plans too large to model (about 2^24 rank-set words) are
// refused rather than run.
#pragma once

#include <functional>
#include <string>

#include "algorithms/registry.h"

namespace tutti::plan {

struct VerifyRequest {
  Coll coll = Coll::AllReduce;
  int nranks = 1;
  int root = 0;  // rooted collectives; for Send/Recv, rank r receives from (r - root) mod nranks
  // Rank r's plan. For Send/Recv, the plan of the pair "send to r + root, receive from r - root"
  // made as one group (see verifyAlgorithm).
  std::function<RankPlan(int rank)> planOf;
  int fifoCapacity = 2;  // chunks per FIFO; the runtime allows no fewer than 2
  bool inPlace = false;
  int tiles = 2;
};

// "" when the plans are correct; otherwise the first problem found, naming the rank, lane, tile
// and step ("rank 3 lane 1 tile 0 step 4 (recv-reduce-send from 2 to 4): ...").
std::string verify(const VerifyRequest& request);

// Verifies the algorithm's plans for one collective in place and out of place. Plan builders
// that throw are reported as failures with their message.
std::string verifyAlgorithm(const Algorithm& algorithm, Coll coll, int nranks, int root, int ranksPerNode = 0,
                            int fifoCapacity = 2);

}  // namespace tutti::plan
