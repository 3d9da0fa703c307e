// The strict net-plugin stand-in's insides: its knobs, its comms and requests, and the calls that
// every exported interface version forwards to (strict_tables.cpp adapts them per version).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "nccl.h"

namespace strict {

// Each strictness is a knob, read from the environment at every init: TUTTI_STRICT_PLUGIN_<NAME>=1,
// or TUTTI_STRICT_PLUGIN_ALL=1 for every one of them. See README.md for what each one does.
enum Knob : unsigned {
  kConnect = 1u << 0,    // CONNECT: connect returns its comm only once the peer's accept has answered
  kAccept = 1u << 1,     // ACCEPT: accept advances one stage per call, so never completes on its first
  kNoSizes = 1u << 2,    // NO_SIZES: test() leaves *sizes unwritten
  kNoGoodbye = 1u << 3,  // NO_GOODBYE: close sends nothing; an end with receives posted fails them
  kReorder = 1u << 4,    // REORDER: progress only in test(), a few not-done answers before done
  kBusy = 1u << 5,       // BUSY: isend/irecv answer "no request, try again" every other call
  kExpire = 1u << 6,     // EXPIRE: a handle dies with closeListen and after its one accepted connection
  // BLOCK_ACCEPT: accept blocks (up to kBlockAcceptSeconds) until a connection arrives, as older
  // plugins' accept does. Not part of ALL: it is the opposite kind of strictness, one that only a
  // caller which starts every connect before its first accept (as NCCL does) survives.
  kBlockAccept = 1u << 7,
};
constexpr int kBlockAcceptSeconds = 30;

struct Knobs {
  unsigned on = 0;
  int maxRecvs = 8;  // MAXRECVS=<1..8>: what getProperties reports and irecv enforces
  bool has(Knob k) const { return (on & k) != 0; }
};

Knobs readKnobs();
std::string describe(const Knobs& knobs);  // "CONNECT+NO_SIZES, maxRecvs 1", for the log

// Misuse by the caller: one line on stderr naming the call, and the code to return.
ncclResult_t misuse(ncclResult_t code, const char* call, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
// A failure of the connection (peer gone, refused): one line on stderr, ncclSystemError.
ncclResult_t failure(const char* call, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

constexpr int kMaxRecvsLimit = 8;
constexpr int kMaxRequestsPerComm = 32;  // NCCL_NET_MAX_REQUESTS: outstanding requests on one comm
constexpr size_t kMaxMessageBytes = size_t(1) << 30;
constexpr int kHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
constexpr int kPtrHost = 1;        // NCCL_PTR_HOST

union SocketAddress {
  sockaddr sa;
  sockaddr_in in4;
  sockaddr_in6 in6;
};
std::string toString(const SocketAddress& address);

// What a listen handle carries; connect keeps its progress in `pending`, as NCCL's own plugins
// keep theirs in the handle, so the caller must hand the same handle back on every call.
struct Handle {
  uint64_t magic;
  uint64_t listenerId;
  SocketAddress address;
  uint64_t pending;  // the connect in progress (a PendingConnect*), 0 before the first call
};
static_assert(sizeof(Handle) <= size_t(kHandleBytes));

// What init gives: v11 one per communicator, earlier versions one for the process.
struct Context {
  Knobs knobs;
  int comms = 0;  // listen, send and receive comms open on it
};

// Every send, receive and listen comm starts with this, so that a pointer can be checked.
enum class CommKind { Listen, Send, Recv };

struct Registration {
  void* comm;
  char* base;
  size_t bytes;
};

struct Request;

// A connection end: one TCP socket, its framing state and its outstanding requests.
struct Comm {
  CommKind kind;
  Context* context;
  Knobs knobs;
  int fd = -1;
  std::string peer;                  // the other end's address, for messages
  uint64_t issued = 0;               // requests ever issued (sequence numbers)
  uint64_t busyCalls = 0;            // isend/irecv calls, for BUSY
  std::deque<Request*> outstanding;  // in issue order
  ncclResult_t error = ncclSuccess;  // once set, every test on the comm fails with it
  std::string errorText;
  bool peerEnded = false;  // EOF seen
  bool peerSaidGoodbye = false;
  // Send side: the accept's reply still to be read (when connect did not wait for it).
  size_t replyLeft = 0;
  // Receive side: the frame header being read, and the buffer its payload goes to.
  unsigned char header[16];
  size_t headerGot = 0;
  Request* target = nullptr;
  int targetEntry = -1;
  uint64_t payloadLeft = 0;
};

struct Listen {
  CommKind kind = CommKind::Listen;
  Context* context;
  Knobs knobs;
  int fd = -1;
  uint64_t id;
  SocketAddress address;
  // The connection being accepted: its socket, the hello read so far, the reply written so far.
  int acceptFd = -1;
  unsigned char hello[16];
  size_t helloGot = 0;
  size_t replySent = 0;
  int stage = 0;
  bool accepted = false;  // its one connection has been returned
};

struct Entry {
  char* data;
  size_t size;  // posted (receive) or sent (send)
  int tag;
  size_t done = 0;      // bytes moved so far
  bool filled = false;  // receive: a message landed in it
};

struct Request {
  Comm* comm;
  bool send;
  uint64_t seq;
  int n;
  Entry entries[kMaxRecvsLimit];
  size_t headerSent = 0;  // send: bytes of the frame header written
  unsigned char header[16];
  bool complete = false;
  int notDoneAnswers = 0;  // REORDER: how many more tests answer not-done once complete
};

// Everything live, under one lock that every call takes: a caller's pointers are checked against
// it, so a call on a closed comm or a freed request is named rather than followed.
struct Registry {
  std::mutex mutex;
  Context* processContext = nullptr;  // before v11
  std::unordered_set<Context*> contexts;
  std::unordered_set<void*> comms;  // Comm* and Listen*
  std::unordered_map<void*, Registration> registrations;
  std::unordered_set<Request*> requests;
  // Requests reported done are kept (not freed) for a while, so that their address is not reused
  // and a second test of one is recognised.
  std::deque<Request*> freed;
  std::unordered_set<Request*> freedSet;
  std::unordered_set<uint64_t> expiredListeners;  // closeListen'd ids (EXPIRE)
  std::unordered_set<uint64_t> pendingConnects;   // PendingConnect* the handles point at
  Knobs latestKnobs;                              // the last init's, for getProperties
  bool initialized = false;
};
Registry& registry();
void retire(Request* request);  // done or dropped: out of the live set, into `freed`

// The calls, in the newest shape (size_t sizes); strict_tables.cpp adapts each version.
using Logger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
// perCommunicator: v11 (a context per call); before, one context for the process, whose knobs each
// init reads again.
ncclResult_t init(bool perCommunicator, Logger logger, void** context);
ncclResult_t finalize(void* context);
ncclResult_t devices(int* ndev);
struct Properties {
  const char* name;
  uint64_t guid;
  int speed;
  int maxRecvs;
  size_t maxBytes;
};
ncclResult_t properties(int dev, Properties* props);
ncclResult_t listen(void* context, int dev, void* handle, void** listenComm);
ncclResult_t connect(void* context, int dev, void* handle, void** sendComm);
ncclResult_t accept(void* listenComm, void** recvComm);
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
ncclResult_t deregMr(void* comm, void* mhandle);
ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags, void** mhandles,
                   void** request);
ncclResult_t iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles, void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t closeSend(void* sendComm);
ncclResult_t closeRecv(void* recvComm);
ncclResult_t closeListen(void* listenComm);
ncclResult_t unsupported(const char* call);

// The wire (strict_wire.cpp): sockets, never blocking.
bool chooseAddress(SocketAddress* out, std::string* why);
// Moves what it can now: the result is the bytes moved, 0 when the socket would block; -1 on EOF
// (read) and -2 on an error (errno kept).
long readSome(int fd, void* data, size_t bytes);
long writeSome(int fd, const void* data, size_t bytes);
// Reads and drops what the peer sent (so that close sends a FIN, not a reset); true at EOF.
bool drainInput(int fd);
void closeAbruptly(int fd);  // a reset: the peer sees ECONNRESET

}  // namespace strict
