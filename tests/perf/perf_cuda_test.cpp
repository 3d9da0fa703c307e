// The perf tool's CUDA code where no GPU is: the driver loader, the backend it expects, and a rank's GPU and memory
// (buffers, copies, exchanges, timers, graphs) against a stand-in driver (fake_cuda_driver.cpp) that refuses what
// perf must never do on a GPU. What a GPU alone can show runs in tests/gpu/run.sh.
#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "perf/sweep/cuda_driver.h"
#include "perf/sweep/error.h"
#include "perf/sweep/rank_gpu.h"
#include "perf/sweep/rank_memory.h"
#include "tests/common/env_support.h"

using namespace tutti::perf;
using tutti_test::ScopedEnv;

namespace {

// A counter the stand-in driver keeps (it is loaded by then).
int fakeCount(const char* name) {
  void* library = dlopen(TUTTI_PERF_FAKE_CUDA, RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(library != nullptr);
  auto count = reinterpret_cast<int (*)()>(dlsym(library, name));
  REQUIRE(count != nullptr);
  int value = count();
  dlclose(library);
  return value;
}

std::unique_ptr<const cuda::Driver> fakeDriver() {
  std::string why;
  std::unique_ptr<const cuda::Driver> driver = cuda::loadDriver(TUTTI_PERF_FAKE_CUDA, &why);
  INFO(why);
  REQUIRE(driver != nullptr);
  return driver;
}

}  // namespace

TEST_CASE("perf's CUDA driver loader says 'no CUDA driver' where there is none, and names what a driver lacks") {
  std::string why;
  CHECK(cuda::loadDriver("libtutti-perf-absent-driver.so.1", &why) == nullptr);
  CHECK(why.rfind("no CUDA driver (libtutti-perf-absent-driver.so.1: ", 0) == 0);
  // This process's own: where libcuda.so.1 is absent (the build machines) it fails the same way, once, cleanly.
  void* present = dlopen("libcuda.so.1", RTLD_NOW);
  std::string processWhy;
  const cuda::Driver* driver = cuda::driver(&processWhy);
  if (present == nullptr) {
    CHECK(driver == nullptr);
    CHECK(processWhy.rfind("no CUDA driver (libcuda.so.1", 0) == 0);
  } else {
    dlclose(present);
    CHECK((driver != nullptr || !processWhy.empty()));
  }
  {
    ScopedEnv missing("FAKE_CUDA_MISSING", "cuGraphLaunch");
    CHECK(cuda::loadDriver(TUTTI_PERF_FAKE_CUDA, &why) == nullptr);
    CHECK(why == std::string("the CUDA driver ") + TUTTI_PERF_FAKE_CUDA + " lacks cuGraphLaunch");
  }
  {
    ScopedEnv failing("FAKE_CUDA_INIT", "100");
    CHECK(cuda::loadDriver(TUTTI_PERF_FAKE_CUDA, &why) == nullptr);
    CHECK(why == "cuInit failed: fake error (CUresult 100)");
  }
  std::unique_ptr<const cuda::Driver> fake = fakeDriver();
  CHECK(fake->version == 12040);
  CHECK(fake->deviceCount == 2);
  CHECK(cuda::versionText(fake->version) == "12.4");
  CHECK(cuda::versionText(13000) == "13.0");
}

TEST_CASE("perf expects the backend tutti will choose: TUTTI_DEVICE by name, and auto is cuda where a GPU is") {
  cuda::Driver none, two;
  two.deviceCount = 2;
  CHECK(expectedBackend(nullptr, nullptr) == "host");
  CHECK(expectedBackend("auto", nullptr) == "host");
  CHECK(expectedBackend("auto", &none) == "host");
  CHECK(expectedBackend("auto", &two) == "cuda");
  CHECK(expectedBackend(nullptr, &two) == "cuda");
  CHECK(expectedBackend("host", &two) == "host");
  CHECK(expectedBackend("emulated", &two) == "emulated");
  CHECK(expectedBackend("cuda", nullptr) == "cuda");
}

TEST_CASE(
    "perf's rank memory on the cuda backend: device buffers, copies on the rank's stream, exchanges, events, graphs") {
  std::unique_ptr<const cuda::Driver> driver = fakeDriver();
  int leaksBefore = fakeCount("fakeCudaLeaks");
  {
    RankGpu gpu(*driver, 1, 5);
    CHECK(gpu.ordinal() == 1);
    CHECK(gpu.name() == "Fake GPU 1");
    CHECK(gpu.pciBusId() == "0000:19:00.0");
    std::unique_ptr<RankMemory> memory = makeCudaMemory(gpu, 1024);
    CHECK(memory->stream() != nullptr);
    // Another thread (a -g rank's init thread, say) makes the context current before each call of its own.
    std::thread([&] { CHECK_NOTHROW(memory->synchronize()); }).join();
    char* buffer = memory->allocate(64);
    memory->fill(buffer, 0xff, 64);
    char* input = memory->hostInput(buffer + 8, 16);
    for (int i = 0; i < 16; i++) input[i] = char(i);
    memory->upload(buffer + 8, 16);
    const char* output = memory->hostOutput(buffer, 32);
    CHECK(static_cast<unsigned char>(output[0]) == 0xff);
    CHECK(output[8 + 15] == 15);
    CHECK(static_cast<unsigned char>(output[31]) == 0xff);
    // perf's own exchange: the input goes to device memory, the collective's output comes back.
    double in = 2.5, out = 0;
    RankMemory::Staged staged = memory->stage(&in, sizeof in, &out, sizeof out);
    CHECK(staged.stream == memory->stream());
    CHECK(staged.send != &in);
    std::memcpy(staged.recv, staged.send, sizeof in);  // what an all-reduce of one rank does
    memory->unstage(&out, sizeof out);
    CHECK(out == 2.5);
    CHECK_THROWS_WITH(memory->stage(&in, 600, &out, 600),
                      Catch::Contains("perf's exchange buffer (1024 bytes) is too small"));
    memory->startTimer();
    CHECK(memory->stopTimer() >= 0);
    // -G: a capture, then launches; nothing may be waited for while the stream is captured.
    memory->beginCapture();
    CHECK_THROWS_WITH(memory->synchronize(), Catch::Contains("rank 5: cuStreamSynchronize: fake error (CUresult 800)"));
    memory->endCapture();
    int launches = fakeCount("fakeCudaGraphLaunches");
    memory->launchGraph();
    memory->launchGraph();
    CHECK(fakeCount("fakeCudaGraphLaunches") == launches + 2);
    memory->synchronize();
  }
  // Buffers, stream, events, graphs and the retained context all go with the rank.
  CHECK(fakeCount("fakeCudaLeaks") == leaksBefore);
  CHECK_THROWS_WITH(RankGpu(*driver, 7, 3), "rank 3: cuDeviceGet (CUDA device 7): fake error (CUresult 1)");
}
