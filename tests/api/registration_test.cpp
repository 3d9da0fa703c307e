// ncclCommRegister and ncclCommDeregister: handles checked against each communicator's cache,
// and collectives on registered buffers.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/common/ranks_support.h"

TEST_CASE("ncclCommRegister: a handle is its communicator's, counted, and refused once gone", "[register]") {
  ncclComm_t comms[2] = {nullptr, nullptr};
  tutti_test::initPair(comms);
  std::vector<float> buf(1024, 1.0f);
  void* first = nullptr;
  void* again = nullptr;
  REQUIRE(ncclCommRegister(comms[0], buf.data(), buf.size() * sizeof(float), &first) == ncclSuccess);
  REQUIRE(ncclCommRegister(comms[0], buf.data(), buf.size() * sizeof(float), &again) == ncclSuccess);
  CHECK(first == again);  // one cache entry, two references
  // Another communicator's handle is refused, naming the communicator.
  CHECK(ncclCommDeregister(comms[1], first) == ncclInvalidArgument);
  std::string message = ncclGetLastError(comms[1]);
  INFO(message);
  CHECK(message.find("rank 1") != std::string::npos);
  CHECK(message.find("not a registration of this communicator") != std::string::npos);
  CHECK(ncclCommDeregister(comms[0], first) == ncclSuccess);
  CHECK(ncclCommDeregister(comms[0], again) == ncclSuccess);
  CHECK(ncclCommDeregister(comms[0], first) == ncclInvalidArgument);  // deregistered already: refused, not freed twice
  CHECK(ncclCommDeregister(comms[0], nullptr) == ncclInvalidArgument);
  // A registration still held when the communicator goes is released with it.
  void* kept = nullptr;
  REQUIRE(ncclCommRegister(comms[1], buf.data(), 64, &kept) == ncclSuccess);
  REQUIRE(ncclCommDestroy(comms[0]) == ncclSuccess);
  REQUIRE(ncclCommDestroy(comms[1]) == ncclSuccess);
}

TEST_CASE("ncclCommRegister: an all-reduce on registered buffers is right", "[register]") {
  ncclComm_t comms[2] = {nullptr, nullptr};
  tutti_test::initPair(comms);
  const size_t count = 100003;
  std::vector<std::vector<double>> in(2), out(2, std::vector<double>(count, 0.0));
  std::vector<void*> handles(4, nullptr);
  for (int r = 0; r < 2; r++) {
    in[size_t(r)].resize(count);
    for (size_t i = 0; i < count; i++) in[size_t(r)][i] = double(i % 97) * (r + 1) + 0.25;
    REQUIRE(ncclCommRegister(comms[r], in[size_t(r)].data(), count * sizeof(double), &handles[size_t(2 * r)]) ==
            ncclSuccess);
    REQUIRE(ncclCommRegister(comms[r], out[size_t(r)].data(), count * sizeof(double), &handles[size_t(2 * r + 1)]) ==
            ncclSuccess);
  }
  std::vector<ncclResult_t> results(2, ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; r++)
    threads.emplace_back([&, r] {
      results[size_t(r)] =
          ncclAllReduce(in[size_t(r)].data(), out[size_t(r)].data(), count, ncclFloat64, ncclSum, comms[r], nullptr);
    });
  for (auto& t : threads) t.join();
  REQUIRE(results[0] == ncclSuccess);
  REQUIRE(results[1] == ncclSuccess);
  size_t wrong = 0;
  for (int r = 0; r < 2; r++)
    for (size_t i = 0; i < count; i++) wrong += out[size_t(r)][i] != in[0][i] + in[1][i];  // two exact addends
  CHECK(wrong == 0);
  for (int r = 0; r < 2; r++) {
    CHECK(ncclCommDeregister(comms[r], handles[size_t(2 * r)]) == ncclSuccess);
    CHECK(ncclCommDeregister(comms[r], handles[size_t(2 * r + 1)]) == ncclSuccess);
    REQUIRE(ncclCommDestroy(comms[r]) == ncclSuccess);
  }
}
