// Where one rank's buffers live, the stream its collectives run on and how its iterations are timed: host memory and
// a host stream (host_memory.cpp), or a GPU's memory, a CUDA stream and CUDA events (cuda_memory.cpp).
#pragma once

#include <cstddef>
#include <memory>

#include "nccl.h"

namespace tutti::perf {

class RankGpu;

class RankMemory {
 public:
  virtual ~RankMemory() = default;

  // The stream the rank's collectives run on (null: -y 1 on the host backend).
  virtual cudaStream_t stream() const = 0;
  // Waits for everything queued on stream().
  virtual void synchronize() = 0;

  // bytes of the rank's memory, kept until this object goes: nothing is freed between iterations.
  virtual char* allocate(size_t bytes) = 0;
  // Sets bytes of buffer to value, in stream order.
  virtual void fill(char* buffer, unsigned char value, size_t bytes) = 0;
  // Writing a checking pass's inputs: the host memory to write [buffer, buffer + bytes) into, whose bytes reach
  // buffer at upload() (the buffer itself in host memory).
  virtual char* hostInput(char* buffer, size_t bytes) = 0;
  virtual void upload(char* buffer, size_t bytes) = 0;
  // Reading an output once the stream is done: host memory holding [buffer, buffer + bytes).
  virtual char* hostOutput(char* buffer, size_t bytes) = 0;

  // perf's own exchanges (barriers, statistics, descriptions) run in the rank's memory too: stage() gives the
  // pointers and the stream for a collective that reads inBytes of in and writes outBytes for out, and unstage()
  // brings the result to out once it has run (in host memory they are in and out themselves, on the null stream).
  struct Staged {
    const void* send;
    void* recv;
    cudaStream_t stream;
  };
  virtual Staged stage(const void* in, size_t inBytes, void* out, size_t outBytes) = 0;
  virtual void unstage(void* out, size_t outBytes) = 0;

  // The measured iterations: startTimer() before the first is issued, stopTimer() after the last, returning the
  // seconds between them once the stream is done (host clock, or CUDA events on the stream).
  virtual void startTimer() = 0;
  virtual double stopTimer() = 0;

  // -G: what the stream is given between beginCapture() and endCapture() becomes a CUDA graph, launched on the
  // stream by launchGraph(). Only the cuda backend has graphs.
  virtual void beginCapture() = 0;
  virtual void endCapture() = 0;
  virtual void launchGraph() = 0;
};

// Host memory from ncclMemAlloc; a host stream from tuttiStreamCreate, or none with nullStream (-y 1). rank names the
// rank in errors.
std::unique_ptr<RankMemory> makeHostMemory(bool nullStream, int rank);

// Device memory of gpu, a non-blocking stream, CUDA events; exchangeBytes of device memory for perf's own exchanges
// (the largest input and output of one, each rounded up to 256 bytes). gpu outlives the memory.
std::unique_ptr<RankMemory> makeCudaMemory(const RankGpu& gpu, size_t exchangeBytes);

}  // namespace tutti::perf
