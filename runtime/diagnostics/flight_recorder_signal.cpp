// The signal watcher of the flight recorder (flight_recorder_signal.h).
#include "runtime/diagnostics/flight_recorder_signal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "base/text.h"

namespace tutti {

namespace {

// The write end of the watcher's pipe, and the actions the process had before ours, by signal.
// Process-wide because a signal's disposition is: a handler reaches nothing but globals, and
// reads these two only through lock-free atomics (set before the handler is installed).
std::atomic<int> gPipe{-1};
constexpr int kMaxSignal = 65;
std::atomic<void (*)(int)> gPreviousHandler[kMaxSignal];

extern "C" void onFlightSignal(int signo) {
  const int saved = errno;
  const int fd = gPipe.load(std::memory_order_acquire);
  if (fd >= 0) {
    const unsigned char b = static_cast<unsigned char>(signo);
    ssize_t written = write(fd, &b, 1);  // a full pipe drops it: dumps are already pending
    (void)written;
  }
  if (signo > 0 && signo < kMaxSignal)
    if (void (*previous)(int) = gPreviousHandler[signo].load(std::memory_order_acquire)) previous(signo);
  errno = saved;
}

class SignalWatcher {
 public:
  static SignalWatcher& instance() {
    static SignalWatcher watcher;
    return watcher;
  }

  uint64_t attach(int signo, std::function<void()> dump) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) start();
    if (previous_.count(signo) == 0) install(signo);
    const uint64_t id = next_++;
    watchers_.emplace(id, Watch{signo, std::move(dump)});
    return id;
  }

  void detach(uint64_t id) {
    std::thread stopping;
    int fds[2] = {-1, -1};
    {
      std::lock_guard<std::mutex> lock(mutex_);  // waits for a dump that runs now
      auto it = watchers_.find(id);
      if (it == watchers_.end()) return;
      const int signo = it->second.signo;
      watchers_.erase(it);
      bool used = false;
      for (auto& [other, watch] : watchers_) used = used || watch.signo == signo;
      if (!used) uninstall(signo);
      if (!watchers_.empty()) return;
      gPipe.store(-1, std::memory_order_release);
      stopping = std::move(thread_);
      std::memcpy(fds, pipe_, sizeof fds);
      pipe_[0] = pipe_[1] = -1;
    }
    stop(std::move(stopping), fds);
  }

  ~SignalWatcher() {
    // A process that exits with communicators still alive: the handlers go back, the thread ends.
    std::thread stopping;
    int fds[2];
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (!previous_.empty()) uninstall(previous_.begin()->first);
      gPipe.store(-1, std::memory_order_release);
      stopping = std::move(thread_);
      std::memcpy(fds, pipe_, sizeof fds);
    }
    if (stopping.joinable()) stop(std::move(stopping), fds);
  }

 private:
  struct Watch {
    int signo;
    std::function<void()> dump;
  };

  void start() {
    if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
      throw Error(ErrorCode::System, std::string("TUTTI_FLIGHT_RECORDER_SIGNAL: pipe2: ") + std::strerror(errno));
    const int readEnd = pipe_[0];
    try {
      thread_ = std::thread([this, readEnd] { run(readEnd); });
    } catch (const std::exception& e) {
      close(pipe_[0]);
      close(pipe_[1]);
      pipe_[0] = pipe_[1] = -1;
      throw Error(ErrorCode::System, std::string("TUTTI_FLIGHT_RECORDER_SIGNAL: the watcher thread: ") + e.what());
    }
    gPipe.store(pipe_[1], std::memory_order_release);
  }

  // Ends a thread taken out of the watcher: a 0 byte tells it to return.
  static void stop(std::thread thread, const int fds[2]) {
    const unsigned char quit = 0;
    for (;;) {
      if (write(fds[1], &quit, 1) == 1) break;
      if (errno != EINTR && errno != EAGAIN) break;
      // A full pipe: the thread is draining it.
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (thread.joinable()) thread.join();
    close(fds[0]);
    close(fds[1]);
  }

  void install(int signo) {
    struct sigaction ours {
    }, old{};
    ours.sa_handler = onFlightSignal;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_RESTART;
    if (sigaction(signo, nullptr, &old) != 0)
      throw Error(ErrorCode::System,
                  "TUTTI_FLIGHT_RECORDER_SIGNAL: signal " + std::to_string(signo) + ": " + std::strerror(errno));
    const bool callable = !(old.sa_flags & SA_SIGINFO) && old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN;
    gPreviousHandler[signo].store(callable ? old.sa_handler : nullptr, std::memory_order_release);
    if (sigaction(signo, &ours, nullptr) != 0)
      throw Error(ErrorCode::System,
                  "TUTTI_FLIGHT_RECORDER_SIGNAL: signal " + std::to_string(signo) + ": " + std::strerror(errno));
    previous_[signo] = old;
  }

  void uninstall(int signo) {
    auto it = previous_.find(signo);
    if (it == previous_.end()) return;
    sigaction(signo, &it->second, nullptr);
    gPreviousHandler[signo].store(nullptr, std::memory_order_release);
    previous_.erase(it);
  }

  // Waits for signals' bytes (in slices, so the wait is bounded) and runs their dumps.
  void run(int fd) {
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 1000) <= 0) continue;  // a slice passed, or EINTR
      unsigned char bytes[64];
      const ssize_t n = read(fd, bytes, sizeof bytes);
      if (n <= 0) continue;
      std::set<int> arrived;
      for (ssize_t i = 0; i < n; i++) {
        if (bytes[i] == 0) return;
        arrived.insert(bytes[i]);
      }
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& [id, watch] : watchers_) {
        if (arrived.count(watch.signo) == 0) continue;
        try {
          watch.dump();
        } catch (const std::exception& e) {
          TUTTI_WARN("flight recorder: the dump on signal %d failed: %s", watch.signo, e.what());
        }
      }
    }
  }

  std::mutex mutex_;  // everything below; held while dumps run
  std::map<uint64_t, Watch> watchers_;
  std::map<int, struct sigaction> previous_;  // the signals we handle, and what the process had
  uint64_t next_ = 1;
  int pipe_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace

int parseFlightSignal(const std::string& text) {
  static const std::pair<const char*, int> kNames[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
                                                       {"QUIT", SIGQUIT}, {"INT", SIGINT},   {"TERM", SIGTERM},
                                                       {"PWR", SIGPWR},   {"URG", SIGURG},   {"WINCH", SIGWINCH}};
  std::string name = text;
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  int signo = 0;
  for (auto& [known, number] : kNames)
    if (name == known) signo = number;
  if (signo == 0 && !name.empty() && name.find_first_not_of("0123456789") == std::string::npos && name.size() < 4)
    signo = std::atoi(name.c_str());
  if (signo <= 0 || signo >= kMaxSignal || signo == SIGKILL || signo == SIGSTOP)
    throw Error(ErrorCode::InvalidUsage,
                "TUTTI_FLIGHT_RECORDER_SIGNAL=" + text +
                    ": not a signal that can be caught (SIGUSR1, SIGUSR2, SIGHUP, ... or a number)");
  return signo;
}

std::shared_ptr<void> watchFlightSignal(int signo, std::function<void()> dump) {
  const uint64_t id = SignalWatcher::instance().attach(signo, std::move(dump));
  return std::shared_ptr<void>(nullptr, [id](void*) { SignalWatcher::instance().detach(id); });
}

}  // namespace tutti
