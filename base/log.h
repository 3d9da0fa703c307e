// Logging in NCCL's shape: "host:pid:tid [dev] NCCL INFO ...", controlled by NCCL_DEBUG,
// NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tutti::log {

enum class Level : int { None = 0, Version = 1, Warn = 2, Info = 3, Abort = 4, Trace = 5 };

// Subsystems, with NCCL_DEBUG_SUBSYS's names (INIT, COLL, P2P, SHM, NET, GRAPH, TUNING,
// ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, ALL).
enum Subsys : uint64_t {
  Init = 1ull << 0,
  Coll = 1ull << 1,
  P2p = 1ull << 2,
  Shm = 1ull << 3,
  Net = 1ull << 4,
  Graph = 1ull << 5,
  Tuning = 1ull << 6,
  Env = 1ull << 7,
  Alloc = 1ull << 8,
  Call = 1ull << 9,
  Proxy = 1ull << 10,
  Nvls = 1ull << 11,
  Bootstrap = 1ull << 12,
  Reg = 1ull << 13,
  Profile = 1ull << 14,
  Ras = 1ull << 15,
  All = ~0ull,
};

// True when a message at this level and subsystem would be written (cheap after the first call).
bool enabled(Level level, uint64_t subsys);

// Writes one line if enabled. printf-style.
void write(Level level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// The "[dev]" field of this thread's lines: the communicator's device (or host-mode rank slot).
void setThreadDevice(int device);

// Hands every line that would be written (its message, without the prefix) to `sink` instead;
// nullptr writes them again. For a copy of this code inside a net plugin, whose lines belong in
// the host library's log (the logger NCCL hands a plugin at init), not in a file of their own.
using LineSink = void (*)(Level level, uint64_t subsys, const char* file, int line, const char* message);
void redirect(LineSink sink);

// Re-reads NCCL_DEBUG* (ncclResetDebugInit).
void reset();

// The parsers behind the configuration, exposed for tests and tutti-info.
// NCCL_DEBUG_SUBSYS's syntax: comma list of names, a leading ^ excludes; unknown names ignored.
uint64_t parseSubsysMask(std::string_view text);
// NCCL_DEBUG_FILE's pattern: %h host name, %p pid, %% a percent sign.
std::string expandDebugFileName(std::string_view pattern, const std::string& hostname, long pid);

}  // namespace tutti::log

#define TUTTI_WARN(...) \
  ::tutti::log::write(::tutti::log::Level::Warn, ::tutti::log::All, __FILE__, __LINE__, __VA_ARGS__)
#define TUTTI_INFO(subsys, ...)                                                                  \
  do {                                                                                           \
    if (::tutti::log::enabled(::tutti::log::Level::Info, (subsys)))                              \
      ::tutti::log::write(::tutti::log::Level::Info, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define TUTTI_TRACE(subsys, ...)                                                                  \
  do {                                                                                            \
    if (::tutti::log::enabled(::tutti::log::Level::Trace, (subsys)))                              \
      ::tutti::log::write(::tutti::log::Level::Trace, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
