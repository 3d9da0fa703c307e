// A communicator's flight recorder as the rest of the runtime uses it: made at init from
// TUTTI_FLIGHT_RECORDER_ENTRIES and TUTTI_FLIGHT_RECORDER_SIGNAL, fed one call per transition by
// launch and the mailbox path, and dumped as JSON (one file per rank) on a failure or timeout
// (TUTTI_FLIGHT_RECORDER=DIR), on tuttiCommDump, and on the chosen signal. docs/failures.md
// describes the file; tools/tutti-trace reads the ranks' files together.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/work.h"
#include "runtime/comm/comm.h"
#include "runtime/diagnostics/flight_recorder.h"
#include "runtime/launch/task.h"

namespace tutti {

// The recorder of a communicator being made (nullptr with TUTTI_FLIGHT_RECORDER_ENTRIES=0 and no
// signal). ids: the unique ids it was made from, whose hash every rank's dump carries. Throws
// Error (InvalidUsage) for a signal that cannot be used.
std::unique_ptr<FlightRecorder> makeFlightRecorder(ncclComm* comm, const ncclUniqueId* ids, int nIds);

// The transitions. Cheap when the communicator records nothing (a null pointer).
void recordFlightQueued(ncclComm* comm, const kern::OpWork& op, const Task& t, const char* algorithm, int nchannels);
inline void recordFlightQueued(ncclComm* comm, uint64_t seq, uint64_t signature, const Task& t, const char* algorithm,
                               int nchannels) {
  if (!comm->executor.flight) return;
  kern::OpWork op{};
  op.seq = seq;
  op.signature = signature;
  recordFlightQueued(comm, op, t, algorithm, nchannels);
}
// Every operation of a launch: running (before its run), then done unless it failed (after), or
// failed.
void recordFlightRunning(ncclComm* comm, const kern::LaunchWork& work);
void recordFlightEnded(ncclComm* comm, const kern::LaunchWork& work);
void recordFlightFailed(ncclComm* comm, const kern::LaunchWork& work);

// One operation that runs by itself (the mailboxes): running for the scope's length, then done,
// or failed when the scope ends by an exception.
class FlightScope {
 public:
  FlightScope(ncclComm* comm, uint64_t seq);
  ~FlightScope();
  FlightScope(const FlightScope&) = delete;
  FlightScope& operator=(const FlightScope&) = delete;

 private:
  FlightRecorder* recorder_;
  uint64_t seq_;
  int exceptions_;
};

// The dump: one JSON object (docs/failures.md, "The flight recorder"). reason: "request",
// "failure", "timeout", "abort" or "signal". Any thread, while the communicator lives.
std::string flightRecordJson(ncclComm* comm, const char* reason);
// "tutti-flight-<host>-<pid>-comm<hash>-rank<r>.json": the file a rank's dump goes to in a directory.
std::string flightRecordFileName(const ncclComm* comm);
// Writes the dump to path: a directory (the file flightRecordFileName names in it) or a file.
// Returns the file written; throws Error (System) naming it when it cannot be written.
std::string writeFlightRecord(ncclComm* comm, const std::string& path, const char* reason);

// The communicator's first error was recorded (ncclComm::fail): writes the dump to
// TUTTI_FLIGHT_RECORDER when it is set, unless this is an abort with nothing in flight. Never throws.
void dumpFlightRecordOnFailure(ncclComm* comm, const Error& cause);

}  // namespace tutti
