// The stand-in's shared-memory wire: between QPs whose processes share a host and a network
// namespace, a connection's frames and payload go through two byte rings in a POSIX shared-memory
// segment instead of through the kernel's TCP stack.
//
// How the stand-in knows both ends share memory: a sending QP whose destination address belongs
// to its own network namespace (loopback, or an address of one of its interfaces) offers a
// segment and puts its boot id (/proc/sys/kernel/random/boot_id) and its network namespace (the
// device and inode of /proc/self/ns/net) in the Hello; the receiver compares them with its own
// and answers which wire it took. A destination elsewhere gets the Hello of the TCP wire, with
// no answer to wait for. One boot means one kernel, so /dev/shm segments are shared (ranks of
// one host in separate mount namespaces without a common /dev/shm fail to attach and fall back
// to TCP); one network namespace keeps hosts that tests build from namespaces (a veth between
// them) on TCP, as hosts they stand for would be.
// TUTTI_IBVERBS_STANDIN_WIRE=tcp keeps every connection on TCP; =shm makes a connection that
// cannot use shared memory fail at RTS (tests use it to make sure the wire under test is the one
// that ran); unset (or auto): shared memory where the ends allow it, else TCP.
//
// The rings carry exactly the byte stream that TCP would, so the receiver's checks (state, PSN,
// MTU, key, bounds, access), per-QP ordering, acknowledgements and RNR waits are the same code on
// both wires: the receiver copies each payload from the ring into the MR its key names, as an HCA
// places it. The TCP connection stays open beside the rings: its end is the peer gone (a killed
// process closes it), and it carries one-byte doorbells to a progress thread that sleeps in poll.
// A reader asleep says so in its ring; a writer that finds the flag set sends one doorbell (and a
// writer that found the ring full, the same the other way). While a poll_cq spins on a QP's CQ
// the flags stay down and nothing crosses the kernel per message.
//
// A poller asleep on a completion channel is woken once per message, as an HCA's interrupt wakes
// it: while the CQ a ring feeds is armed, the ring asks its writer to poke that channel (a
// datagram to the channel's socket, by its abstract name) when it writes a frame that completes a
// request there in a way the arming reports (any completion, or a solicited or failed one). The
// woken poller's ibv_poll_cq (or ibv_get_cq_event) reads the ring itself, places the completion
// and raises the event, without the progress thread in between. Frames that complete nothing
// there (plain writes, acknowledgements of unsignaled writes) ring the progress thread's doorbell
// as before when it asked for one. The writer marks the ring `poked` after the poke went; a reader
// that takes that mark takes the poke off the channel before it reads the ring, so the channel
// does not stay readable for a poke whose frame was read.
#include <sys/mman.h>
#include <sys/stat.h>

#include "standin.h"

namespace tutti_standin {

// One direction of a connection: a single-producer, single-consumer byte ring (the producer and
// the consumer each hold their own context's mutex).
struct ShmRing {
  alignas(64) std::atomic<uint64_t> head;  // bytes read, advanced by the reader
  alignas(64) std::atomic<uint64_t> tail;  // bytes written, advanced by the writer
  alignas(64) std::atomic<uint32_t> wake;  // WakeBits: how the reader asks to be woken for bytes
  std::atomic<uint32_t> writerAsleep;      // the writer found the ring full: ring its bell
  std::atomic<uint32_t> poked;             // the writer poked `wakeChannel` since the reader last looked
  std::atomic<uint64_t> wakeChannel;       // the reader's completion channel (its id) for kWakeOnChannel
  uint64_t capacity;
  alignas(64) char data[];
};

namespace {

constexpr size_t kOpsBytes = size_t(1) << 20;   // sender -> receiver: op frames and payload
constexpr size_t kAckBytes = size_t(64) << 10;  // receiver -> sender: acknowledgements
constexpr size_t kOpsRingOffset = 0;
constexpr size_t kAckRingOffset = sizeof(ShmRing) + kOpsBytes;
constexpr size_t kSegmentBytes = kAckRingOffset + sizeof(ShmRing) + kAckBytes;

ShmRing* ringAt(void* base, size_t offset) { return reinterpret_cast<ShmRing*>(static_cast<char*>(base) + offset); }

void* mapSegment(int fd) {
  void* base = ::mmap(nullptr, kSegmentBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return base == MAP_FAILED ? nullptr : base;
}

size_t ringWrite(ShmRing* r, const char* src, size_t n) {
  uint64_t tail = r->tail.load(std::memory_order_relaxed);
  uint64_t room = r->capacity - (tail - r->head.load(std::memory_order_acquire));
  size_t m = size_t(std::min<uint64_t>(n, room));
  size_t at = size_t(tail % r->capacity);
  size_t first = std::min(m, size_t(r->capacity) - at);
  std::memcpy(r->data + at, src, first);
  std::memcpy(r->data, src + first, m - first);
  r->tail.store(tail + m, std::memory_order_release);
  return m;
}

size_t ringRead(ShmRing* r, char* dst, size_t n) {
  uint64_t head = r->head.load(std::memory_order_relaxed);
  uint64_t ready = r->tail.load(std::memory_order_acquire) - head;
  size_t m = size_t(std::min<uint64_t>(n, ready));
  size_t at = size_t(head % r->capacity);
  size_t first = std::min(m, size_t(r->capacity) - at);
  std::memcpy(dst, r->data + at, first);
  std::memcpy(dst + first, r->data, m - first);
  r->head.store(head + m, std::memory_order_release);
  return m;
}

bool ringEmpty(const ShmRing* r) {
  return r->tail.load(std::memory_order_acquire) == r->head.load(std::memory_order_relaxed);
}

}  // namespace

WireChoice wireChoice() {
  const char* w = std::getenv("TUTTI_IBVERBS_STANDIN_WIRE");
  if (w && std::strcmp(w, "tcp") == 0) return kChooseTcp;
  if (w && std::strcmp(w, "shm") == 0) return kChooseShm;
  return kChooseAuto;
}

void fillHostIdentity(Hello* h) {
  std::memset(h->bootId, 0, sizeof h->bootId);
  if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (!std::fgets(h->bootId, sizeof h->bootId, f)) h->bootId[0] = '\0';
    std::fclose(f);
  }
  struct stat st {};
  if (::stat("/proc/self/ns/net", &st) == 0) {
    h->netns = uint64_t(st.st_ino);
    h->netnsDev = uint64_t(st.st_dev);
  }
}

bool sameHost(const Hello& h) {
  Hello mine{};
  fillHostIdentity(&mine);
  return mine.bootId[0] != '\0' && std::memcmp(mine.bootId, h.bootId, sizeof mine.bootId) == 0 && mine.netns != 0 &&
         mine.netns == h.netns && mine.netnsDev == h.netnsDev;
}

bool addressIsLocal(in_addr a) {
  if ((ntohl(a.s_addr) >> 24) == 127) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next)
    found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == a.s_addr;
  freeifaddrs(list);
  return found;
}

bool createSegment(Link& l, char* name, size_t nameBytes) {
  static std::atomic<uint32_t> serial{0};
  std::random_device random;
  snprintf(name, nameBytes, "/tutti-standin-%d-%u-%08x", int(::getpid()), serial.fetch_add(1), unsigned(random()));
  int fd = ::shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  void* base = nullptr;
  if (::ftruncate(fd, off_t(kSegmentBytes)) == 0) base = mapSegment(fd);
  int e = errno;
  ::close(fd);
  if (!base) {
    ::shm_unlink(name);
    errno = e;
    return false;
  }
  ringAt(base, kOpsRingOffset)->capacity = kOpsBytes;  // the rest is zero, as ftruncate made it
  ringAt(base, kAckRingOffset)->capacity = kAckBytes;
  l.shmBase = base;
  l.shmBytes = kSegmentBytes;
  l.tx = ringAt(base, kOpsRingOffset);
  l.rx = ringAt(base, kAckRingOffset);
  return true;
}

bool attachSegment(Link& l, const char* name) {
  int fd = ::shm_open(name, O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return false;
  struct stat st {};
  void* base = ::fstat(fd, &st) == 0 && size_t(st.st_size) == kSegmentBytes ? mapSegment(fd) : nullptr;
  ::close(fd);
  if (!base) return false;
  l.shmBase = base;
  l.shmBytes = kSegmentBytes;
  l.tx = ringAt(base, kAckRingOffset);
  l.rx = ringAt(base, kOpsRingOffset);
  return l.rx->capacity == kOpsBytes && l.tx->capacity == kAckBytes;
}

void unlinkSegment(const char* name) { ::shm_unlink(name); }

void detachSegment(Link& l) {
  if (l.shmBase) ::munmap(l.shmBase, l.shmBytes);
  l.shmBase = nullptr;
  l.shmBytes = 0;
  l.tx = l.rx = nullptr;
}

static void ringBell(Link& l) {
  char bell = 'd';
  (void)!::send(l.fd, &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);  // a peer gone shows on its own
}

ssize_t linkSend(Link& l, const void* data, size_t n) {
  if (!l.tx) return ::send(l.fd, data, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  size_t m = ringWrite(l.tx, static_cast<const char*>(data), n);
  if (m == 0 && n > 0) {  // full: ask the reader for a bell when it makes room, then look once more
    l.tx->writerAsleep.store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    m = ringWrite(l.tx, static_cast<const char*>(data), n);
  }
  if (m == 0 && n > 0) {
    errno = EAGAIN;
    return -1;
  }
  return ssize_t(m);
}

void wakeReader(Link& l, uint32_t completes) {
  if (!l.tx) return;
  ShmRing* r = l.tx;
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the tail before the flags (see armDoorbell)
  uint32_t want = r->wake.load(std::memory_order_relaxed);
  if (want & completes & kWakeOnChannel) {
    uint32_t was = r->wake.fetch_and(~kWakeOnChannel);
    if (was & completes & kWakeOnChannel) {
      pokeChannel(r->wakeChannel.load(std::memory_order_acquire));
      r->poked.store(1, std::memory_order_release);
      counters().channelPokes++;
      return;  // the poller reads the ring; the progress thread may sleep on
    }
    want = was;
  }
  if ((want & kWakeBell) && (r->wake.fetch_and(~uint32_t(kWakeBell)) & kWakeBell)) {
    ringBell(l);
    counters().doorbells++;
  }
}

ssize_t linkRecv(Link& l, void* data, size_t n) {
  if (!l.rx) return ::recv(l.fd, data, n, MSG_DONTWAIT);
  size_t m = ringRead(l.rx, static_cast<char*>(data), n);
  if (m == 0 && n > 0) {
    errno = EAGAIN;
    return -1;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the head before the flag (see linkSend)
  if (l.rx->writerAsleep.load(std::memory_order_relaxed) && l.rx->writerAsleep.exchange(0)) ringBell(l);
  return ssize_t(m);
}

bool armDoorbell(Link& l) {
  if (!(l.rx->wake.load(std::memory_order_relaxed) & kWakeBell)) l.rx->wake.fetch_or(kWakeBell);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the flag before the tail (see wakeReader)
  return !ringEmpty(l.rx);
}

void disarmDoorbell(Link& l) {
  if (l.rx->wake.load(std::memory_order_relaxed) & kWakeBell) l.rx->wake.fetch_and(~uint32_t(kWakeBell));
}

bool armChannelWake(Link& l, uint64_t channel, bool solicitedOnly) {
  ShmRing* r = l.rx;
  uint32_t bits = solicitedOnly ? kWakeOnSolicited : kWakeOnCompletion;  // every completing frame has kWakeOnCompletion
  if (r->wakeChannel.load(std::memory_order_relaxed) != channel)
    r->wakeChannel.store(channel, std::memory_order_relaxed);
  uint32_t now = r->wake.load(std::memory_order_relaxed);
  if ((now & kWakeOnChannel) != bits) {
    r->wake.fetch_and(~(kWakeOnChannel & ~bits));
    r->wake.fetch_or(bits);  // after wakeChannel: the writer reads it after it takes these bits
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the flags before the tail (see wakeReader)
  return !ringEmpty(r);
}

void disarmChannelWake(Link& l) {
  if (l.rx->wake.load(std::memory_order_relaxed) & kWakeOnChannel) l.rx->wake.fetch_and(~kWakeOnChannel);
}

bool takePoke(Link& l) { return l.rx->poked.load(std::memory_order_relaxed) && l.rx->poked.exchange(0); }

bool drainDoorbells(Link& l) {
  char bells[64];
  for (;;) {  // a short read took all there was: no second call to hear EAGAIN
    ssize_t r = ::recv(l.fd, bells, sizeof bells, MSG_DONTWAIT);
    if (r == 0) return false;
    if (r < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (r < ssize_t(sizeof bells)) return true;
  }
}

}  // namespace tutti_standin
