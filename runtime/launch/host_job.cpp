// A communicator's job on a stream without a launch (host_job.h).
#include "runtime/launch/host_job.h"

#include <utility>

#include "base/error.h"
#include "kernels/backend.h"
#include "runtime/comm/comm.h"
#include "runtime/diagnostics/flight_recorder.h"

namespace tutti {

void queueCommJob(ncclComm* comm, cudaStream_t stream, std::function<void()> job, std::optional<uint64_t> flightSeq) {
  const bool queued = stream != nullptr;
  struct Running {
    ncclComm* comm;
    bool queued;
    ~Running() {
      if (queued)
        comm->executor.pendingStreamJobs--;
      else
        comm->executor.activeLaunches--;
    }
  };
  auto run = [comm, queued, flightSeq, job = std::move(job)] {
    Running running{comm, queued};
    FlightRecorder* recorder = flightSeq ? comm->executor.flight.get() : nullptr;
    if (recorder) recorder->running(*flightSeq, FlightRecorder::now());
    try {
      job();
    } catch (const Error& e) {
      if (recorder) recorder->failed(*flightSeq, FlightRecorder::now());
      comm->fail(e);
      throw;
    }
    if (recorder) recorder->done(*flightSeq, FlightRecorder::now());
  };
  if (queued)
    comm->executor.pendingStreamJobs++;
  else
    comm->executor.activeLaunches++;
  try {
    comm->executor.backend->enqueueHostJob(stream, std::move(run));
  } catch (...) {
    // A queued job that was refused (a driver error) never runs, so its count ends here; a job
    // that ran now and threw ended its count itself.
    if (queued) comm->executor.pendingStreamJobs--;
    throw;
  }
}

}  // namespace tutti
