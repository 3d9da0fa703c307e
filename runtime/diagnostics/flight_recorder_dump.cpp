// The communicator's flight recorder: made at init, fed by launch, dumped as JSON
// (flight_recorder_dump.h).
#include "runtime/diagnostics/flight_recorder_dump.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>

#include "base/host_identity.h"
#include "base/log.h"
#include "base/tunables.h"
#include "kernels/backend.h"
#include "kernels/dtypes.h"
#include "kernels/exec_fault.h"
#include "kernels/host_reduce.h"
#include "runtime/diagnostics/flight_recorder_signal.h"

namespace tutti {

namespace {

uint64_t hashBytes(const void* data, size_t bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  for (size_t i = 0; i < bytes; i++) h = (h ^ static_cast<const unsigned char*>(data)[i]) * 0x100000001b3ull;
  return h;
}

std::string hex(uint64_t v) {
  char s[24];
  std::snprintf(s, sizeof s, "0x%" PRIx64, v);
  return s;
}

// A JSON string literal.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char u[8];
          std::snprintf(u, sizeof u, "\\u%04x", c);
          out += u;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

const char* redOpName(int32_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
  }
  return "premulsum";  // ncclRedOpCreatePreMulSum's
}

const char* waitForName(kern::WaitFor what) {
  switch (what) {
    case kern::WaitFor::Data: return "data";
    case kern::WaitFor::Space: return "space";
    case kern::WaitFor::MailboxInput: return "mailbox input";
    case kern::WaitFor::DirectRead: return "direct read";
    case kern::WaitFor::Nothing: break;
  }
  return "nothing";
}

bool isP2p(uint8_t coll) { return plan::Coll(coll) == plan::Coll::Send || plan::Coll(coll) == plan::Coll::Recv; }

// A one-sided operation (runtime/launch/rma.h): no collective number, signature or algorithm; the
// signal's context and index instead (a wait's first descriptor's).
std::string oneSidedJson(const FlightEntry& e) {
  const char* op = e.coll == kFlightPutSignal ? "PutSignal" : e.coll == kFlightSignal ? "Signal" : "WaitSignal";
  std::string s = "{\"seq\": " + std::to_string(e.seq) + ", \"collective\": null, \"op\": " + quoted(op);
  std::string call = std::string("nccl") + op;
  const int ctx = oneSidedCtx(e.signature), sigIdx = oneSidedSigIdx(e.signature);
  const std::string slot = " (ctx " + std::to_string(ctx) + ", sigIdx " + std::to_string(sigIdx) + ")";
  if (e.coll == kFlightPutSignal) {
    const size_t bytes = e.count * kern::dtypeSize(ncclDataType_t(e.dtype));
    call += " of " + std::to_string(bytes) + " bytes to rank " + std::to_string(e.root) + slot;
    s += ", \"call\": " + quoted(call) + ", \"count\": " + std::to_string(e.count) +
         ", \"type\": " + quoted(kern::dtypeName(ncclDataType_t(e.dtype))) + ", \"bytes\": " + std::to_string(bytes);
  } else if (e.coll == kFlightSignal) {
    s += ", \"call\": " + quoted(call + " to rank " + std::to_string(e.root) + slot);
  } else {
    s += ", \"call\": " +
         quoted(call + " for " + std::to_string(e.count) + " peers, the first rank " + std::to_string(e.root) + slot) +
         ", \"descriptors\": " + std::to_string(e.count);
  }
  s += ", \"peer\": " + std::to_string(e.root) + ", \"ctx\": " + std::to_string(ctx) +
       ", \"sig_idx\": " + std::to_string(sigIdx);
  s += ", \"stream\": " + quoted(hex(e.stream)) + ", \"state\": " + quoted(flightStateName(e.state));
  s += ", \"queued_ns\": " + std::to_string(e.queuedNs) + ", \"started_ns\": " + std::to_string(e.startedNs) +
       ", \"ended_ns\": " + std::to_string(e.endedNs) + "}";
  return s;
}

std::string entryJson(const FlightEntry& e) {
  if (isFlightOneSided(e.coll)) return oneSidedJson(e);
  const plan::Coll coll = plan::Coll(e.coll);
  const size_t eltSize = kern::dtypeSize(ncclDataType_t(e.dtype));
  std::string s = "{\"seq\": " + std::to_string(e.seq);
  // The collectives' own numbering, which every rank shares (point-to-point calls have none).
  s += ", \"collective\": " + (isP2p(e.coll) ? std::string("null") : std::to_string(kern::signatureSeq(e.signature)));
  // A block of ncclAllToAllv is a send and a receive; the entry names the call the user made.
  const bool allToAllv = isP2p(e.coll) && kern::signatureRoot(e.signature) == kern::kPartOfAllToAllv;
  s += ", \"op\": " + quoted(allToAllv ? "AllToAllv" : plan::collTitle(coll));
  if (allToAllv) s += std::string(", \"part\": ") + (coll == plan::Coll::Send ? "\"send\"" : "\"receive\"");
  // The words a call mismatch's error uses for it (send and receive count bytes there).
  s += ", \"call\": " + quoted(kern::describeCall(e.signature, isP2p(e.coll) ? e.count * eltSize : e.count));
  s += ", \"signature\": " + quoted(hex(e.signature));
  s += ", \"count\": " + std::to_string(e.count) + ", \"type\": " + quoted(kern::dtypeName(ncclDataType_t(e.dtype)));
  s += ", \"bytes\": " + std::to_string(e.count * eltSize);
  if (reduces(coll)) s += ", \"redop\": " + quoted(redOpName(e.redop));
  if (isP2p(e.coll))
    s += ", \"peer\": " + std::to_string(e.root);
  else if (plan::rootedColl(coll))
    s += ", \"root\": " + std::to_string(e.root);
  s += ", \"algorithm\": " + quoted(e.algorithm) + ", \"channels\": " + std::to_string(e.nchannels);
  s += ", \"stream\": " + quoted(hex(e.stream)) + ", \"state\": " + quoted(flightStateName(e.state));
  s += ", \"queued_ns\": " + std::to_string(e.queuedNs) + ", \"started_ns\": " + std::to_string(e.startedNs) +
       ", \"ended_ns\": " + std::to_string(e.endedNs) + "}";
  return s;
}

std::string waitJson(ncclComm* comm, int worker, const kern::WaitRecord& r, bool now, const char* source,
                     int64_t nowNs) {
  std::string s = "{\"worker\": " + std::to_string(worker) + ", \"source\": " + quoted(source) +
                  ", \"now\": " + (now ? "true" : "false");
  s += ", \"op_seq\": " + std::to_string(r.opSeq) + ", \"op\": " + quoted(r.opName ? r.opName : "");
  s += ", \"waiting_for\": " + quoted(waitForName(r.what)) + ", \"peer\": " + std::to_string(r.peer);
  if (r.what != kern::WaitFor::MailboxInput)
    s += ", \"channel\": " + std::to_string(r.channel) + ", \"step\": " + quoted(plan::opName(r.step)) +
         ", \"tile\": " + std::to_string(r.tile) + ", \"ntiles\": " + std::to_string(r.ntiles);
  if (r.sinceNs != 0) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3f", double(nowNs - r.sinceNs) / 1e9);
    s += std::string(", \"seconds\": ") + seconds;
  }
  s += ", \"text\": " + quoted(kern::describeWaitingOp(r) + (now ? " waits for " : " last waited for ") +
                               kern::describeWaitedFor(r, comm->describePeer(r.peer)));
  return s + "}";
}

}  // namespace

std::unique_ptr<FlightRecorder> makeFlightRecorder(ncclComm* comm, const ncclUniqueId* ids, int nIds) {
  const int64_t entries = tunables::kFlightRecorderEntries.get();
  if (entries < 0)
    throw Error(ErrorCode::InvalidUsage,
                "TUTTI_FLIGHT_RECORDER_ENTRIES=" + std::to_string(entries) + ": must be 0 or more");
  const std::string signal = tunables::kFlightRecorderSignal.get();
  const int signo = signal.empty() ? 0 : parseFlightSignal(signal);
  auto recorder = std::make_unique<FlightRecorder>(size_t(entries));
  recorder->commHash = hashBytes(ids, sizeof(ncclUniqueId) * size_t(nIds));
  if (signo != 0)
    recorder->signalAttachment = watchFlightSignal(signo, [comm] {
      const std::string dir = tunables::kFlightRecorder.get();
      const std::string file = writeFlightRecord(comm, dir.empty() ? "." : dir, "signal");
      TUTTI_WARN("%s: flight record written to %s (signal)", comm->where().c_str(), file.c_str());
    });
  return recorder;
}

void recordFlightQueued(ncclComm* comm, const kern::OpWork& op, const Task& t, const char* algorithm, int nchannels) {
  FlightRecorder* recorder = comm->executor.flight.get();
  if (!recorder) return;
  FlightCall call;
  call.seq = op.seq;
  call.signature = op.signature;
  call.count = t.count;
  call.coll = uint8_t(t.coll);
  call.dtype = uint8_t(t.type);
  call.nchannels = uint16_t(nchannels);
  call.redop = int32_t(t.op);
  call.root = t.root;
  call.algorithm = algorithm;
  call.stream = t.stream;
  recorder->queued(call, FlightRecorder::now());
}

void recordFlightRunning(ncclComm* comm, const kern::LaunchWork& work) {
  FlightRecorder* recorder = comm->executor.flight.get();
  if (!recorder) return;
  const int64_t now = FlightRecorder::now();
  for (uint32_t i = 0; i < work.nops; i++) recorder->running(work.ops()[i].seq, now);
}

void recordFlightEnded(ncclComm* comm, const kern::LaunchWork& work) {
  FlightRecorder* recorder = comm->executor.flight.get();
  if (!recorder) return;
  const int64_t now = FlightRecorder::now();
  for (uint32_t i = 0; i < work.nops; i++) recorder->done(work.ops()[i].seq, now);
}

void recordFlightFailed(ncclComm* comm, const kern::LaunchWork& work) {
  FlightRecorder* recorder = comm->executor.flight.get();
  if (!recorder) return;
  const int64_t now = FlightRecorder::now();
  for (uint32_t i = 0; i < work.nops; i++) recorder->failed(work.ops()[i].seq, now);
}

FlightScope::FlightScope(ncclComm* comm, uint64_t seq)
    : recorder_(comm->executor.flight.get()), seq_(seq), exceptions_(std::uncaught_exceptions()) {
  if (recorder_) recorder_->running(seq_, FlightRecorder::now());
}

FlightScope::~FlightScope() {
  if (!recorder_) return;
  if (std::uncaught_exceptions() > exceptions_)
    recorder_->failed(seq_, FlightRecorder::now());
  else
    recorder_->done(seq_, FlightRecorder::now());
}

std::string flightRecordFileName(const ncclComm* comm) {
  const FlightRecorder* recorder = comm->executor.flight.get();
  char hash[20];
  std::snprintf(hash, sizeof hash, "%016" PRIx64, recorder ? recorder->commHash : 0);
  return "tutti-flight-" + hostname() + "-" + std::to_string(getpid()) + "-comm" + hash + "-rank" +
         std::to_string(comm->identity.rank) + ".json";
}

std::string flightRecordJson(ncclComm* comm, const char* reason) {
  const FlightRecorder* recorder = comm->executor.flight.get();
  const int64_t nowNs = FlightRecorder::now();
  const int64_t unixUs =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::vector<FlightEntry> entries = recorder ? recorder->snapshot() : std::vector<FlightEntry>{};

  std::string s = "{\n  \"format\": \"tutti-flight-record\", \"version\": 1";
  s += ", \"reason\": " + quoted(reason);
  s += ",\n  \"rank\": " + std::to_string(comm->identity.rank) +
       ", \"nranks\": " + std::to_string(comm->identity.nranks);
  s += ", \"host\": " + quoted(hostname()) + ", \"pid\": " + std::to_string(getpid());
  s += ", \"comm\": " + quoted(hex(recorder ? recorder->commHash : 0)) +
       ", \"comm_name\": " + quoted(comm->identity.config.commName);
  s += ", \"device_backend\": " + quoted(comm->identity.backendName);
  // The two clocks at the dump: the entries' steady_clock times map to wall time through them.
  s += ",\n  \"steady_ns\": " + std::to_string(nowNs) + ", \"unix_us\": " + std::to_string(unixUs);
  s += ", \"entries_capacity\": " + std::to_string(recorder ? recorder->capacity() : 0);
  {
    std::lock_guard<std::mutex> lock(comm->error.mutex);
    const bool failed = comm->error.asyncError.load() != ncclSuccess;
    s += ",\n  \"error\": " + (failed ? quoted(comm->error.message) : std::string("null"));
  }

  // What each worker waits for: its wait record now, or the last one of an operation that has not
  // ended well (a worker that timed out has cleared its record), and a kernel's fault record.
  std::map<uint64_t, FlightState> stateOf;
  for (const FlightEntry& e : entries) stateOf[e.seq] = e.state;
  std::vector<std::string> waits;
  for (size_t w = 0; w < comm->executor.waits.size(); w++) {
    const kern::WaitRecord now = comm->executor.waits[w].read();
    if (now.what != kern::WaitFor::Nothing) {
      waits.push_back(waitJson(comm, int(w), now, true, "wait record", nowNs));
      continue;
    }
    const kern::WaitRecord last = comm->executor.waits[w].readLast();
    auto state = stateOf.find(last.opSeq);
    if (last.what != kern::WaitFor::Nothing && state != stateOf.end() && state->second != FlightState::Done)
      waits.push_back(waitJson(comm, int(w), last, false, "wait record", nowNs));
  }
  if (kern::ExecutorBackend* backend = comm->executor.abortable.load()) {
    const kern::ExecFault f = backend->fault();
    if ((f.fault == uint32_t(kern::Fault::Timeout) || f.fault == uint32_t(kern::Fault::Aborted)) && f.peer >= 0)
      waits.push_back(waitJson(comm, -1, kern::waitRecordOf(f), false, "fault record", nowNs));
  }
  s += ",\n  \"waits\": [";
  for (size_t i = 0; i < waits.size(); i++) s += (i ? ",\n    " : "\n    ") + waits[i];
  s += waits.empty() ? "]" : "\n  ]";

  s += ",\n  \"entries\": [";
  for (size_t i = 0; i < entries.size(); i++) s += (i ? ",\n    " : "\n    ") + entryJson(entries[i]);
  s += entries.empty() ? "]" : "\n  ]";
  return s + "\n}\n";
}

std::string writeFlightRecord(ncclComm* comm, const std::string& path, const char* reason) {
  struct stat st {};
  const bool directory = stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  const std::string file = directory ? path + "/" + flightRecordFileName(comm) : path;
  const std::string text = flightRecordJson(comm, reason);
  // Written aside and renamed, so that a reader never sees half a dump.
  const std::string partial = file + ".partial." + std::to_string(getpid()) + "." + std::to_string(gettid());
  FILE* f = std::fopen(partial.c_str(), "w");
  if (!f)
    throw Error(ErrorCode::System,
                comm->where() + ": flight record: cannot write " + partial + ": " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(partial.c_str(), file.c_str()) != 0) {
    const int err = errno;
    std::remove(partial.c_str());
    throw Error(ErrorCode::System, comm->where() + ": flight record: cannot write " + file + ": " + std::strerror(err));
  }
  return file;
}

void dumpFlightRecordOnFailure(ncclComm* comm, const Error& cause) {
  try {
    const std::string dir = tunables::kFlightRecorder.get();
    if (dir.empty()) return;
    const bool aborted = cause.code() == ErrorCode::Aborted;
    // An abort of an idle communicator is how many programs end one; an abort mid-operation is a
    // watchdog's, after a hang: that record is the one wanted.
    if (aborted && comm->executor.activeLaunches.load() == 0 && comm->executor.pendingStreamJobs.load() == 0) return;
    const char* reason = aborted ? "abort" : cause.code() == ErrorCode::Timeout ? "timeout" : "failure";
    const std::string file = writeFlightRecord(comm, dir, reason);
    TUTTI_WARN("%s: flight record written to %s", comm->where().c_str(), file.c_str());
  } catch (const std::exception& e) {
    TUTTI_WARN("%s: the flight record could not be written: %s", comm->where().c_str(), e.what());
  }
}

}  // namespace tutti
