// Descriptors between processes of one host over abstract Unix-domain sockets (see the header).
#include "transports/descriptor_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace tutti::transport {
namespace {

constexpr uint64_t kRequestMagic = 0x7475747469666470ull;  // "tuttifdp"
constexpr uint8_t kGranted = 0, kRefused = 1;
constexpr uint8_t kConfirm = 'A';
// How long the server gives one client to send its request: a local process that connected
// writes it at once; a stalled one must not hold the others.
constexpr int kRequestWaitMs = 1000;

struct Request {
  uint64_t magic;
  uint64_t token;
};

sockaddr_un abstractAddress(const std::string& name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  address.sun_path[0] = '\0';  // abstract: no file, gone with the socket, scoped to the network namespace
  std::memcpy(address.sun_path + 1, name.data(), name.size());
  *length = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return address;
}

pid_t peerPid(int fd) {
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
  return credentials.pid;
}

}  // namespace

OwnedFd::~OwnedFd() {
  if (fd_ >= 0) ::close(fd_);
}

OwnedFd& OwnedFd::operator=(OwnedFd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

DescriptorServer::DescriptorServer(std::string where) : where_(std::move(where)) {
  std::random_device random;
  name_ = "tutti-fd-" + std::to_string(getpid()) + "-" + std::to_string(uint64_t(random()) << 32 | random());
  if (name_.size() >= kDescriptorServerNameBytes) name_.resize(kDescriptorServerNameBytes - 1);
  listener_ = OwnedFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (listener_.get() < 0) throwSystemError(where_ + ": Unix socket for passing FIFO handles", errno);
  socklen_t length = 0;
  sockaddr_un address = abstractAddress(name_, &length);
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), length) != 0)
    throwSystemError(where_ + ": binding the Unix socket @" + name_ + " for passing FIFO handles", errno);
  if (::listen(listener_.get(), 128) != 0) throwSystemError(where_ + ": listening on the Unix socket @" + name_, errno);
  thread_ = std::thread([this] { run(); });
}

DescriptorServer::~DescriptorServer() {
  stop_.store(true);
  thread_.join();
  for (auto& [client, token] : waiting_) ::close(client);
}

uint64_t DescriptorServer::offer(int fd, pid_t pid) {
  OwnedFd copy(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (copy.get() < 0) throwSystemError(where_ + ": duplicating a FIFO handle to offer", errno);
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t token = nextToken_++;
  offers_[token] = Offer{std::move(copy), pid, State::Offered, ""};
  return token;
}

void DescriptorServer::withdraw(uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  offers_.erase(token);
}

DescriptorServer::State DescriptorServer::state(uint64_t token) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = offers_.find(token);
  return found == offers_.end() ? State::Refused : found->second.state;
}

std::string DescriptorServer::refusal(uint64_t token) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = offers_.find(token);
  return found == offers_.end() ? "the offer was withdrawn" : found->second.refusal;
}

// One client's request: the descriptor goes only to the pid it was offered to, once.
void DescriptorServer::serve(int client) {
  pollfd ready{client, POLLIN, 0};
  Request request{};
  if (::poll(&ready, 1, kRequestWaitMs) != 1 ||
      ::recv(client, &request, sizeof request, MSG_WAITALL) != ssize_t(sizeof request) ||
      request.magic != kRequestMagic) {
    TUTTI_INFO(log::Shm, "%s: dropped a connection to @%s that sent no valid request", where_.c_str(), name_.c_str());
    ::close(client);
    return;
  }
  const pid_t pid = peerPid(client);
  std::unique_lock<std::mutex> lock(mutex_);
  auto found = offers_.find(request.token);
  uint8_t status = kRefused;
  int fd = -1;
  if (found == offers_.end()) {
    TUTTI_WARN("%s: process %d asked @%s for FIFO handle %llu, which is not offered", where_.c_str(), int(pid),
               name_.c_str(), static_cast<unsigned long long>(request.token));
  } else if (found->second.state != State::Offered || found->second.pid != pid) {
    TUTTI_WARN("%s: process %d asked @%s for FIFO handle %llu, offered to process %d%s", where_.c_str(), int(pid),
               name_.c_str(), static_cast<unsigned long long>(request.token), int(found->second.pid),
               found->second.state != State::Offered ? " and already taken" : "");
  } else {
    status = kGranted;
    fd = found->second.fd.get();
  }
  msghdr message{};
  iovec part{&status, 1};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header), &fd, sizeof fd);
  }
  const bool sent = ::sendmsg(client, &message, MSG_NOSIGNAL) == 1;
  if (status != kGranted || !sent) {
    if (status == kGranted) {
      found->second.state = State::Refused;
      found->second.refusal = "sending the handle to process " + std::to_string(pid) + " failed: " + errnoText(errno);
    }
    ::close(client);
    return;
  }
  found->second.state = State::Sent;
  waiting_[client] = request.token;
}

void DescriptorServer::run() {
  while (!stop_.load()) {
    std::vector<pollfd> fds{{listener_.get(), POLLIN, 0}};
    for (auto& [client, token] : waiting_) fds.push_back(pollfd{client, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), int(kPollSlice.count())) <= 0) continue;
    for (size_t i = 1; i < fds.size(); i++) {
      if (fds[i].revents == 0) continue;
      const int client = fds[i].fd;
      uint8_t byte = 0;
      const bool confirmed = ::recv(client, &byte, 1, MSG_DONTWAIT) == 1 && byte == kConfirm;
      std::lock_guard<std::mutex> lock(mutex_);
      auto found = offers_.find(waiting_[client]);
      if (found != offers_.end()) {
        found->second.state = confirmed ? State::Confirmed : State::Refused;
        if (!confirmed) found->second.refusal = "the peer took the handle but hung up before it had mapped the memory";
        found->second.fd = OwnedFd();  // the peer holds its own now
      }
      waiting_.erase(client);
      ::close(client);
    }
    if (fds[0].revents & POLLIN) {
      int client = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) serve(client);
    }
  }
}

void TakenDescriptor::confirm() {
  const uint8_t byte = kConfirm;
  (void)::send(connection_.get(), &byte, 1, MSG_NOSIGNAL);
  connection_ = OwnedFd();
}

TakenDescriptor takeDescriptor(const std::string& name, pid_t serverPid, uint64_t token, SteadyTime deadline,
                               const std::atomic<bool>* abort, const std::string& what) {
  OwnedFd connection(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (connection.get() < 0) throwSystemError(what + ": Unix socket to take the FIFO handle", errno);
  socklen_t length = 0;
  sockaddr_un address = abstractAddress(name, &length);
  if (::connect(connection.get(), reinterpret_cast<sockaddr*>(&address), length) != 0)
    throw Error(ErrorCode::Remote, what + ": connecting to the peer's handle socket @" + name + ": " +
                                       errnoText(errno) + " (is the peer in another network namespace, or gone?)");
  if (const pid_t pid = peerPid(connection.get()); pid != serverPid)
    throw Error(ErrorCode::Remote, what + ": the handle socket @" + name + " belongs to process " +
                                       std::to_string(pid) + ", not to the peer (pid " + std::to_string(serverPid) +
                                       ")");
  const Request request{kRequestMagic, token};
  if (::send(connection.get(), &request, sizeof request, MSG_NOSIGNAL) != ssize_t(sizeof request))
    throw Error(ErrorCode::Remote,
                what + ": sending the request for the FIFO handle to @" + name + ": " + errnoText(errno));
  pollfd ready{connection.get(), POLLIN, 0};
  for (;;) {
    if (abort != nullptr && abort->load())
      throw Error(ErrorCode::Aborted, what + ": aborted while taking the FIFO handle");
    if (SteadyClock::now() > deadline)
      throw Error(ErrorCode::Timeout, what + ": the peer (pid " + std::to_string(serverPid) +
                                          ") did not hand over the FIFO handle in time");
    if (::poll(&ready, 1, int(kPollSlice.count())) == 1) break;
  }
  uint8_t status = kRefused;
  msghdr message{};
  iovec part{&status, 1};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const ssize_t got = ::recvmsg(connection.get(), &message, MSG_CMSG_CLOEXEC);
  OwnedFd fd;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header))
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      int received = -1;
      std::memcpy(&received, CMSG_DATA(header), sizeof received);
      fd = OwnedFd(received);
    }
  if (got != 1 || status != kGranted || fd.get() < 0)
    throw Error(ErrorCode::Remote, what + ": the peer (pid " + std::to_string(serverPid) + ") refused FIFO handle " +
                                       std::to_string(token) + " (offered to another process, or taken already)");
  return TakenDescriptor(std::move(connection), std::move(fd));
}

}  // namespace tutti::transport
