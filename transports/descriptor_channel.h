// Hands file descriptors (a GPU allocation's shareable handle, an emulated device's memfd) to
// other processes of this host: SCM_RIGHTS over an abstract Unix-domain socket, each descriptor to
// the one process it is offered to, with both ends' pids checked by the kernel's SO_PEERCRED.
//
// The offering side runs a small server thread (DescriptorServer), so that a taker never waits
// for its offerer's next setup phase (transports/transport.h): the offerer may itself be
// attaching or waiting when its peer comes. A taker keeps its connection until it has mapped the
// memory and then confirms, which tells the offerer that its FIFO is attached.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "base/clock.h"

namespace tutti::transport {

// A descriptor owned here: closed when destroyed.
class OwnedFd {
 public:
  OwnedFd() = default;
  explicit OwnedFd(int fd) : fd_(fd) {}
  ~OwnedFd();
  OwnedFd(OwnedFd&& other) noexcept : fd_(other.release()) {}
  OwnedFd& operator=(OwnedFd&& other) noexcept;
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

constexpr size_t kDescriptorServerNameBytes = 40;  // the abstract socket's name, NUL-padded

class DescriptorServer {
 public:
  // Where an offered descriptor stands.
  enum class State { Offered, Sent, Confirmed, Refused };

  // Listens on a fresh abstract name and starts the thread. `where` begins its errors.
  explicit DescriptorServer(std::string where);
  ~DescriptorServer();  // stops the thread (within ~100 ms) and closes what is left
  DescriptorServer(const DescriptorServer&) = delete;
  DescriptorServer& operator=(const DescriptorServer&) = delete;

  // The name a taker connects to (without the leading NUL of the abstract namespace).
  const std::string& name() const { return name_; }
  // Offers a duplicate of `fd` to process `pid` under the returned token, until taken or withdrawn.
  uint64_t offer(int fd, pid_t pid);
  void withdraw(uint64_t token);
  State state(uint64_t token) const;
  // Why a token was refused: a taker of another pid, or one that hung up without confirming.
  std::string refusal(uint64_t token) const;

 private:
  struct Offer {
    OwnedFd fd;
    pid_t pid;
    State state = State::Offered;
    std::string refusal;
  };
  void run();
  void serve(int client);

  std::string where_;
  std::string name_;
  OwnedFd listener_;
  mutable std::mutex mutex_;
  std::map<uint64_t, Offer> offers_;
  std::map<int, uint64_t> waiting_;  // clients that hold a descriptor and owe a confirmation
  uint64_t nextToken_ = 1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A descriptor taken from a server: confirm() once the memory is mapped (the offerer then knows
// its FIFO is attached); destroyed unconfirmed, the offerer sees the refusal.
class TakenDescriptor {
 public:
  TakenDescriptor(OwnedFd connection, OwnedFd fd) : connection_(std::move(connection)), fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }
  void confirm();

 private:
  OwnedFd connection_;
  OwnedFd fd_;
};

// Takes `token` from the server `name`, which must be process `serverPid`. Bounded by `deadline`
// and `abort`; throws Remote / Timeout / Aborted / System starting with `what`.
TakenDescriptor takeDescriptor(const std::string& name, pid_t serverPid, uint64_t token, SteadyTime deadline,
                               const std::atomic<bool>* abort, const std::string& what);

}  // namespace tutti::transport
