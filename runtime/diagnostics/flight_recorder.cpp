// The flight recorder's ring (flight_recorder.h).
#include "runtime/diagnostics/flight_recorder.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace tutti {

// Every field an atomic, read and written relaxed (plain moves on x86 and ARM), so that a snapshot
// taken while the executor runs is a race the language allows; the stamp orders them.
struct FlightRecorder::Slot {
  std::atomic<uint64_t> stamp{0};  // (seq + 1) << 3 | state; 0 while the writer fills the slot
  std::atomic<uint64_t> signature{0}, count{0}, stream{0};
  std::atomic<uint64_t> small{0};  // coll, dtype, nchannels (16 bits), redop (32 bits)
  std::atomic<int64_t> root{-1};
  std::atomic<uint64_t> algorithm[FlightEntry::kAlgorithmChars / 8] = {};
  std::atomic<int64_t> queuedNs{0}, startedNs{0}, endedNs{0};
};

namespace {

constexpr uint64_t stampOf(uint64_t seq, FlightState state) { return (seq + 1) << 3 | uint64_t(state); }
constexpr uint64_t seqOf(uint64_t stamp) { return (stamp >> 3) - 1; }
constexpr FlightState stateOf(uint64_t stamp) { return FlightState(stamp & 7); }

}  // namespace

const char* flightStateName(FlightState state) {
  switch (state) {
    case FlightState::Empty: return "empty";
    case FlightState::Queued: return "queued";
    case FlightState::Running: return "running";
    case FlightState::Done: return "done";
    case FlightState::Failed: return "failed";
  }
  return "unknown";
}

FlightRecorder::FlightRecorder(size_t entries)
    : capacity_(entries), slots_(entries > 0 ? new Slot[entries] : nullptr) {}

FlightRecorder::~FlightRecorder() {
  signalAttachment.reset();  // no dump reads the slots once they go
}

int64_t FlightRecorder::now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

FlightRecorder::Slot* FlightRecorder::slotOf(uint64_t seq) const { return &slots_[seq % capacity_]; }

void FlightRecorder::queued(const FlightCall& call, int64_t nowNs) {
  if (capacity_ == 0) return;
  Slot& s = *slotOf(call.seq);
  constexpr auto relaxed = std::memory_order_relaxed;
  s.stamp.store(0, relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // a reader that sees a field below sees the 0
  s.signature.store(call.signature, relaxed);
  s.count.store(call.count, relaxed);
  s.stream.store(uint64_t(reinterpret_cast<uintptr_t>(call.stream)), relaxed);
  s.small.store(uint64_t(call.coll) | uint64_t(call.dtype) << 8 | uint64_t(call.nchannels) << 16 |
                    uint64_t(uint32_t(call.redop)) << 32,
                relaxed);
  s.root.store(call.root, relaxed);
  // The name in whole words, NUL-padded: no byte of an older, longer name survives.
  uint64_t words[FlightEntry::kAlgorithmChars / 8] = {};
  const char* name = call.algorithm ? call.algorithm : "";
  std::memcpy(words, name, std::min(std::strlen(name), FlightEntry::kAlgorithmChars - 1));
  for (size_t i = 0; i < std::size(words); i++) s.algorithm[i].store(words[i], relaxed);
  s.queuedNs.store(nowNs, relaxed);
  s.startedNs.store(0, relaxed);
  s.endedNs.store(0, relaxed);
  s.stamp.store(stampOf(call.seq, FlightState::Queued), std::memory_order_release);
}

void FlightRecorder::running(uint64_t seq, int64_t nowNs) {
  if (capacity_ == 0) return;
  Slot& s = *slotOf(seq);
  uint64_t expected = stampOf(seq, FlightState::Queued);
  if (s.stamp.load(std::memory_order_relaxed) != expected) return;  // another operation's slot, or already on
  s.startedNs.store(nowNs, std::memory_order_relaxed);
  s.stamp.compare_exchange_strong(expected, stampOf(seq, FlightState::Running), std::memory_order_release,
                                  std::memory_order_relaxed);
}

void FlightRecorder::end(uint64_t seq, FlightState to, int64_t nowNs) {
  if (capacity_ == 0) return;
  Slot& s = *slotOf(seq);
  uint64_t stamp = s.stamp.load(std::memory_order_relaxed);
  for (;;) {
    if (stamp == 0 || seqOf(stamp) != seq) return;
    const FlightState state = stateOf(stamp);
    if (state != FlightState::Queued && state != FlightState::Running) return;  // ended already
    s.endedNs.store(nowNs, std::memory_order_relaxed);
    if (s.stamp.compare_exchange_weak(stamp, stampOf(seq, to), std::memory_order_release, std::memory_order_relaxed))
      return;
  }
}

void FlightRecorder::done(uint64_t seq, int64_t nowNs) { end(seq, FlightState::Done, nowNs); }
void FlightRecorder::failed(uint64_t seq, int64_t nowNs) { end(seq, FlightState::Failed, nowNs); }

std::vector<FlightEntry> FlightRecorder::snapshot() const {
  std::vector<FlightEntry> entries;
  entries.reserve(capacity_);
  constexpr auto relaxed = std::memory_order_relaxed;
  for (size_t i = 0; i < capacity_; i++) {
    const Slot& s = slots_[i];
    const uint64_t before = s.stamp.load(std::memory_order_acquire);
    if (before == 0) continue;
    FlightEntry e;
    e.seq = seqOf(before);
    e.state = stateOf(before);
    e.signature = s.signature.load(relaxed);
    e.count = s.count.load(relaxed);
    e.stream = s.stream.load(relaxed);
    const uint64_t small = s.small.load(relaxed);
    e.coll = uint8_t(small);
    e.dtype = uint8_t(small >> 8);
    e.nchannels = uint16_t(small >> 16);
    e.redop = int32_t(uint32_t(small >> 32));
    e.root = int32_t(s.root.load(relaxed));
    uint64_t words[FlightEntry::kAlgorithmChars / 8];
    for (size_t w = 0; w < std::size(words); w++) words[w] = s.algorithm[w].load(relaxed);
    std::memcpy(e.algorithm, words, sizeof e.algorithm);
    e.algorithm[sizeof e.algorithm - 1] = '\0';
    e.queuedNs = s.queuedNs.load(relaxed);
    e.startedNs = s.startedNs.load(relaxed);
    e.endedNs = s.endedNs.load(relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t after = s.stamp.load(relaxed);
    if (after == 0 || seqOf(after) != e.seq) continue;  // rewritten meanwhile: a newer operation's now
    // A later state is as good (its time may be missing, as when read between the two stores).
    if (after != before) e.state = stateOf(after);
    if (e.state == FlightState::Queued) e.startedNs = 0;
    if (e.state == FlightState::Queued || e.state == FlightState::Running) e.endedNs = 0;
    if (e.startedNs != 0 && e.startedNs < e.queuedNs) e.startedNs = 0;
    if (e.endedNs != 0 && e.endedNs < std::max(e.queuedNs, e.startedNs)) e.endedNs = 0;
    entries.push_back(e);
  }
  std::sort(entries.begin(), entries.end(), [](const FlightEntry& a, const FlightEntry& b) { return a.seq < b.seq; });
  return entries;
}

}  // namespace tutti
