// The host's name and hash, and the process token.
#include "base/host_identity.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <fstream>

#include "base/random.h"
#include "base/tunables.h"

namespace tutti {

namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

constinit std::atomic<uint64_t> gProcessToken{0};

// fork() copies the token into the child, which is another process: draw a new one there.
void redrawProcessTokenInChild() { gProcessToken.store(drawRandom(), std::memory_order_relaxed); }

}  // namespace

std::string hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

uint64_t hostHash() {
  if (tunables::kHostid.isSet()) return fnv1a("hostid:" + tunables::kHostid.get());
  std::string bootId;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> bootId;
  return fnv1a(hostname() + "/" + bootId);
}

uint64_t processToken() {
  static const bool initialised = [] {
    gProcessToken.store(drawRandom(), std::memory_order_relaxed);
    pthread_atfork(nullptr, nullptr, redrawProcessTokenInChild);
    return true;
  }();
  (void)initialised;
  return gProcessToken.load(std::memory_order_relaxed);
}

}  // namespace tutti
