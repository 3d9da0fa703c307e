// Starting ranks for multi-rank tests: as threads of this process or as forked processes, each
// with its own communicator. Failures inside a rank are collected and reported by the caller's
// thread (Catch2's assertions are not thread-safe).
#pragma once

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>

#include "nccl.h"

namespace tutti_test {

using RankBody = std::function<void(int rank, int nranks, ncclComm_t comm)>;

// Thrown by rank bodies to report a failed check.
struct RankFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws RankFailure with the message when cond is false.
void check(bool cond, const std::string& message);
// Throws RankFailure when result is not ncclSuccess, naming the call and ncclGetLastError().
void checkNccl(ncclResult_t result, const char* call);

// Makes a communicator for rank of nranks from id, runs body, destroys it (aborts it after a
// failure). Returns "" or the failure, naming the rank.
std::string runRank(int rank, int nranks, const ncclUniqueId& id, const RankBody& body);

// Two ranks as threads of this process: comms[0] and comms[1]. Throws RankFailure when an
// init fails.
void initPair(ncclComm_t comms[2]);

double secondsSince(std::chrono::steady_clock::time_point t);

// Runs fn(i) for i < n on n threads (without making communicators). Returns the failures.
std::string runOnThreads(int n, const std::function<void(int i)>& fn);

// Runs fn(i) for i < n in n forked processes (without making communicators); fn returns its
// failures as text, or throws. A child that fails, crashes or does not finish within
// timeoutSeconds counts as a failure (and is killed). Returns the failures.
std::string runOnProcesses(int n, const std::function<std::string(int i)>& fn, int timeoutSeconds = 240);

// Runs body on nranks threads that share one unique id. Returns the failures (empty: all ok).
std::string runThreads(int nranks, const RankBody& body);
// Runs body in forked processes, threadsPerProcess ranks (threads) in each: nranks must be a
// multiple of it. A child that fails, crashes or does not finish within timeoutSeconds counts
// as a failure (and is killed). inChild(process), when given, runs in each child before its
// ranks join (to give processes different environments).
std::string runProcesses(int nranks, const RankBody& body, int timeoutSeconds = 240, int threadsPerProcess = 1,
                         const std::function<void(int process)>& inChild = {});

}  // namespace tutti_test

#define TUTTI_NCCL_CHECK(call) ::tutti_test::checkNccl((call), #call)
