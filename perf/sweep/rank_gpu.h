// A rank's GPU as perf prepares it on the cuda backend: the device's primary context, made current before
// ncclCommInitRank so that tutti picks that device, and the device's name and PCI bus id for the fingerprint.
#pragma once

#include <string>

#include "perf/sweep/cuda_driver.h"

namespace tutti::perf {

// The device backend tutti will give this process's communicators, as TUTTI_DEVICE (tuttiDevice, null when unset)
// chooses it: host, emulated or cuda, and with auto (or unset) cuda where the CUDA driver reports a device.
// Buffers are allocated after this choice: device memory for cuda, host memory otherwise.
std::string expectedBackend(const char* tuttiDevice, const cuda::Driver* driver);

class RankGpu {
 public:
  // Retains the primary context of CUDA device ordinal for rank and makes it current on the calling thread.
  RankGpu(const cuda::Driver& driver, int ordinal, int rank);
  ~RankGpu();
  RankGpu(const RankGpu&) = delete;
  RankGpu& operator=(const RankGpu&) = delete;

  // Makes the context current on the calling thread (contexts are per thread, and -g drives several GPUs).
  void makeCurrent() const;
  const cuda::Driver& driver() const { return driver_; }
  int ordinal() const { return ordinal_; }
  int rank() const { return rank_; }
  cuda::Context context() const { return context_; }
  const std::string& name() const { return name_; }          // "NVIDIA H100 80GB HBM3"
  const std::string& pciBusId() const { return pciBusId_; }  // "0000:18:00.0"

 private:
  const cuda::Driver& driver_;
  int ordinal_, rank_;
  cuda::Device device_ = 0;
  cuda::Context context_ = nullptr;
  std::string name_, pciBusId_;
};

}  // namespace tutti::perf
