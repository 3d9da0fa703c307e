// cross_memory_read: what one process_vm_readv costs on this host against a memcpy of the same
// bytes, as a reference for the zero-copy path between rank processes (TUTTI_CMA): a child process
// holds a buffer of `bytes`, the parent reads it into its own with process_vm_readv in calls of
// `chunk` bytes, and copies a buffer of its own of the same size with memcpy. The child's buffer
// is written before the reads (no fresh pages), optionally advised to transparent huge pages.
//
//   cross_memory_read <bytes> [chunk] [huge]    (huge: 1 to madvise(MADV_HUGEPAGE) the child's buffer)
//
// Prints one line per run: bytes, chunk, the median time of each over 5 batches, GB/s of each.
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

char* mapBytes(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("cross_memory_read: mmap");
    std::exit(1);
  }
  return static_cast<char*>(p);
}

// The median over 5 batches of `calls` runs of f, in microseconds per run.
template <typename F>
double medianMicros(int calls, F&& f) {
  std::vector<double> batches;
  for (int b = 0; b < 5; b++) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; i++) f();
    const auto end = std::chrono::steady_clock::now();
    batches.push_back(std::chrono::duration<double, std::micro>(end - start).count() / calls);
  }
  std::sort(batches.begin(), batches.end());
  return batches[2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cross_memory_read <bytes> [chunk] [huge]\n");
    return 2;
  }
  const size_t bytes = std::strtoull(argv[1], nullptr, 0);
  const size_t chunk = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : bytes;
  const bool huge = argc > 3 && std::atoi(argv[3]) != 0;
  if (bytes == 0 || chunk == 0) {
    std::fprintf(stderr, "cross_memory_read: bytes and chunk must be positive\n");
    return 2;
  }
  int toChild[2], toParent[2];
  if (pipe(toChild) != 0 || pipe(toParent) != 0) return std::perror("cross_memory_read: pipe"), 1;
  const pid_t child = fork();
  if (child < 0) return std::perror("cross_memory_read: fork"), 1;
  if (child == 0) {
    char* held = mapBytes(bytes);
    if (huge) madvise(held, bytes, MADV_HUGEPAGE);
    std::memset(held, 1, bytes);
    char done;
    if (write(toParent[1], &held, sizeof held) != sizeof held || read(toChild[0], &done, 1) != 1) _exit(1);
    _exit(0);
  }
  char* remote = nullptr;
  if (read(toParent[0], &remote, sizeof remote) != sizeof remote) return std::fprintf(stderr, "no child\n"), 1;
  char* into = mapBytes(bytes);
  char* own = mapBytes(bytes);
  std::memset(into, 0, bytes);
  std::memset(own, 1, bytes);
  const int calls = int(std::clamp<size_t>((size_t(256) << 20) / bytes, 5, 2000));
  bool failed = false;
  const double readUs = medianMicros(calls, [&] {
    for (size_t at = 0; at < bytes && !failed; at += chunk) {
      const size_t n = std::min(chunk, bytes - at);
      const iovec local{into + at, n}, far{remote + at, n};
      if (process_vm_readv(child, &local, 1, &far, 1, 0) != ssize_t(n)) failed = true;
    }
  });
  const double copyUs = medianMicros(calls, [&] {
    std::memcpy(into, own, bytes);
    asm volatile("" ::: "memory");
  });
  char done = 0;
  if (write(toChild[1], &done, 1) != 1) failed = true;
  waitpid(child, nullptr, 0);
  if (failed) return std::perror("cross_memory_read: process_vm_readv"), 1;
  std::printf("bytes %zu chunk %zu%s: process_vm_readv %.1f us (%.2f GB/s), memcpy %.1f us (%.2f GB/s)\n", bytes, chunk,
              huge ? " huge" : "", readUs, double(bytes) / readUs / 1e3, copyUs, double(bytes) / copyUs / 1e3);
  return 0;
}
