// Thread and process rank launchers for the multi-rank tests.
#include "tests/common/ranks_support.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace tutti_test {

void check(bool cond, const std::string& message) {
  if (!cond) throw RankFailure(message);
}

void checkNccl(ncclResult_t result, const char* call) {
  if (result != ncclSuccess)
    throw RankFailure(std::string(call) + " returned " + ncclGetErrorString(result) + ": " + ncclGetLastError(nullptr));
}

std::string runRank(int rank, int nranks, const ncclUniqueId& id, const RankBody& body) {
  ncclComm_t comm = nullptr;
  try {
    checkNccl(ncclCommInitRank(&comm, nranks, id, rank), "ncclCommInitRank");
    body(rank, nranks, comm);
    checkNccl(ncclCommDestroy(comm), "ncclCommDestroy");
    return "";
  } catch (const std::exception& e) {
    if (comm) ncclCommAbort(comm);
    return "rank " + std::to_string(rank) + "/" + std::to_string(nranks) + ": " + e.what() + "\n";
  }
}

namespace {

// Ranks first .. first + count - 1 of nranks, one thread each.
std::string runRankThreads(int first, int count, int nranks, const ncclUniqueId& id, const RankBody& body) {
  std::vector<std::string> failures(static_cast<size_t>(count));
  std::vector<std::thread> threads;
  for (int i = 0; i < count; i++)
    threads.emplace_back([&, i] { failures[size_t(i)] = runRank(first + i, nranks, id, body); });
  for (auto& t : threads) t.join();
  std::string all;
  for (auto& f : failures) all += f;
  return all;
}

}  // namespace

void initPair(ncclComm_t comms[2]) {
  ncclUniqueId id;
  checkNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  ncclResult_t second = ncclSuccess;
  std::thread other([&] { second = ncclCommInitRank(&comms[1], 2, id, 1); });
  ncclResult_t first = ncclCommInitRank(&comms[0], 2, id, 0);
  other.join();
  checkNccl(first, "ncclCommInitRank (rank 0)");
  checkNccl(second, "ncclCommInitRank (rank 1)");
}

double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string runOnThreads(int n, const std::function<void(int i)>& fn) {
  std::vector<std::string> failures(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; i++)
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (const std::exception& e) {
        failures[size_t(i)] = "thread " + std::to_string(i) + ": " + e.what() + "\n";
      }
    });
  for (auto& t : threads) t.join();
  std::string all;
  for (auto& f : failures) all += f;
  return all;
}

std::string runThreads(int nranks, const RankBody& body) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return std::string("ncclGetUniqueId failed: ") + ncclGetLastError(nullptr);
  return runRankThreads(0, nranks, nranks, id, body);
}

std::string runOnProcesses(int n, const std::function<std::string(int i)>& fn, int timeoutSeconds) {
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int i = 0; i < n; i++) {
    int fds[2];
    if (pipe(fds) != 0) return "pipe failed";
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::string failure;
      try {
        failure = fn(i);
      } catch (const std::exception& e) {
        failure = "process " + std::to_string(i) + ": " + e.what() + "\n";
      }
      if (!failure.empty()) (void)!write(fds[1], failure.data(), failure.size());
      close(fds[1]);
      _exit(failure.empty() ? 0 : 1);
    }
    close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  std::string all;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSeconds);
  for (int r = 0; r < n; r++) {
    int status = 0;
    for (;;) {
      pid_t done = waitpid(pids[size_t(r)], &status, WNOHANG);
      if (done == pids[size_t(r)]) break;
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids) kill(p, SIGKILL);
        waitpid(pids[size_t(r)], &status, 0);
        all += "process " + std::to_string(r) + " did not finish within " + std::to_string(timeoutSeconds) +
               " s (killed)\n";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string text;
    char buf[4096];
    ssize_t got;
    while ((got = read(pipes[size_t(r)], buf, sizeof buf)) > 0) text.append(buf, size_t(got));
    close(pipes[size_t(r)]);
    if (WIFSIGNALED(status))
      all += "process " + std::to_string(r) + " died of signal " + std::to_string(WTERMSIG(status)) + "\n";
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      all += text.empty() ? "process " + std::to_string(r) + " failed\n" : text;
  }
  return all;
}

std::string runProcesses(int nranks, const RankBody& body, int timeoutSeconds, int threadsPerProcess,
                         const std::function<void(int process)>& inChild) {
  if (threadsPerProcess < 1 || nranks % threadsPerProcess != 0)
    return "runProcesses: nranks must be a multiple of threadsPerProcess";
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return std::string("ncclGetUniqueId failed: ") + ncclGetLastError(nullptr);
  return runOnProcesses(
      nranks / threadsPerProcess,
      [&](int r) {
        if (inChild) inChild(r);
        return runRankThreads(r * threadsPerProcess, threadsPerProcess, nranks, id, body);
      },
      timeoutSeconds);
}

}  // namespace tutti_test
