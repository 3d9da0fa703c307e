// Helpers of the bootstrap tests (bootstrap_test.cpp, bootstrap_faults_test.cpp): ranks as threads
// on loopback, patterned messages, and checks of what every rank received.
#pragma once

#include <unistd.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#include "base/error.h"
#include "base/log.h"
#include "base/network_interface.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/id.h"
#include "bootstrap/wire.h"

#include <catch2/catch.hpp>

namespace tutti::bootstrap_test {

using namespace bootstrap::wire;

// Every test runs on loopback with a short bootstrap timeout, so failure cases end quickly.
inline void useLoopback(int timeoutSeconds = 3) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  unsetenv("NCCL_SOCKET_FAMILY");
  unsetenv("NCCL_COMM_ID");
  setenv("TUTTI_BOOTSTRAP_TIMEOUT", std::to_string(timeoutSeconds).c_str(), 1);
}

struct RankOutcome {
  bool ok = false;
  ErrorCode code = ErrorCode::Internal;
  std::string message;
  double seconds = 0;
};

// Runs body(rank) on one thread per rank; exceptions stay in their thread and are reported.
inline std::vector<RankOutcome> runRanks(int nranks, const std::function<void(int)>& body) {
  std::vector<RankOutcome> outcomes(nranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&, rank] {
      auto start = std::chrono::steady_clock::now();
      try {
        body(rank);
        outcomes[rank].ok = true;
      } catch (const Error& error) {
        outcomes[rank].code = error.code();
        outcomes[rank].message = error.message();
      } catch (const std::exception& error) {
        outcomes[rank].message = std::string("unexpected exception: ") + error.what();
      }
      outcomes[rank].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return outcomes;
}

inline void requireAllOk(const std::vector<RankOutcome>& outcomes) {
  for (size_t rank = 0; rank < outcomes.size(); ++rank) {
    INFO("rank " << rank << ": " << outcomes[rank].message);
    REQUIRE(outcomes[rank].ok);
  }
}

inline std::vector<ncclUniqueId> makeIds(int nIds) {
  std::vector<ncclUniqueId> ids(nIds);
  for (ncclUniqueId& id : ids) bootstrap::getUniqueId(&id);
  return ids;
}

// The byte every check compares against: a function of who sent it, to whom, under which tag.
inline uint8_t patternByte(int from, int to, uint32_t tag, size_t index) {
  return static_cast<uint8_t>(from * 131 + to * 31 + tag * 7 + index * 13 + (index >> 8));
}

inline std::vector<uint8_t> pattern(int from, int to, uint32_t tag, size_t size) {
  std::vector<uint8_t> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = patternByte(from, to, tag, i);
  return bytes;
}

// allGather of distinct per-rank bytes; every slot is checked against what its owner wrote.
inline void checkAllGather(bootstrap::Bootstrap& bootstrap, size_t bytesPerRank, uint32_t salt) {
  int n = bootstrap.nranks();
  std::vector<uint8_t> data(n * bytesPerRank, 0xEE);
  std::vector<uint8_t> mine = pattern(bootstrap.rank(), -1, salt, bytesPerRank);
  std::memcpy(data.data() + bootstrap.rank() * bytesPerRank, mine.data(), bytesPerRank);
  bootstrap.allGather(data.data(), bytesPerRank);
  for (int owner = 0; owner < n; ++owner)
    for (size_t i = 0; i < bytesPerRank; ++i)
      if (data[owner * bytesPerRank + i] != patternByte(owner, -1, salt, i))
        throw Error(ErrorCode::Internal, "allGather slot " + std::to_string(owner) + " byte " + std::to_string(i) +
                                             " is wrong on rank " + std::to_string(bootstrap.rank()));
}

// allGatherV with blocks of different sizes, some empty (rank r's size from sizeOf(r)); every
// block is checked against what its owner wrote, and the bytes around them are not touched.
inline void checkAllGatherV(bootstrap::Bootstrap& bootstrap, const std::function<size_t(int)>& sizeOf, uint32_t salt) {
  int n = bootstrap.nranks();
  std::vector<size_t> sizes, offsets;
  size_t total = 0;
  for (int r = 0; r < n; ++r) {
    sizes.push_back(sizeOf(r));
    offsets.push_back(total);
    total += sizes.back();
  }
  std::vector<uint8_t> data(total + 1, 0xEE);  // one guard byte past the end
  std::vector<uint8_t> mine = pattern(bootstrap.rank(), -1, salt, sizes[size_t(bootstrap.rank())]);
  if (!mine.empty()) std::memcpy(data.data() + offsets[size_t(bootstrap.rank())], mine.data(), mine.size());
  bootstrap.allGatherV(data.data(), sizes);
  for (int owner = 0; owner < n; ++owner)
    for (size_t i = 0; i < sizes[size_t(owner)]; ++i)
      if (data[offsets[size_t(owner)] + i] != patternByte(owner, -1, salt, i))
        throw Error(ErrorCode::Internal, "allGatherV block " + std::to_string(owner) + " byte " + std::to_string(i) +
                                             " is wrong on rank " + std::to_string(bootstrap.rank()));
  if (data[total] != 0xEE)
    throw Error(ErrorCode::Internal, "allGatherV wrote past the blocks on rank " + std::to_string(bootstrap.rank()));
}

inline void expectMessage(bootstrap::Bootstrap& bootstrap, int from, uint32_t tag, size_t size) {
  std::vector<uint8_t> received(size, 0xEE);
  bootstrap.recv(from, tag, received.data(), size);
  if (received != pattern(from, bootstrap.rank(), tag, size))
    throw Error(ErrorCode::Internal, "message from rank " + std::to_string(from) + " tag " + std::to_string(tag) +
                                         " has wrong contents on rank " + std::to_string(bootstrap.rank()));
}

inline void sendPattern(bootstrap::Bootstrap& bootstrap, int to, uint32_t tag, size_t size) {
  std::vector<uint8_t> bytes = pattern(bootstrap.rank(), to, tag, size);
  bootstrap.send(to, tag, bytes.data(), size);
}

// Everything a job does over the bootstrap, with results checked.
inline void exerciseBootstrap(bootstrap::Bootstrap& bootstrap, std::vector<std::atomic<int>>& arrivals) {
  int rank = bootstrap.rank();
  int n = bootstrap.nranks();
  checkAllGather(bootstrap, 1, 1);
  checkAllGather(bootstrap, 13, 2);
  checkAllGather(bootstrap, 4096 + 3, 3);
  checkAllGatherV(
      bootstrap, [](int r) { return size_t(r % 3 == 1 ? 0 : 17 * r + 5); }, 4);
  checkAllGatherV(
      bootstrap, [](int r) { return size_t(r == 0 ? 70000 : 0); }, 5);  // one rank speaks
  checkAllGatherV(
      bootstrap, [](int) { return size_t(0); }, 6);

  // A barrier lets nobody through before everyone has arrived.
  for (int round = 0; round < 3; ++round) {
    arrivals[round].fetch_add(1);
    bootstrap.barrier();
    if (arrivals[round].load() != n)
      throw Error(ErrorCode::Internal, "rank " + std::to_string(rank) + " left barrier " + std::to_string(round) +
                                           " before every rank arrived");
  }

  // Ring: 0 bytes, 1 byte and 1 MiB, each on its own tag.
  int next = (rank + 1) % n;
  int prev = (rank - 1 + n) % n;
  const size_t ringSizes[] = {0, 1, 1 << 20};
  for (uint32_t i = 0; i < 3; ++i) sendPattern(bootstrap, next, 2000 + i, ringSizes[i]);
  for (uint32_t i = 3; i-- > 0;) expectMessage(bootstrap, prev, 2000 + i, ringSizes[i]);  // any order of tags

  // All-to-all, including to itself, several tags and sizes; two messages on one tag keep order.
  const size_t sizes[] = {0, 1, 1000};
  for (int peer = 0; peer < n; ++peer) {
    for (uint32_t t = 0; t < 3; ++t) sendPattern(bootstrap, peer, 3000 + t, sizes[t]);
    sendPattern(bootstrap, peer, 3100, 8);
    sendPattern(bootstrap, peer, 3100, 5);
  }
  for (int peer = n - 1; peer >= 0; --peer) {
    for (uint32_t t = 3; t-- > 0;) expectMessage(bootstrap, peer, 3000 + t, sizes[t]);
    expectMessage(bootstrap, peer, 3100, 8);
    expectMessage(bootstrap, peer, 3100, 5);
  }
  bootstrap.barrier();
}

}  // namespace tutti::bootstrap_test
