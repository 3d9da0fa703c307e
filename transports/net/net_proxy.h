// The net proxy: one progress thread per communicator that moves the executor's FIFOs of network
// connections to and from the net backend, so the executor treats every connection alike.
//
// Send side: the executor writes a slot of the local FIFO, publishes `head` and rings the proxy's
// bell; the proxy isends the slot and, once the backend has taken it, frees it (`tail`) and rings
// the worker's bell. Receive side: the proxy posts an irecv into every free slot; when one
// completes it records the size, publishes `head` and rings the worker; the executor consumes the
// slot, frees it and rings the proxy. Flow control is TCP's (or the backend's): nothing is
// received into a slot that the executor has not freed.
//
// A worker may make these passes itself (tryProgress) while it waits for a network FIFO: small
// operations then skip the hand-off to this thread and back at every step. Passes are
// serialized by a mutex; while a worker drives (startDriving/stopDriving) this thread keeps off
// the sockets, and it takes them back before the worker sleeps, or shortly after an operation
// ends (releaseDriving).
//
// The wire: each message is tutti's 64-byte header (magic, version, the data's size, the call's
// signature and count) at the start of its slot, then the data. The receiver reads the size there
// and never relies on the size the backend reports (a plugin's test() need not write it).
//
// The wait policy, one for the whole thread. After a pass that moved nothing:
//  - spin on the bell (TUTTI_SPIN polls) for an executor's next slot;
//  - while a device launch is outstanding (holdPolling), or while connections that offer no
//    descriptors (external plugins) carry an operation's messages (a send not finished, or a
//    slot moved within the last 5 ms), yield and pass again: never sleep, since nothing would
//    wake the thread when their requests complete;
//  - otherwise sleep: on the backends' descriptors (poll) and the bell where descriptors exist,
//    on the bell alone where none do, for a slice that starts at 50 us and doubles while nothing
//    moves, up to 1 ms (a plugin's message that arrives on an idle link waits at most that).
// Workers that drive the passes themselves (below) keep the thread off meanwhile.
//
// Fault handling, in order of precedence:
//  1. A backend error (peer closed or reset, unreachable) fails the communicator through its
//     TransportContext::fail() with the peer's rank, host, pid and the OS error; the executors
//     then stop. Except on a receive from a backend without goodbyes (an external plugin,
//     NetRecvComm::peerSaysGoodbye): the ABI cannot tell a peer's orderly closeSend after its
//     last operation from a fault, and the receives the proxy keeps posted are its own read-ahead,
//     so the connection is kept as ended (an INFO line) and the communicator goes on. The messages
//     that completed before the failing receive, even in the same pass, are delivered first. An
//     operation that still waits on that peer fails by another path: a send to it fails in the
//     backend (naming the peer, as above); a receive waits for the peer's failure notice or the
//     executor's TUTTI_TIMEOUT, whose message names the peer, as after a Socket goodbye.
//  2. Every wait of the thread is a poll or a bell wait of at most 100 ms, so an abort (or
//     destroy) is seen within that time; the thread never blocks in the backend.
//  3. A silent peer is caught by the executor's own TUTTI_TIMEOUT, not here.
//  4. Destroy of a healthy communicator drains queued sends first (bounded by TUTTI_TIMEOUT), so
//     a peer still receiving our last slots gets them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/bell.h"
#include "kernels/fifo.h"
#include "transports/net/net.h"
#include "transports/transport.h"

namespace tutti::transport::net {

class NetProxy final : public TransportProxy {
 public:
  // context: the communicator's, which outlives the proxy.
  NetProxy(TransportContext& context, std::unique_ptr<net::NetBackend> backend);
  ~NetProxy() override;  // stops and joins the thread (within ~100 ms)
  NetProxy(const NetProxy&) = delete;
  NetProxy& operator=(const NetProxy&) = delete;

  net::NetBackend& backend() { return *backend_; }
  // The bell executors ring after moving a network connection's FIFO.
  kern::Bell* bell() { return &bell_; }

  // Hands a connected comm to the proxy, with a fresh local FIFO for the executor (returned).
  // workerBell: the bell of the worker that runs the connection's channel.
  // peer, channel, tag: the connection's identity (the runtime's ConnKey), for error messages.
  kern::FifoHeader* addSend(std::unique_ptr<net::NetSendComm> comm, int peer, int channel, int tag,
                            kern::Bell* workerBell);
  kern::FifoHeader* addRecv(std::unique_ptr<net::NetRecvComm> comm, int peer, int channel, int tag,
                            kern::Bell* workerBell);

  // Waits until every published send slot has left, or the deadline / an abort. Best effort;
  // once drained, the connections close gracefully when the proxy is destroyed.
  void drain(double seconds) override;

  // One progress pass over every connection on the calling thread (an executor worker waiting
  // on a network FIFO), if no other thread is making one: true if a slot moved. A worker that
  // drives the sockets itself saves the two hand-offs to and from this thread per step, which on
  // a core shared by a rank's threads cost more than the network (see net_proxy.cpp). A failure is
  // left to the proxy thread to report.
  bool tryProgress() override;
  // Whether a send FIFO holds published slots the backend has not finished (no system call).
  // False while another thread makes a pass: that one moves them.
  bool sendsWaiting() override;
  // Brackets a stretch in which a worker calls tryProgress (a wait, or a small operation's run):
  // meanwhile this thread stays off the sockets, so that it neither wakes at every arrival to
  // find the worker there first nor takes turns with it on the worker's core.
  // stopDriving hands the sockets back at once (a worker about to sleep, or an error).
  // releaseDriving, at the end of an operation after a last pass, leaves them idle when nothing
  // is left to send: the thread takes them within kReleasedGraceNs unless a worker starts
  // driving first, which in a loop of small operations it does, sparing a switch to this thread
  // and back per operation. A launch whose workers do not drive wakes the thread (wake()).
  void startDriving() override { drivers_.fetch_add(1, std::memory_order_seq_cst); }
  void stopDriving() override {
    drivers_.fetch_sub(1, std::memory_order_seq_cst);
    kern::ringBell(&handover_);
  }
  void releaseDriving() override {
    drivers_.fetch_sub(1, std::memory_order_seq_cst);
    if (sendsNeedHost_.load(std::memory_order_acquire)) kern::ringBell(&handover_);
  }
  void wake() override { kern::ringBell(&handover_); }
  void holdPolling() override {
    holds_.fetch_add(1, std::memory_order_seq_cst);
    holdsTaken_.fetch_add(1, std::memory_order_relaxed);
    kern::ringBell(&bell_);
    kern::ringBell(&handover_);
  }
  void releasePolling() override { holds_.fetch_sub(1, std::memory_order_seq_cst); }
  HoldStats holdStats() const override {
    return HoldStats{holdsTaken_.load(std::memory_order_relaxed), sleepsWhileHeld_.load(std::memory_order_relaxed)};
  }

 private:
  struct Connection;
  struct Failure;
  void run();
  bool progress(Connection& c);
  void testArrivals(Connection& c, bool* arrived);  // under progressMutex_
  bool endedByPeer(Connection& c, const Error& e);  // under progressMutex_
  // What a pass saw of the connections that offer no descriptors (plugins'): requests in flight,
  // and sends an operation waits on.
  struct Unpollable {
    bool inFlight = false;
    bool sending = false;
  };
  // Under progressMutex_.
  bool pass(bool* inFlight, Unpollable* unpollable = nullptr);
  void adoptAdded();  // under progressMutex_
  void reportFailure(const Failure& f);
  void waitForWork(uint32_t seen, bool inFlight);
  bool spinOnBell(uint32_t seen);
  kern::FifoHeader* add(std::unique_ptr<Connection> connection, int peer, int channel, int tag, kern::Bell* workerBell);
  // Whether the FIFOs of one side are device memory registered by dmabuf (net/gdr_policy.h):
  // decided at the first connection of that side, and said once in an INFO line.
  bool useGdr(bool send, kern::DeviceMemory& memory);

  TransportContext& context_;
  std::unique_ptr<net::NetBackend> backend_;
  kern::Bell bell_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Connection>> added_;  // under mutex_, adopted by the next pass
  std::atomic<bool> hasAdded_{false};
  std::optional<bool> gdr_[2];  // under mutex_: useGdr's answer for receive [0] and send [1]
  // Held by whichever thread makes a progress pass (this one, or a worker in tryProgress).
  std::mutex progressMutex_;
  std::vector<std::unique_ptr<Connection>> connections_;  // under progressMutex_
  std::unique_ptr<Failure> failure_;                      // under progressMutex_: the first, to report
  std::atomic<bool> failed_{false};
  std::atomic<int> drivers_{0};  // workers between startDriving and stopDriving
  std::atomic<int> holds_{0};    // device launches outstanding (holdPolling)
  std::atomic<uint64_t> holdsTaken_{0}, sleepsWhileHeld_{0};
  kern::Bell handover_;  // rung when one stops driving (the thread sleeps on it meanwhile)
  std::atomic<bool> stop_{false};
  bool drained_ = false;
  std::atomic<uint64_t> unsent_{0};  // published send slots the backend has not finished
  // Some of those need this host's passes to leave (see NetSendComm::completesUnattended): a
  // worker that lets the comms go hands them to this thread at once.
  std::atomic<bool> sendsNeedHost_{false};
  std::atomic<uint64_t> passes_{0};  // progress passes made, so drain() sees a fresh count
  long pollSliceNs_;                 // the thread's: the next poll's length (see waitForWork)
  // The thread's: when its last pass moved a slot (the wait policy's busy stretch).
  std::chrono::steady_clock::time_point lastMovement_{};
  std::thread thread_;
};

}  // namespace tutti::transport::net
