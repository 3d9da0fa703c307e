// The strict stand-in's own test: each knob makes it as strict as README.md says, and misuse is
// refused and named, so that the multi-host tests through it cannot pass on a lax stand-in. Both
// ends of each connection live in this one thread (every call of the plugin returns at once), on
// loopback; the library is loaded as tutti loads a plugin, by dlopen and its exported table.
#include <dlfcn.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "transports/net/plugin/net_plugin_abi.h"

namespace {

namespace abi = tutti::transport::net::abi;
using Clock = std::chrono::steady_clock;

const char* const kKnobs[] = {"ALL",     "CONNECT", "ACCEPT", "NO_SIZES", "NO_GOODBYE",
                              "REORDER", "BUSY",    "EXPIRE", "MAXRECVS"};

// The knobs a test asks for (NAME or NAME=value), the rest cleared; read by the next init.
void setKnobs(std::initializer_list<const char*> on) {
  for (const char* k : kKnobs) ::unsetenv((std::string("TUTTI_STRICT_PLUGIN_") + k).c_str());
  for (std::string k : on) {
    const size_t eq = k.find('=');
    const std::string name = "TUTTI_STRICT_PLUGIN_" + k.substr(0, eq);
    ::setenv(name.c_str(), eq == std::string::npos ? "1" : k.substr(eq + 1).c_str(), 1);
  }
  ::setenv("NCCL_SOCKET_IFNAME", "lo", 1);
}

template <typename Table>
Table* loadTable(const char* path, const char* symbol) {
  void* library = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  INFO(path << ": " << (library ? "" : ::dlerror()));
  REQUIRE(library != nullptr);
  auto* table = static_cast<Table*>(::dlsym(library, symbol));
  REQUIRE(table != nullptr);
  REQUIRE(std::string(table->name) == "Strict");
  return table;  // never closed: the plugin's registry lives for the process
}

// What the plugin writes to stderr meanwhile (its misuse and failure lines).
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    saved_ = ::dup(2);
    std::FILE* file = std::tmpfile();
    file_ = file;
    ::dup2(::fileno(file), 2);
  }
  ~StderrCapture() { restore(); }
  std::string text() {
    restore();
    std::rewind(file_);
    std::string all;
    char buffer[512];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, file_)) > 0) all.append(buffer, n);
    return all;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
  }
  int saved_ = -1;
  std::FILE* file_ = nullptr;
};

// The v11 build: a context per init, so that each test's knobs are its own.
struct Plugin {
  abi::NetV11* t = loadTable<abi::NetV11>(STRICT_PLUGIN_V11, "ncclNetPlugin_v11");
  void* context = nullptr;

  explicit Plugin(std::initializer_list<const char*> knobs) {
    setKnobs(knobs);
    abi::CommConfig config{abi::kTrafficClassUndefined};
    REQUIRE(t->init(&context, 0, &config, nullptr, nullptr) == ncclSuccess);
  }
  int maxRecvs() {
    abi::PropertiesV11 p{};
    REQUIRE(t->getProperties(0, &p) == ncclSuccess);
    return p.maxRecvs;
  }
  void* listen(char* handle) {
    void* l = nullptr;
    REQUIRE(t->listen(context, 0, handle, &l) == ncclSuccess);
    REQUIRE(l != nullptr);
    return l;
  }
  ncclResult_t connect(char* handle, void** send) {
    abi::DeviceHandle* device = nullptr;
    return t->connect(context, 0, handle, send, &device);
  }
  ncclResult_t accept(void* listen, void** recv) {
    abi::DeviceHandle* device = nullptr;
    return t->accept(listen, recv, &device);
  }
};

// A connected pair, set up as NCCL does: connect and accept called in turn until both are in.
struct Pair {
  Plugin& p;
  char handle[abi::kHandleMaxBytes] = {};
  void* listen = nullptr;
  void* send = nullptr;
  void* recv = nullptr;

  explicit Pair(Plugin& plugin) : p(plugin) {
    listen = p.listen(handle);
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (send == nullptr || recv == nullptr) {
      REQUIRE(Clock::now() < deadline);
      if (send == nullptr) REQUIRE(p.connect(handle, &send) == ncclSuccess);
      if (recv == nullptr) REQUIRE(p.accept(listen, &recv) == ncclSuccess);
    }
  }
  void close() {
    if (send) CHECK(p.t->closeSend(send) == ncclSuccess);
    if (recv) CHECK(p.t->closeRecv(recv) == ncclSuccess);
    if (listen) CHECK(p.t->closeListen(listen) == ncclSuccess);
    send = recv = listen = nullptr;
  }
};

void* reg(Plugin& p, void* comm, std::vector<char>& buffer) {
  void* mhandle = nullptr;
  REQUIRE(p.t->regMr(comm, buffer.data(), buffer.size(), abi::kPtrHost, &mhandle) == ncclSuccess);
  return mhandle;
}

void* isend(Plugin& p, void* comm, void* data, size_t size, int tag, void* mhandle) {
  void* request = nullptr;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (request == nullptr) {  // a plugin may answer "no request now": call again
    REQUIRE(Clock::now() < deadline);
    REQUIRE(p.t->isend(comm, data, size, tag, mhandle, nullptr, &request) == ncclSuccess);
  }
  return request;
}

void* irecv(Plugin& p, void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles) {
  void* request = nullptr;
  void* profiler[8] = {};
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (request == nullptr) {
    REQUIRE(Clock::now() < deadline);
    REQUIRE(p.t->irecv(comm, n, data, sizes, tags, mhandles, profiler, &request) == ncclSuccess);
  }
  return request;
}

// Tests each request until it is done; returns their sizes as test wrote them.
std::vector<int> waitAll(Plugin& p, std::vector<void*> requests, int sentinel = -7) {
  std::vector<int> sizes(requests.size() * 8, sentinel);
  std::vector<bool> done(requests.size(), false);
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (size_t left = requests.size(); left > 0;) {
    REQUIRE(Clock::now() < deadline);
    for (size_t i = 0; i < requests.size(); i++) {
      if (done[i]) continue;
      int d = 0;
      REQUIRE(p.t->test(requests[i], &d, &sizes[i * 8]) == ncclSuccess);
      if (d) done[i] = true, left--;
    }
  }
  return sizes;
}

// One message of `bytes` from send to recv, checked byte for byte; the sizes test reported.
std::pair<int, int> carry(Pair& pair, size_t bytes) {
  std::vector<char> out(bytes), in(bytes + 64, 0);
  for (size_t i = 0; i < bytes; i++) out[i] = char(i * 7 + 3);
  void* sendReg = reg(pair.p, pair.send, out);
  void* recvReg = reg(pair.p, pair.recv, in);
  void* data = in.data();
  size_t size = in.size();
  int tag = 5;
  void* r = irecv(pair.p, pair.recv, 1, &data, &size, &tag, &recvReg);
  void* s = isend(pair.p, pair.send, out.data(), bytes, 5, sendReg);
  std::vector<int> sizes = waitAll(pair.p, {s, r});
  CHECK(std::memcmp(out.data(), in.data(), bytes) == 0);
  CHECK(pair.p.t->deregMr(pair.send, sendReg) == ncclSuccess);
  CHECK(pair.p.t->deregMr(pair.recv, recvReg) == ncclSuccess);
  return {sizes[0], sizes[8]};
}

}  // namespace

TEST_CASE("CONNECT: connect stays pending until the peer's accept has answered, and without the knob does not wait") {
  for (bool strict : {true, false}) {
    Plugin p(strict ? std::initializer_list<const char*>{"CONNECT"} : std::initializer_list<const char*>{});
    char handle[abi::kHandleMaxBytes] = {};
    void* listen = p.listen(handle);
    void* send = nullptr;
    // Long enough for the TCP connection and the hello to be in: only the accept is missing. (The
    // lax stand-in is given far longer, which it takes only on a loaded machine.)
    for (int i = 0; i < (strict ? 100 : 5000) && send == nullptr; i++) {
      REQUIRE(p.connect(handle, &send) == ncclSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (strict) {
      CHECK(send == nullptr);
      void* recv = nullptr;
      const auto deadline = Clock::now() + std::chrono::seconds(20);
      while (recv == nullptr || send == nullptr) {
        REQUIRE(Clock::now() < deadline);
        if (recv == nullptr) REQUIRE(p.accept(listen, &recv) == ncclSuccess);
        if (send == nullptr) REQUIRE(p.connect(handle, &send) == ncclSuccess);
      }
      CHECK(p.t->closeRecv(recv) == ncclSuccess);
    } else {
      CHECK(send != nullptr);  // the lax stand-in: connected before any accept
    }
    CHECK(p.t->closeSend(send) == ncclSuccess);
    CHECK(p.t->closeListen(listen) == ncclSuccess);
    CHECK(p.t->finalize(p.context) == ncclSuccess);
  }
}

TEST_CASE("ACCEPT: accept returns at once while nobody connects, and needs several calls for a connection") {
  for (bool strict : {true, false}) {
    Plugin p(strict ? std::initializer_list<const char*>{"ACCEPT"} : std::initializer_list<const char*>{});
    char handle[abi::kHandleMaxBytes] = {};
    void* listen = p.listen(handle);
    void* recv = nullptr;
    const auto start = Clock::now();
    for (int i = 0; i < 100; i++) REQUIRE(p.accept(listen, &recv) == ncclSuccess);
    CHECK(recv == nullptr);
    CHECK(Clock::now() - start < std::chrono::seconds(5));  // it never waited (generous under load)
    void* send = nullptr;
    for (int i = 0; i < 1000 && send == nullptr; i++) {  // lax connect: in once its hello is sent
      REQUIRE(p.connect(handle, &send) == ncclSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(send != nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    int calls = 0;
    while (recv == nullptr && calls < 1000) {
      REQUIRE(p.accept(listen, &recv) == ncclSuccess);
      calls++;
    }
    REQUIRE(recv != nullptr);
    if (strict)
      CHECK(calls >= 4);  // one stage per call: the socket, the hello, the reply, the comm
    else
      CHECK(calls == 1);
    CHECK(p.t->closeSend(send) == ncclSuccess);
    CHECK(p.t->closeRecv(recv) == ncclSuccess);
    CHECK(p.t->closeListen(listen) == ncclSuccess);
  }
}

TEST_CASE("NO_SIZES: test leaves sizes unwritten, and without the knob writes them") {
  for (bool strict : {true, false}) {
    Plugin p(strict ? std::initializer_list<const char*>{"NO_SIZES"} : std::initializer_list<const char*>{});
    Pair pair(p);
    const auto [sent, received] = carry(pair, 1000);
    CHECK(sent == (strict ? -7 : 1000));
    CHECK(received == (strict ? -7 : 1000));
    pair.close();
  }
}

TEST_CASE("NO_GOODBYE: a peer's close fails the receives posted, and after a goodbye they stay pending") {
  for (bool strict : {true, false}) {
    Plugin p(strict ? std::initializer_list<const char*>{"NO_GOODBYE"} : std::initializer_list<const char*>{});
    Pair pair(p);
    carry(pair, 100);  // the comm has carried data
    std::vector<char> in(256);
    void* recvReg = reg(p, pair.recv, in);
    void* data = in.data();
    size_t size = in.size();
    int tag = 0;
    void* r = irecv(p, pair.recv, 1, &data, &size, &tag, &recvReg);
    REQUIRE(p.t->closeSend(pair.send) == ncclSuccess);
    pair.send = nullptr;
    StderrCapture err;
    ncclResult_t result = ncclSuccess;
    int done = 0;
    // Strict: until the end is seen (at once on loopback; 20 s under any load). Lax: 200 ms of
    // tests that must all answer pending.
    const auto until = Clock::now() + (strict ? std::chrono::milliseconds(20000) : std::chrono::milliseconds(200));
    while (result == ncclSuccess && Clock::now() < until) {
      result = p.t->test(r, &done, nullptr);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(done == 0);
    if (strict) {
      CHECK(result == ncclSystemError);
      CHECK(err.text().find("NET/Strict failure: test: the connection from") != std::string::npos);
    } else {
      CHECK(result == ncclSuccess);  // pending, not failed
    }
    pair.close();  // the outstanding receive is dropped with its comm
  }
}

TEST_CASE("REORDER: bytes move only in test, a done request answers not-done first, a later one may be done first") {
  Plugin p({"REORDER"});
  Pair pair(p);
  std::vector<char> out(64, 'x'), in(128, 0);
  void* sendReg = reg(p, pair.send, out);
  void* recvReg = reg(p, pair.recv, in);
  void* dataA = in.data();
  void* dataB = in.data() + 64;
  size_t size = 64;
  int tag = 0;
  void* ra = irecv(p, pair.recv, 1, &dataA, &size, &tag, &recvReg);
  void* rb = irecv(p, pair.recv, 1, &dataB, &size, &tag, &recvReg);
  void* sa = isend(p, pair.send, out.data(), 32, 0, sendReg);
  void* sb = isend(p, pair.send, out.data() + 32, 32, 0, sendReg);
  // Nothing has tested the sends: their bytes have not left, so no receive can complete.
  int done = 0;
  for (int i = 0; i < 20; i++) {
    REQUIRE(p.t->test(ra, &done, nullptr) == ncclSuccess);
    REQUIRE(done == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  waitAll(p, {sa, sb});
  // Receive A (sequence 0) answers not-done three times once complete, B (sequence 1) twice:
  // tested in turn, B is done first.
  std::vector<void*> order;
  bool aDone = false, bDone = false;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (!aDone || !bDone) {
    REQUIRE(Clock::now() < deadline);
    if (!aDone) {
      REQUIRE(p.t->test(ra, &done, nullptr) == ncclSuccess);
      if (done) aDone = true, order.push_back(ra);
    }
    if (!bDone) {
      REQUIRE(p.t->test(rb, &done, nullptr) == ncclSuccess);
      if (done) bDone = true, order.push_back(rb);
    }
  }
  CHECK(order == std::vector<void*>{rb, ra});
  CHECK(std::string(in.data(), 32) == std::string(32, 'x'));
  pair.close();
}

TEST_CASE("BUSY: isend and irecv answer no request every other call, and the data still arrives") {
  Plugin p({"BUSY"});
  Pair pair(p);
  std::vector<char> out(16, 'b');
  void* sendReg = reg(p, pair.send, out);
  void* request = nullptr;
  REQUIRE(p.t->isend(pair.send, out.data(), 16, 0, sendReg, nullptr, &request) == ncclSuccess);
  CHECK(request == nullptr);
  const auto [sent, received] = carry(pair, 4096);
  CHECK(sent == 4096);
  CHECK(received == 4096);
  pair.close();
}

TEST_CASE("MAXRECVS: getProperties says 1 or 8, irecv takes that many buffers, matched by tag, and no more") {
  {
    Plugin p({"MAXRECVS=8"});
    CHECK(p.maxRecvs() == 8);
    Pair pair(p);
    std::vector<char> out(8 * 100), in(8 * 128, 0);
    void* sendReg = reg(p, pair.send, out);
    void* recvReg = reg(p, pair.recv, in);
    void* data[8];
    size_t sizes[8];
    int tags[8];
    void* mhandles[8];
    for (int i = 0; i < 8; i++) {
      data[i] = in.data() + i * 128;
      sizes[i] = 128;
      tags[i] = 10 + i;
      mhandles[i] = recvReg;
      std::memset(out.data() + i * 100, 'a' + i, 100);
    }
    void* r = irecv(p, pair.recv, 8, data, sizes, tags, mhandles);
    std::vector<void*> sends;
    for (int i = 7; i >= 0; i--)  // tags in reverse: each lands in its buffer, not the next free one
      sends.push_back(isend(p, pair.send, out.data() + i * 100, size_t(10 + i), 10 + i, sendReg));
    waitAll(p, sends);
    std::vector<int> got = waitAll(p, {r});
    for (int i = 0; i < 8; i++) {
      CHECK(got[size_t(i)] == 10 + i);
      CHECK(in[size_t(i) * 128] == char('a' + i));
      CHECK(in[size_t(i) * 128 + size_t(10 + i)] == 0);
    }
    pair.close();
  }
  {
    Plugin p({"MAXRECVS=1"});
    CHECK(p.maxRecvs() == 1);
    Pair pair(p);
    std::vector<char> in(256);
    void* recvReg = reg(p, pair.recv, in);
    void* data[2] = {in.data(), in.data() + 128};
    size_t sizes[2] = {128, 128};
    int tags[2] = {0, 1};
    void* mhandles[2] = {recvReg, recvReg};
    void* profiler[2] = {};
    void* request = nullptr;
    StderrCapture err;
    CHECK(p.t->irecv(pair.recv, 2, data, sizes, tags, mhandles, profiler, &request) == ncclInvalidUsage);
    CHECK(request == nullptr);
    CHECK(err.text().find("NET/Strict misuse: irecv: 2 buffers, but getProperties reported maxRecvs 1") !=
          std::string::npos);
    pair.close();
  }
}

TEST_CASE("EXPIRE: a connect to a closed listener, or to one that accepted its connection, fails cleanly") {
  Plugin p({"EXPIRE"});
  {
    char handle[abi::kHandleMaxBytes] = {};
    void* listen = p.listen(handle);
    REQUIRE(p.t->closeListen(listen) == ncclSuccess);
    void* send = nullptr;
    StderrCapture err;
    CHECK(p.connect(handle, &send) == ncclSystemError);  // at its first call
    CHECK(send == nullptr);
    CHECK(err.text().find("NET/Strict failure: connect: to ") != std::string::npos);
  }
  {
    Pair pair(p);
    char again[abi::kHandleMaxBytes];  // the handle as the connect that succeeded left it
    std::memcpy(again, pair.handle, sizeof again);
    // The listener's one connection is in: the handle is spent, and a second connect is refused
    // (its socket is closed), within a bounded number of calls, never left pending.
    StderrCapture err;
    void* send = nullptr;
    ncclResult_t result = ncclSuccess;
    for (int i = 0; i < 2000 && result == ncclSuccess && send == nullptr; i++) {
      result = p.connect(again, &send);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    CHECK(result == ncclSystemError);
    CHECK(send == nullptr);
    pair.close();
  }
}

TEST_CASE("Misuse is refused and named on stderr: beyond a registration, a freed request, a closed comm") {
  Plugin p({});
  Pair pair(p);
  std::vector<char> out(100);
  void* sendReg = reg(p, pair.send, out);
  void* request = nullptr;
  {
    StderrCapture err;
    CHECK(p.t->isend(pair.send, out.data() + 50, 51, 0, sendReg, nullptr, &request) == ncclInvalidUsage);
    CHECK(err.text().find("NET/Strict misuse: isend: 51 bytes at") != std::string::npos);
  }
  void* s = isend(p, pair.send, out.data(), 10, 0, sendReg);
  std::vector<char> in(100);
  void* recvReg = reg(p, pair.recv, in);
  void* data = in.data();
  size_t size = 100;
  int tag = 0;
  void* r = irecv(p, pair.recv, 1, &data, &size, &tag, &recvReg);
  waitAll(p, {s, r});
  {
    StderrCapture err;
    int done = 0;
    CHECK(p.t->test(s, &done, nullptr) == ncclInternalError);
    CHECK(err.text().find("NET/Strict misuse: test: request") != std::string::npos);
  }
  {
    StderrCapture err;
    void* recv = nullptr;
    CHECK(p.accept(pair.listen, &recv) == ncclInternalError);  // a listener gives one connection
    CHECK(err.text().find("NET/Strict misuse: accept:") != std::string::npos);
  }
  {
    StderrCapture err;
    CHECK(p.t->finalize(p.context) == ncclInternalError);  // comms are still open
    CHECK(err.text().find("NET/Strict misuse: finalize:") != std::string::npos);
  }
  void* send = pair.send;
  REQUIRE(p.t->closeSend(send) == ncclSuccess);
  pair.send = nullptr;
  {
    StderrCapture err;
    CHECK(p.t->isend(send, out.data(), 10, 0, sendReg, nullptr, &request) == ncclInternalError);
    CHECK(p.t->closeSend(send) == ncclInternalError);
    CHECK(err.text().find("NET/Strict misuse: isend: send comm") != std::string::npos);
  }
  pair.close();
  CHECK(p.t->finalize(p.context) == ncclSuccess);
}

TEST_CASE("Misuse: a message larger than the receive posted fails the receive, naming both sizes") {
  Plugin p({});
  Pair pair(p);
  std::vector<char> out(200), in(200);
  void* sendReg = reg(p, pair.send, out);
  void* recvReg = reg(p, pair.recv, in);
  void* data = in.data();
  size_t size = 100;
  int tag = 0;
  void* r = irecv(p, pair.recv, 1, &data, &size, &tag, &recvReg);
  isend(p, pair.send, out.data(), 200, 0, sendReg);
  StderrCapture err;
  ncclResult_t result = ncclSuccess;
  int done = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (result == ncclSuccess && !done && Clock::now() < deadline) result = p.t->test(r, &done, nullptr);
  CHECK(result == ncclInvalidUsage);
  CHECK(err.text().find("a message of 200 bytes (tag 0)") != std::string::npos);
  pair.close();
}

TEST_CASE("Every knob at once (ALL): a correct caller's data arrives whole, through the v11, v10 and v8 tables") {
  {
    Plugin p({"ALL"});
    CHECK(p.maxRecvs() == 1);
    Pair pair(p);
    const auto [sent, received] = carry(pair, (size_t(4) << 20) + 3);
    CHECK(sent == -7);  // NO_SIZES
    CHECK(received == -7);
    pair.close();
    CHECK(p.t->finalize(p.context) == ncclSuccess);
  }
  setKnobs({"ALL"});
  for (const char* path : {STRICT_PLUGIN_V10, STRICT_PLUGIN_V8}) {
    const bool v10 = std::strstr(path, "v10") != nullptr;
    // Drive the older table through the same calls: v10 and v8 differ in init, connect and the
    // sizes' types.
    auto* t10 = v10 ? loadTable<abi::NetV10>(path, "ncclNetPlugin_v10") : nullptr;
    auto* t8 = v10 ? nullptr : loadTable<abi::NetV8>(path, "ncclNetPlugin_v8");
    REQUIRE((t10 ? t10->init(nullptr, nullptr) : t8->init(nullptr)) == ncclSuccess);
    char handle[abi::kHandleMaxBytes] = {};
    void *listen = nullptr, *send = nullptr, *recv = nullptr;
    abi::DeviceHandle* device = nullptr;
    REQUIRE((t10 ? t10->listen(0, handle, &listen) : t8->listen(0, handle, &listen)) == ncclSuccess);
    abi::CommConfig config{abi::kTrafficClassUndefined};
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (!send || !recv) {
      REQUIRE(Clock::now() < deadline);
      if (!send)
        REQUIRE((t10 ? t10->connect(0, &config, handle, &send, &device) : t8->connect(0, handle, &send, &device)) ==
                ncclSuccess);
      if (!recv)
        REQUIRE((t10 ? t10->accept(listen, &recv, &device) : t8->accept(listen, &recv, &device)) == ncclSuccess);
    }
    std::vector<char> out(5000, 'v'), in(6000, 0);
    void *sendReg = nullptr, *recvReg = nullptr;
    REQUIRE((t10 ? t10->regMr(send, out.data(), out.size(), abi::kPtrHost, &sendReg)
                 : t8->regMr(send, out.data(), out.size(), abi::kPtrHost, &sendReg)) == ncclSuccess);
    REQUIRE((t10 ? t10->regMr(recv, in.data(), in.size(), abi::kPtrHost, &recvReg)
                 : t8->regMr(recv, in.data(), in.size(), abi::kPtrHost, &recvReg)) == ncclSuccess);
    void *s = nullptr, *r = nullptr, *data = in.data(), *profiler = nullptr;
    int tag = 1, size8 = 6000;
    size_t size10 = 6000;
    while (!r || !s) {
      REQUIRE(Clock::now() < deadline);
      if (!r)
        REQUIRE((t10 ? t10->irecv(recv, 1, &data, &size10, &tag, &recvReg, &profiler, &r)
                     : t8->irecv(recv, 1, &data, &size8, &tag, &recvReg, &r)) == ncclSuccess);
      if (!s)
        REQUIRE((t10 ? t10->isend(send, out.data(), 5000, 1, sendReg, nullptr, &s)
                     : t8->isend(send, out.data(), 5000, 1, sendReg, &s)) == ncclSuccess);
    }
    int sdone = 0, rdone = 0;
    while (!sdone || !rdone) {
      REQUIRE(Clock::now() < deadline);
      auto test = t10 ? t10->test : t8->test;
      if (!sdone) REQUIRE(test(s, &sdone, nullptr) == ncclSuccess);
      if (!rdone) REQUIRE(test(r, &rdone, nullptr) == ncclSuccess);
    }
    CHECK(std::string(in.data(), 5000) == std::string(5000, 'v'));
    CHECK(in[5000] == 0);
    auto deregMr = t10 ? t10->deregMr : t8->deregMr;
    CHECK(deregMr(send, sendReg) == ncclSuccess);
    CHECK(deregMr(recv, recvReg) == ncclSuccess);
    CHECK((t10 ? t10->closeSend(send) : t8->closeSend(send)) == ncclSuccess);
    CHECK((t10 ? t10->closeRecv(recv) : t8->closeRecv(recv)) == ncclSuccess);
    CHECK((t10 ? t10->closeListen(listen) : t8->closeListen(listen)) == ncclSuccess);
  }
}
