// A communicator's flight recorder: its last N operations (call, algorithm, channels, state,
// timestamps) in a fixed ring of plain entries, written without allocation or lock.
//
// One writer records an operation when it is queued: the thread that launches the communicator's
// calls (NCCL's rule: one thread at a time per communicator). The executor moves it on (running,
// done, failed) from its own threads. Any thread may take a snapshot, at any time: a dump on a
// failure, on request or on a signal (runtime/diagnostics/flight_recorder_dump.h).
//
// An entry's slot is its operation's number modulo N, and the slot's stamp (number and state in
// one word) is what every transition compares: a transition of an operation whose slot has since
// been reused by a newer one changes nothing. The writer fills a slot as a sequence lock (stamp
// zero, the fields, then the stamp), so a snapshot skips an entry caught half written. The one
// race left is an operation still queued after N newer ones were recorded (a stream queued N
// deep): its start or end time may land in the newer entry, which a snapshot then shows with
// times out of order (it drops such times).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tutti {

enum class FlightState : uint8_t { Empty, Queued, Running, Done, Failed };

// "queued", "running", "done", "failed" ("empty" for Empty).
const char* flightStateName(FlightState state);

// One-sided operations in FlightCall::coll, past plan::Coll's values (their peer in root; count:
// elements for a put, descriptors for a wait, whose root is its first descriptor's peer). They have
// no call signature: theirs holds the signal's slot, oneSidedSlot(ctx, sigIdx) (a wait's first
// descriptor's).
constexpr uint8_t kFlightPutSignal = 0x80;
constexpr uint8_t kFlightSignal = 0x81;
constexpr uint8_t kFlightWaitSignal = 0x82;
inline bool isFlightOneSided(uint8_t coll) { return coll >= kFlightPutSignal && coll <= kFlightWaitSignal; }
inline uint64_t oneSidedSlot(int ctx, int sigIdx) { return uint64_t(uint32_t(ctx)) << 32 | uint32_t(sigIdx); }
inline int oneSidedCtx(uint64_t slot) { return int(int32_t(uint32_t(slot >> 32))); }
inline int oneSidedSigIdx(uint64_t slot) { return int(int32_t(uint32_t(slot))); }

// What the launching thread knows of an operation when it is queued.
struct FlightCall {
  uint64_t seq = 0;        // the operation's number on its communicator (kern::OpWork::seq)
  uint64_t signature = 0;  // kern::callSignature: what the peers' calls must agree on
  uint64_t count = 0;      // elements, as the call named them
  uint8_t coll = 0;        // plan::Coll
  uint8_t dtype = 0;       // ncclDataType_t
  uint16_t nchannels = 0;
  int32_t redop = 0;           // ncclRedOp_t as the call named it
  int32_t root = -1;           // the root, or the peer of a send or receive; -1: none
  const char* algorithm = "";  // copied (up to kAlgorithmChars - 1 characters)
  const void* stream = nullptr;
};

// An entry as a snapshot reads it.
struct FlightEntry {
  static constexpr size_t kAlgorithmChars = 24;
  uint64_t seq = 0, signature = 0, count = 0;
  uint8_t coll = 0, dtype = 0;
  uint16_t nchannels = 0;
  int32_t redop = 0, root = -1;
  char algorithm[kAlgorithmChars] = {};
  uint64_t stream = 0;
  FlightState state = FlightState::Empty;
  // steady_clock nanoseconds; 0: not yet (or dropped as out of order).
  int64_t queuedNs = 0, startedNs = 0, endedNs = 0;
};

class FlightRecorder {
 public:
  // A ring of `entries` slots (0: records nothing), allocated now.
  explicit FlightRecorder(size_t entries);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;
  ~FlightRecorder();

  size_t capacity() const { return capacity_; }

  // The launching thread: the operation is queued (replaces the entry N operations older).
  void queued(const FlightCall& call, int64_t nowNs);
  // The executor: the operation started, ended, or failed. Each moves an entry only forward
  // (queued -> running -> done or failed), and only while the slot still holds operation seq.
  void running(uint64_t seq, int64_t nowNs);
  void done(uint64_t seq, int64_t nowNs);
  void failed(uint64_t seq, int64_t nowNs);

  // The entries recorded and not yet replaced, oldest first. Any thread, any time.
  std::vector<FlightEntry> snapshot() const;

  // steady_clock now, in nanoseconds: the recorder's timestamps.
  static int64_t now();

  // What every rank's dump names the communicator by: a hash of the unique ids it was made from.
  uint64_t commHash = 0;
  // Keeps this communicator on the signal watcher's list (runtime/diagnostics/flight_recorder_signal.h) while
  // it lives; released first when the recorder goes.
  std::shared_ptr<void> signalAttachment;

 private:
  struct Slot;
  void end(uint64_t seq, FlightState to, int64_t nowNs);
  Slot* slotOf(uint64_t seq) const;

  size_t capacity_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace tutti
