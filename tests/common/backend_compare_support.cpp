#include "tests/common/backend_compare_support.h"

#include <cstdlib>
#include <mutex>

#include "tests/common/ranks_support.h"
#include "tutti/tutti.h"

namespace tutti_test {

BackendRun runBackend(const std::string& backend, int nranks, const std::vector<Case>& cases,
                      const BuffersFactory& makeBuffers) {
  setenv("TUTTI_DEVICE", backend.c_str(), 1);
  ncclUniqueId id;
  ncclGetUniqueId(&id);
  BackendRun run;
  run.cases = cases.size();
  run.outputs.assign(size_t(nranks), std::vector<std::vector<char>>(cases.size()));
  run.algorithms.assign(cases.size(), "");
  std::mutex mutex;
  std::string failures = runOnThreads(nranks, [&](int rank) {
    std::unique_ptr<CaseBuffers> buffers = makeBuffers ? makeBuffers(rank) : nullptr;
    ncclComm_t comm = nullptr;
    TUTTI_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
    for (size_t i = 0; i < cases.size(); i++) {
      const Case& c = cases[i];
      if (rank == 0) {
        static const char* names[] = {"allreduce", "allgather", "reducescatter", "broadcast", "reduce",
                                      "alltoall",  "gather",    "scatter",       "send"};
        char name[64] = "";
        int channels = 0;
        if (tuttiCommAlgorithm(comm, names[int(c.coll)], c.count, c.type, name, sizeof name, &channels) == ncclSuccess)
          run.algorithms[i] = std::string(name) + "/" + std::to_string(channels);
      }
      try {
        runCase(c, rank, nranks, comm, buffers.get(), &run.outputs[size_t(rank)][i]);
      } catch (const RankFailure& e) {
        std::lock_guard<std::mutex> lock(mutex);
        run.wrong++;
        if (run.firstFailure.empty()) run.firstFailure = backend + ": " + e.what();
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(comm, &state) != ncclSuccess || state != ncclSuccess) {
          buffers.reset();
          ncclCommAbort(comm);
          throw;  // the communicator is unusable: this rank stops
        }
      }
    }
    buffers.reset();
    TUTTI_NCCL_CHECK(ncclCommDestroy(comm));
  });
  if (!failures.empty()) {
    run.wrong++;
    if (run.firstFailure.empty()) run.firstFailure = backend + ": " + failures;
  }
  return run;
}

BitwiseComparison compareBitwise(const std::vector<Case>& cases, int nranks, const BackendRun& a, const BackendRun& b) {
  BitwiseComparison result;
  for (size_t i = 0; i < cases.size(); i++) {
    if (a.algorithms[i].empty() || a.algorithms[i] != b.algorithms[i]) continue;
    result.compared++;
    for (int r = 0; r < nranks; r++)
      if (a.outputs[size_t(r)][i] != b.outputs[size_t(r)][i]) {
        result.differ++;
        if (result.firstDifference.empty())
          result.firstDifference = describe(cases[i], r, nranks) + " (" + a.algorithms[i] + ")";
        break;
      }
  }
  return result;
}

}  // namespace tutti_test
