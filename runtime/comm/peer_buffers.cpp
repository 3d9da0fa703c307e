// Registered buffers mapped by the rank processes of a host (see the header).
#include "runtime/comm/peer_buffers.h"

#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "base/tunables.h"
#include "bootstrap/bootstrap.h"
#include "kernels/backend.h"
#include "runtime/comm/comm.h"
#include "transports/descriptor_channel.h"

namespace tutti {

namespace {

constexpr const char* kMapQuestion = "tutti-map-buffer";
constexpr const char* kUnmapQuestion = "tutti-unmap-buffer";
constexpr const char* kMapped = "mapped";
// The most registrations x peers a table holds; past it, buffers go as bytes (said once).
constexpr uint32_t kMaxTableEntries = 4096;

// A question or an answer waits this long at most: a live peer answers on a thread of its own.
double questionSeconds(const ncclComm* comm) { return std::min(comm->settings.timeoutSeconds, 30.0); }

std::string hexOf(const uint8_t* bytes, size_t n) {
  std::string text;
  char two[3];
  for (size_t i = 0; i < n; i++) {
    std::snprintf(two, sizeof two, "%02x", bytes[i]);
    text += two;
  }
  return text;
}

bool bytesOfHex(const std::string& text, uint8_t* bytes, size_t n) {
  if (text.size() != 2 * n) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned v = 0;
    if (std::sscanf(text.c_str() + 2 * i, "%2x", &v) != 1) return false;
    bytes[i] = uint8_t(v);
  }
  return true;
}

// What a map question carries: a registration of the asker, and how to reach its allocation.
struct MapRequest {
  uint64_t id = 0;
  // The allocation, as the asker numbers it: the same number while any of its registrations in it
  // lives, a new one after (so that memory freed and allocated again at the same address is never
  // taken for a mapping still held), and its size.
  uint64_t allocation = 0;
  uint64_t allocationBytes = 0;
  uint64_t offset = 0;  // the registration's start in the allocation
  uint64_t bytes = 0;
  int ownerPid = 0;
  std::string server;              // "-" when the handle is in `handle`
  std::string handle;              // hex of ExportHandle::bytes, or "-"
  std::map<int, uint64_t> tokens;  // by taker rank, at `server`
};

std::string encode(const MapRequest& r) {
  std::ostringstream out;
  out << kMapQuestion << ' ' << r.id << ' ' << r.allocation << ' ' << r.allocationBytes << ' ' << r.offset << ' '
      << r.bytes << ' ' << r.ownerPid << ' ' << r.server << ' ' << r.handle << ' ' << r.tokens.size();
  for (const auto& [rank, token] : r.tokens) out << ' ' << rank << ' ' << token;
  return out.str();
}

bool decode(const std::string& text, MapRequest* r) {
  std::istringstream in(text);
  std::string word;
  size_t ntokens = 0;
  if (!(in >> word) || word != kMapQuestion) return false;
  if (!(in >> r->id >> r->allocation >> r->allocationBytes >> r->offset >> r->bytes >> r->ownerPid >> r->server >>
        r->handle >> ntokens))
    return false;
  for (size_t i = 0; i < ntokens; i++) {
    int rank = 0;
    uint64_t token = 0;
    if (!(in >> rank >> token)) return false;
    r->tokens[rank] = token;
  }
  return true;
}

}  // namespace

struct PeerBuffers::Published {
  uint64_t id = 0;
  uint64_t begin = 0, bytes = 0;
  uint64_t allocationBegin = 0, allocationBytes = 0, allocation = 0;  // MapRequest::allocation
  std::map<int, uint64_t> mappedAt;                                   // by peer rank: where the peer maps `begin`
  std::vector<int> asked;                                             // the peers that mapped it, to tell when it goes
};

struct PeerBuffers::Import {
  void* base = nullptr;  // the peer's allocation, mapped here
  int references = 0;    // the peer's registrations in it
};

PeerBuffers::PeerBuffers(ncclComm* comm) : comm_(comm) {
  const RankInfo& me = comm->identity.peers[size_t(comm->identity.rank)];
  for (int r = 0; r < comm->identity.nranks; r++) {
    const RankInfo& p = comm->identity.peers[size_t(r)];
    if (r != comm->identity.rank && p.hostHash == me.hostHash && p.processToken != me.processToken)
      hostPeers_.push_back(r);
  }
  if (!tunables::kMapRegistered.get())
    inactiveReason_ = "TUTTI_MAP_REGISTERED=0";
  else if (!comm->executor.backend->memory().exportsUserBuffers())
    inactiveReason_ = std::string("its ") + comm->executor.backend->memory().name() +
                      " backend does not map other processes' buffers";
  else if (hostPeers_.empty())
    inactiveReason_ = "no rank of its host is in another process";
  active_ = inactiveReason_.empty();
}

PeerBuffers::~PeerBuffers() {
  kern::DeviceMemory& memory = comm_->executor.backend->memory();
  for (auto& [key, import] : imports_) memory.releaseImported(import->base);
  for (void* t : tables_) memory.release(t);
}

bool PeerBuffers::mapsWith(int peer) const {
  return active_ && std::find(hostPeers_.begin(), hostPeers_.end(), peer) != hostPeers_.end();
}

bool PeerBuffers::isQuestion(const std::string& question) {
  return question.rfind(kMapQuestion, 0) == 0 || question.rfind(kUnmapQuestion, 0) == 0;
}

void PeerBuffers::publish(const void* handle, const void* buffer, size_t bytes) {
  if (!active_) return;
  kern::DeviceMemory& memory = comm_->executor.backend->memory();
  const std::string where = comm_->where();
  std::lock_guard<std::mutex> lock(publishMutex_);
  auto published = std::make_unique<Published>();
  published->id = nextId_++;
  published->begin = reinterpret_cast<uintptr_t>(buffer);
  published->bytes = bytes;
  // Exported: the whole allocation, as the peers map it.
  kern::UserBufferExport exported;
  try {
    exported = memory.exportUserBuffer(
        buffer, bytes, "ncclCommRegister: " + where + ": exporting " + std::to_string(bytes) + " bytes");
  } catch (const Error& e) {
    TUTTI_INFO(log::Reg, "%s: registered buffer %p (%zu bytes) is copied to the peers in other processes: %s",
               where.c_str(), buffer, bytes, e.what());
    published_[handle] = std::move(published);
    return;
  }
  transport::OwnedFd descriptor(exported.handle.fd);
  published->allocationBegin = published->begin - exported.offset;
  published->allocationBytes = exported.allocationBytes;
  published->allocation = nextId_++;
  for (const auto& [h, other] : published_)
    if (other->allocation != 0 && other->allocationBegin == published->allocationBegin &&
        other->allocationBytes == published->allocationBytes)
      published->allocation = other->allocation;
  MapRequest request;
  request.id = published->id;
  request.allocation = published->allocation;
  request.allocationBytes = exported.allocationBytes;
  request.offset = exported.offset;
  request.bytes = bytes;
  request.ownerPid = int(getpid());
  request.server = "-";
  request.handle = "-";
  std::vector<uint64_t> offered;
  try {
    if (descriptor.get() >= 0) {
      if (!server_) server_ = std::make_unique<transport::DescriptorServer>(where);
      request.server = server_->name();
      for (int peer : hostPeers_) {
        const uint64_t token = server_->offer(descriptor.get(), comm_->identity.peers[size_t(peer)].pid);
        request.tokens[peer] = token;
        offered.push_back(token);
      }
    } else {
      request.handle = hexOf(exported.handle.bytes, sizeof exported.handle.bytes);
    }
  } catch (const Error& e) {
    for (uint64_t token : offered) server_->withdraw(token);
    TUTTI_INFO(log::Reg, "%s: registered buffer %p (%zu bytes) is copied to the peers in other processes: %s",
               where.c_str(), buffer, bytes, e.what());
    published_[handle] = std::move(published);
    return;
  }
  const std::vector<bootstrap::PeerAnswer> answers =
      comm_->identity.bootstrap->ask(hostPeers_, encode(request), questionSeconds(comm_));
  for (uint64_t token : offered) server_->withdraw(token);  // taken by now, or never
  for (const bootstrap::PeerAnswer& a : answers) {
    uint64_t address = 0;
    if (a.kind == bootstrap::PeerAnswer::Kind::Answered &&
        std::sscanf(a.text.c_str(), "mapped %" SCNx64, &address) == 1 && address != 0) {
      published->mappedAt[a.peer] = address;
      published->asked.push_back(a.peer);
      TUTTI_TRACE(log::Reg, "%s: registered buffer %p (%zu bytes) is mapped by %s at 0x%" PRIx64, where.c_str(), buffer,
                  bytes, comm_->describePeer(a.peer).c_str(), address);
      continue;
    }
    const std::string why = a.kind == bootstrap::PeerAnswer::Kind::Answered   ? a.text
                            : a.kind == bootstrap::PeerAnswer::Kind::NoAnswer ? "no answer: " + a.text
                                                                              : "unreachable: " + a.text;
    TUTTI_INFO(log::Reg, "%s: registered buffer %p (%zu bytes) is copied to %s, which did not map it (%s)",
               where.c_str(), buffer, bytes, comm_->describePeer(a.peer).c_str(), why.c_str());
  }
  published_[handle] = std::move(published);
  rebuildTable();
}

void PeerBuffers::withdraw(const void* handle) {
  if (!active_) return;
  std::vector<int> asked;
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(publishMutex_);
    auto found = published_.find(handle);
    if (found == published_.end()) return;
    asked = found->second->asked;
    id = found->second->id;
    published_.erase(found);
    if (!asked.empty()) rebuildTable();
  }
  if (asked.empty()) return;
  // The user deregisters only once the calls that use the buffer have completed, so no peer reads
  // it any more. A peer that does not answer keeps its mapping until its communicator goes.
  const std::vector<bootstrap::PeerAnswer> answers = comm_->identity.bootstrap->ask(
      asked, std::string(kUnmapQuestion) + " " + std::to_string(id), questionSeconds(comm_));
  for (const bootstrap::PeerAnswer& a : answers)
    if (a.kind != bootstrap::PeerAnswer::Kind::Answered)
      TUTTI_INFO(log::Reg, "%s: %s did not confirm that it unmapped registration %" PRIu64 " (%s)",
                 comm_->where().c_str(), comm_->describePeer(a.peer).c_str(), id, a.text.c_str());
}

// Under publishMutex_.
void PeerBuffers::rebuildTable() {
  std::vector<kern::MappedBuffer> entries;
  for (const auto& [handle, p] : published_)
    for (const auto& [peer, address] : p->mappedAt) {
      if (entries.size() == kMaxTableEntries) break;
      entries.push_back(
          kern::MappedBuffer{p->begin, p->begin + p->bytes, int64_t(address - p->begin), int32_t(peer), 0});
    }
  kern::DeviceMemory& memory = comm_->executor.backend->memory();
  if (entries.empty()) {
    table_.store(nullptr, std::memory_order_release);
    return;
  }
  const size_t bytes = kern::mappedBufferTableBytes(uint32_t(entries.size()));
  std::vector<char> host(bytes, 0);
  auto* t = reinterpret_cast<kern::MappedBufferTable*>(host.data());
  t->count = uint32_t(entries.size());
  std::memcpy(t->entries, entries.data(), entries.size() * sizeof(kern::MappedBuffer));
  void* table = memory.allocate(bytes, "the table of registered buffers mapped by peers, " + comm_->where());
  tables_.push_back(table);
  memory.copyIn(table, host.data(), bytes);
  table_.store(static_cast<const kern::MappedBufferTable*>(table), std::memory_order_release);
}

std::string PeerBuffers::answer(int asker, const std::string& question) {
  const std::string where = comm_->where();
  const std::string peer = comm_->describePeer(asker);
  if (question.rfind(kUnmapQuestion, 0) == 0) {
    uint64_t id = 0;
    std::sscanf(question.c_str() + std::strlen(kUnmapQuestion), "%" SCNu64, &id);
    std::lock_guard<std::mutex> lock(importMutex_);
    auto by = importedBy_.find({asker, id});
    if (by == importedBy_.end()) return "not mapped";
    auto import = imports_.find(by->second);
    importedBy_.erase(by);
    if (import != imports_.end() && --import->second->references == 0) {
      comm_->executor.backend->memory().releaseImported(import->second->base);
      imports_.erase(import);
    }
    return "unmapped";
  }
  MapRequest r;
  if (!decode(question, &r)) return "copy: the question is malformed";
  const std::string what = where + ": mapping registered buffer " + std::to_string(r.id) + " of " + peer;
  auto refuse = [&](const std::string& why) {
    TUTTI_INFO(log::Reg, "%s: the registered buffer %" PRIu64 " (%" PRIu64 " bytes) of %s is copied, not mapped: %s",
               where.c_str(), r.id, r.bytes, peer.c_str(), why.c_str());
    return "copy: " + why;
  };
  if (!active_) return refuse(inactiveReason_);
  if (!mapsWith(asker)) return refuse("the peer is not a rank of this host in another process");
  if (r.ownerPid != comm_->identity.peers[size_t(asker)].pid)
    return refuse("the question names process " + std::to_string(r.ownerPid) + ", not the peer's");
  if (r.offset + r.bytes > r.allocationBytes) return refuse("the buffer runs past its allocation");
  const auto key = std::make_tuple(asker, r.allocation, r.allocationBytes);
  std::lock_guard<std::mutex> lock(importMutex_);
  auto found = imports_.find(key);
  if (found == imports_.end()) {
    kern::ExportHandle handle;
    void* base = nullptr;
    try {
      if (r.server != "-") {
        auto token = r.tokens.find(comm_->identity.rank);
        if (token == r.tokens.end()) return refuse("no descriptor was offered to this rank");
        transport::TakenDescriptor taken = transport::takeDescriptor(
            r.server, r.ownerPid, token->second, deadlineAfter(questionSeconds(comm_)), &comm_->error.abortFlag, what);
        handle.fd = taken.fd();
        base = comm_->executor.backend->memory().importExported(handle, size_t(r.allocationBytes), what);
        taken.confirm();
      } else {
        if (!bytesOfHex(r.handle, handle.bytes, sizeof handle.bytes)) return refuse("the handle is malformed");
        base = comm_->executor.backend->memory().importExported(handle, size_t(r.allocationBytes), what);
      }
    } catch (const Error& e) {
      return refuse(e.what());
    }
    found = imports_.emplace(key, std::make_unique<Import>(Import{base, 0})).first;
  }
  if (importedBy_.emplace(std::make_pair(asker, r.id), key).second) found->second->references++;
  const uint64_t address = reinterpret_cast<uintptr_t>(found->second->base) + r.offset;
  char text[64];
  std::snprintf(text, sizeof text, "%s %" PRIx64, kMapped, address);
  return text;
}

}  // namespace tutti
