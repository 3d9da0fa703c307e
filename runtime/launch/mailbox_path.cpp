// The mailbox path (mailbox_path.h).
#include "runtime/launch/mailbox_path.h"

#include "base/log.h"
#include "kernels/dtypes.h"
#include "kernels/host_reduce.h"
#include "kernels/host_stream.h"
#include "kernels/mailbox.h"
#include "runtime/diagnostics/flight_recorder_dump.h"
#include "runtime/launch/comm_launch.h"
#include "runtime/launch/launch_cache.h"
#include "runtime/launch/redop.h"

namespace tutti {

namespace {

// Whether the selector sends this call through the mailboxes (remembered per size).
bool mailboxChosen(ncclComm* comm, const Task& t) {
  const size_t bytes = t.count * kern::dtypeSize(t.type);
  if (t.coll != plan::Coll::AllReduce || !comm->control.mailboxesMapped || bytes > kern::kMailboxBytes) return false;
  if (!comm->planning.forcedAlgorithm.empty()) return viaMailbox(comm, t, chooseAlgorithm(comm, t));
  if (comm->planning.mailboxChoiceBytes != bytes) {
    comm->planning.mailboxChoice = viaMailbox(comm, t, chooseAlgorithm(comm, t));
    comm->planning.mailboxChoiceBytes = bytes;
  }
  return comm->planning.mailboxChoice;
}

// Records a mailbox operation's failure on its communicator and throws its cause.
[[noreturn]] void failMailbox(ncclComm* comm, const Error& e) {
  comm->fail(e);
  if (e.code() == ErrorCode::Aborted) throwRecordedCause(comm);
  throw e;
}

kern::RedOp hostRedOp(ncclComm* comm, const Task& t) {
  const void* deviceScalar = nullptr;
  return resolveRedOp(comm, t.type, t.op, &deviceScalar);  // the host backend: read now
}

}  // namespace

void runMailboxAllReduce(ncclComm* comm, const Task& t, const kern::RedOp& redop, const char* name, uint64_t opSeq,
                         uint64_t signature) {
  kern::MailboxAllReduce op;
  op.seq = ++comm->executor.mailboxSeq;
  op.rank = comm->identity.rank;
  op.nranks = comm->identity.nranks;
  op.boxes = comm->control.mailboxes[op.seq % 2].data();
  op.bells = comm->control.mailboxBells.data();
  op.in = t.in;
  op.out = t.out;
  op.count = t.count;
  op.type = t.type;
  op.redop = redop;
  op.name = name;
  op.opSeq = opSeq;
  op.signature = signature;
  FlightScope flight(comm, opSeq);
  kern::runMailboxAllReduce(op, contextFor(comm, 0));
}

bool mailboxNow(ncclComm* comm, const Task& t) {
  if (!mailboxChosen(comm, t)) return false;
  const uint64_t opSeq = comm->executor.opSeq++;
  TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d: oneshot through the mailboxes", comm->where().c_str(),
              plan::collTitle(t.coll), (unsigned long long)opSeq, t.count, kern::dtypeName(t.type), int(t.op));
  try {
    const kern::RedOp redop = hostRedOp(comm, t);
    const uint64_t signature = nextCallSignature(comm, t, redop.kind);
    recordFlightQueued(comm, opSeq, signature, t, "oneshot", 1);
    runMailboxAllReduce(comm, t, redop, plan::collTitle(t.coll), opSeq, signature);
  } catch (const Error& e) {
    failMailbox(comm, e);
  }
  return true;
}

bool queueMailbox(ncclComm* comm, const Task& t) {
  if (!mailboxChosen(comm, t)) return false;
  LaunchCache& cache = launchCacheOf(comm);
  LaunchCache::MailboxJob& job = cache.mailboxJobs[cache.mailboxJobsTaken % LaunchCache::kMailboxSlots];
  if (job.busy.load(std::memory_order_acquire)) return false;
  job.task = t;
  job.redop = hostRedOp(comm, t);
  job.opSeq = comm->executor.opSeq++;
  job.signature = nextCallSignature(comm, t, job.redop.kind);
  recordFlightQueued(comm, job.opSeq, job.signature, t, "oneshot", 1);
  job.busy.store(true, std::memory_order_relaxed);
  cache.mailboxJobsTaken++;
  TUTTI_TRACE(log::Coll, "%s: %s #%llu count %zu type %s op %d: oneshot through the mailboxes, queued",
              comm->where().c_str(), plan::collTitle(t.coll), (unsigned long long)job.opSeq, t.count,
              kern::dtypeName(t.type), int(t.op));
  comm->executor.pendingStreamJobs++;
  LaunchCache::MailboxJob* slot = &job;
  kern::HostStream::fromHandle(t.stream)->enqueue([comm, slot] {
    struct Done {
      ncclComm* comm;
      LaunchCache::MailboxJob* slot;
      ~Done() {
        slot->busy.store(false, std::memory_order_release);
        comm->executor.pendingStreamJobs--;
      }
    } done{comm, slot};
    try {
      runMailboxAllReduce(comm, slot->task, slot->redop, plan::collTitle(slot->task.coll), slot->opSeq,
                          slot->signature);
    } catch (const Error& e) {
      failMailbox(comm, e);
    }
  });
  return true;
}

}  // namespace tutti
