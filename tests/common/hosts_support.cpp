// Forked rank processes that pretend to live on different hosts (NCCL_HOSTID).
#include "tests/common/hosts_support.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace tutti_test {
std::vector<ProcessOutcome> runOnHosts(const HostLayout& layout, const RankBody& body) {
  const int nranks = layout.hosts * layout.ranksPerHost;
  std::vector<ProcessOutcome> outcomes;
  if (layout.threadsPerProcess < 1 || layout.ranksPerHost % layout.threadsPerProcess != 0 ||
      (layout.interleaved && layout.threadsPerProcess != 1)) {
    outcomes.push_back({0, 0, "runOnHosts: threadsPerProcess must divide ranksPerHost, and be 1 when interleaved\n"});
    return outcomes;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    outcomes.push_back({0, 0, std::string("ncclGetUniqueId failed: ") + ncclGetLastError(nullptr) + "\n"});
    return outcomes;
  }
  struct Child {
    pid_t pid;
    int pipe;
    int firstRank;
  };
  std::vector<Child> children;
  for (int first = 0; first < nranks; first += layout.threadsPerProcess) {
    int fds[2];
    if (pipe(fds) != 0) break;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      int host = layout.interleaved ? first % layout.hosts : first / layout.ranksPerHost;
      setenv("NCCL_HOSTID", ("tutti-test-host-" + std::to_string(host)).c_str(), 1);
      for (auto& [name, value] : layout.environment) setenv(name.c_str(), value.c_str(), 1);
      std::vector<std::string> failures(size_t(layout.threadsPerProcess));
      std::vector<std::thread> threads;
      for (int i = 0; i < layout.threadsPerProcess; i++)
        threads.emplace_back([&, i] { failures[size_t(i)] = runRank(first + i, nranks, id, body); });
      for (auto& t : threads) t.join();
      std::string all;
      for (auto& f : failures) all += f;
      if (!all.empty()) (void)!write(fds[1], all.data(), all.size());
      close(fds[1]);
      _exit(all.empty() ? 0 : 1);
    }
    close(fds[1]);
    children.push_back({pid, fds[0], first});
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(layout.timeoutSeconds);
  for (Child& child : children) {
    ProcessOutcome outcome;
    outcome.firstRank = child.firstRank;
    int status = 0;
    for (;;) {
      if (waitpid(child.pid, &status, WNOHANG) == child.pid) break;
      if (std::chrono::steady_clock::now() > deadline) {
        for (Child& c : children) kill(c.pid, SIGKILL);
        waitpid(child.pid, &status, 0);
        outcome.failure = "process of rank " + std::to_string(child.firstRank) + " did not finish within " +
                          std::to_string(layout.timeoutSeconds) + " s (killed)\n";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(child.pipe, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
    close(child.pipe);
    if (WIFSIGNALED(status)) outcome.signal = WTERMSIG(status);
    if (outcome.failure.empty()) {
      if (outcome.signal != 0)
        outcome.failure = "process of rank " + std::to_string(child.firstRank) + " died of signal " +
                          std::to_string(outcome.signal) + "\n";
      else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
        outcome.failure = text.empty() ? "process of rank " + std::to_string(child.firstRank) + " failed\n" : text;
    }
    outcomes.push_back(outcome);
  }
  return outcomes;
}

std::string failuresOf(const std::vector<ProcessOutcome>& outcomes) {
  std::string all;
  for (const ProcessOutcome& o : outcomes) all += o.failure;
  return all;
}

}  // namespace tutti_test
