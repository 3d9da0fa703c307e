// Registered buffers mapped by the rank processes of a host, on device backends (zero-copy between
// processes: docs/algorithms.md, "Zero-copy on registered buffers").
//
// Ranks that are threads of one process read each other's registered buffers as they are
// (kern::kDirectShared), and the host executor reads another process's with process_vm_readv
// (kern::kDirectAcrossProcesses). A device executor can do neither: its peer's buffer must be
// mapped into its own address space first, as NCCL's IPC registration maps it. Decisions:
//   - Exported when registered. A new registration's allocation (ncclMemAlloc's shareable memory,
//     cudaMalloc's by legacy IPC handle: DeviceMemory::exportUserBuffer) is offered to every rank
//     of the host in another process, and each is asked to map it, through the bootstrap's
//     questions: the peer answers on a thread of its own bootstrap, not its caller's, so
//     registration is not collective and never waits for the peer's next call. A descriptor goes by
//     SCM_RIGHTS from this rank's descriptor server to the one process it is offered to (pids
//     checked, transports/descriptor_channel.h); a legacy handle travels in the question.
//   - The peer answers where it mapped it, or why it could not (then the buffer is copied to it, and
//     both sides log an INFO line, subsystem REG, naming rank, peer and reason). It maps each
//     allocation of a peer once (its registrations share the mapping, counted) and unmaps it when
//     the peer deregisters the last of them or the communicator goes.
//   - The sender translates. Its launches carry a table (kern::MappedBufferTable, in the executor's
//     memory) of its registered ranges per peer and where the peer maps them; a direct send on a
//     kern::kDirectMapped connection sends the address in the peer's mapping, and the receiver reads
//     it as it reads a slot. A span the peer has not mapped goes as bytes, so nothing depends on
//     both ranks having registered alike. The table is never changed in place: each change makes a
//     new one, so a launch still queued reads the one it was given; they are freed with the
//     communicator.
//   - Peers that die: a mapping keeps the memory alive, and every FIFO wait is bounded, so a
//     reader does not hang; a question to a dead peer ends at its deadline, and the buffer is copied.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/work.h"

struct ncclComm;

namespace tutti {

namespace transport {
class DescriptorServer;
}

class PeerBuffers {
 public:
  // For `comm`, whose backend, peers and bootstrap are made. active() tells whether it maps:
  // TUTTI_MAP_REGISTERED, a backend that exports user buffers, and a peer in another process of
  // this host.
  explicit PeerBuffers(ncclComm* comm);
  ~PeerBuffers();  // unmaps the peers' buffers, closes the exports, frees the tables
  PeerBuffers(const PeerBuffers&) = delete;
  PeerBuffers& operator=(const PeerBuffers&) = delete;

  bool active() const { return active_; }
  // Whether connections to `peer` carry direct messages as addresses in the receiver's mapping
  // (kern::kDirectMapped): both ends answer alike.
  bool mapsWith(int peer) const;

  // A new registration `handle` of [buffer, buffer + bytes): exported, and mapped by the host's
  // peers in other processes that can. Never throws: what fails is copied, and said.
  void publish(const void* handle, const void* buffer, size_t bytes);
  // The registration's last reference went: the peers unmap it.
  void withdraw(const void* handle);

  // The table launches carry now (in the executor's memory), or null when no peer maps anything.
  const kern::MappedBufferTable* table() const { return table_.load(std::memory_order_acquire); }

  // A question of a peer's publish or withdraw (bootstrap::Bootstrap::ask): whether `question` is one, and
  // its answer.
  static bool isQuestion(const std::string& question);
  std::string answer(int asker, const std::string& question);

 private:
  struct Published;  // one of this rank's registrations
  struct Import;     // one peer allocation mapped here
  void rebuildTable();

  ncclComm* comm_;
  bool active_ = false;
  std::string inactiveReason_;  // why not, for answers
  std::vector<int> hostPeers_;  // ranks of this host in other processes
  // Two locks, so that an answer never waits for this rank's own question to a peer (which may be
  // asking this rank at the same moment): one for what this rank publishes, one for its imports.
  std::mutex publishMutex_;
  std::mutex importMutex_;
  std::unique_ptr<transport::DescriptorServer> server_;  // made at the first export by descriptor
  uint64_t nextId_ = 1;
  std::map<const void*, std::unique_ptr<Published>> published_;  // by registration handle
  std::atomic<const kern::MappedBufferTable*> table_{nullptr};
  std::vector<void*> tables_;  // every table made, in the executor's memory
  // Peers' allocations mapped here, by (peer rank, its number for the allocation, bytes).
  std::map<std::tuple<int, uint64_t, uint64_t>, std::unique_ptr<Import>> imports_;
  // Peers' registrations mapped here, by (peer rank, its id): the allocation's key.
  std::map<std::pair<int, uint64_t>, std::tuple<int, uint64_t, uint64_t>> importedBy_;
};

}  // namespace tutti
