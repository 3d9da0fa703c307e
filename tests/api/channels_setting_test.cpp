// NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS bound the channels the selector chooses for every
// collective and size, and the minimum reaches the operations that run.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "nccl.h"
#include "runtime/comm/comm.h"
#include "runtime/comm/select.h"
#include "tests/common/env_support.h"
#include "tests/common/ranks_support.h"

using tutti::plan::Coll;

TEST_CASE("channels: the selector keeps to NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS", "[channels][threads]") {
  struct Setting {
    const char* min;
    const char* max;
    int low, high;  // the channels every choice must lie in
  };
  const Setting s = GENERATE(Setting{"3", "4", 3, 4}, Setting{"1", "2", 1, 2}, Setting{"4", "2", 4, 4});
  tutti_test::ScopedEnv minimum("NCCL_MIN_NCHANNELS", s.min);
  tutti_test::ScopedEnv maximum("NCCL_MAX_NCHANNELS", s.max);
  INFO("NCCL_MIN_NCHANNELS=" << s.min << " NCCL_MAX_NCHANNELS=" << s.max);
  REQUIRE(tutti_test::runThreads(3, [&](int rank, int nranks, ncclComm_t comm) {
            for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::Reduce})
              for (size_t bytes : {size_t(8), size_t(64) << 10, size_t(16) << 20}) {
                const int nch = comm->planning.selector->select(coll, bytes).nchannels;
                tutti_test::check(nch >= s.low && nch <= s.high,
                                  "rank " + std::to_string(rank) + ": " + tutti::plan::collName(coll) + " of " +
                                      std::to_string(bytes) + " bytes chose " + std::to_string(nch) +
                                      " channel(s), outside " + std::to_string(s.low) + ".." + std::to_string(s.high));
              }
            // And an operation runs on them: the sum against the float64 reference.
            const size_t count = (size_t(1) << 20) + 5;
            std::vector<float> buffer(count);
            for (size_t i = 0; i < count; i++) buffer[i] = float((rank + 1) * (i % 97)) * 0.5f;
            TUTTI_NCCL_CHECK(ncclAllReduce(buffer.data(), buffer.data(), count, ncclFloat32, ncclSum, comm, nullptr));
            for (size_t i = 0; i < count; i += 101) {
              double want = 0;
              for (int q = 0; q < nranks; q++) want += double((q + 1) * (i % 97)) * 0.5;
              tutti_test::check(double(buffer[i]) == want, "rank " + std::to_string(rank) + ": element " +
                                                               std::to_string(i) + " is " + std::to_string(buffer[i]) +
                                                               ", want " + std::to_string(want));
            }
          }) == "");
}
