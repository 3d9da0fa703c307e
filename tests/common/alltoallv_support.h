// ncclAllToAllv exchanges that a rank runs and checks, shared by the API tests and the multi-host
// runs: count matrices with zeros, a hot destination, heavy-tailed skew and uniform blocks; send
// blocks out of order and overlapping; receive blocks out of order with gaps that must stay
// untouched; int8, int32, float16, bfloat16 and float64. Each receive buffer is compared byte for
// byte with a reference built on the host from the count matrix and the layouts alone.
#pragma once

#include "nccl.h"

namespace tutti_test {

// How a rank issues the call: on the null stream, or on a stream of its own (tuttiStreamCreate)
// inside a group with an all-reduce behind it.
enum class AllToAllvIssue { NullStream, StreamInGroup };

// Every pattern and type on one communicator: one rank's calls and checks. Throws RankFailure
// naming the pattern, type, rank and first wrong byte.
void exchangeAllToAllv(int rank, int nranks, ncclComm_t comm, AllToAllvIssue issue);

}  // namespace tutti_test
