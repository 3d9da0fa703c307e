// Logging in NCCL's line shape, configured from NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE.
//
// Decisions, for whoever reads logs or changes this file:
// - Output goes to stdout unless NCCL_DEBUG_FILE names a file, as in NCCL: tooling that pipes a
//   job's stdout through grep keeps working. An unopenable file falls back to stdout with a WARN.
// - The file is opened only when NCCL_DEBUG asks for output, so an unset NCCL_DEBUG never
//   creates files.
// - WARN and TRACE lines carry file:line (the path inside the source tree, e.g.
//   "transports/shm/shm.cpp:42"), INFO lines do not, CALL traces drop the device: NCCL's habits.
// - The version banner is written once per process when logging is first configured with a
//   level of VERSION or more; it says "NCCL version <api>+tutti-<ours>" so scripts that grep
//   for NCCL's banner still find a version.
// - Configuration is process-wide (NCCL's is too, and ncclResetDebugInit resets it); the hot
//   check enabled() is two relaxed atomic loads once configured.
#include "base/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>

#include "base/host_identity.h"
#include "base/text.h"
#include "base/tunables.h"
#include "nccl.h"

#ifndef TUTTI_VERSION_STRING
#define TUTTI_VERSION_STRING "0.0.0"
#endif

namespace tutti::log {

namespace {

#define TUTTI_STRINGIFY_VALUE(x) #x
#define TUTTI_STRINGIFY(x) TUTTI_STRINGIFY_VALUE(x)
// The NCCL API version our nccl.h implements, e.g. "2.28.9".
constexpr const char* kNcclApiVersion =
    TUTTI_STRINGIFY(NCCL_MAJOR) "." TUTTI_STRINGIFY(NCCL_MINOR) "." TUTTI_STRINGIFY(NCCL_PATCH);

struct SubsysName {
  const char* name;
  uint64_t bits;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", Init},           {"COLL", Coll}, {"P2P", P2p},         {"SHM", Shm},   {"NET", Net},     {"GRAPH", Graph},
    {"TUNING", Tuning},       {"ENV", Env},   {"ALLOC", Alloc},     {"CALL", Call}, {"PROXY", Proxy}, {"NVLS", Nvls},
    {"BOOTSTRAP", Bootstrap}, {"REG", Reg},   {"PROFILE", Profile}, {"RAS", Ras},   {"ALL", All},
};

// -1 until the environment has been read; then a Level.
constinit std::atomic<int> gLevel{-1};
constinit std::atomic<uint64_t> gMask{0};
constinit std::atomic<bool> gBannerWritten{false};

// Everything below is guarded by outputMutex(): configuration and every line written, so lines
// never interleave and reset() never closes a file under a writer.
struct Output {
  FILE* stream = nullptr;  // stdout or a file we opened
  bool ownsStream = false;
  std::string hostname;
  std::string lastFileName;  // the last NCCL_DEBUG_FILE opened, after expansion
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
};

std::mutex& outputMutex() {
  static std::mutex mutex;
  return mutex;
}

// Never destroyed: threads may log while static destructors run at exit.
Output& output() {
  static Output* state = new Output();
  return *state;
}

thread_local int tThreadDevice = 0;

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string shortHostname() {
  std::string host = hostname();
  if (host.empty()) return "unknown";
  size_t dot = host.find('.');
  if (dot != std::string::npos) host.resize(dot);
  return host;
}

int currentTid() { return static_cast<int>(syscall(SYS_gettid)); }

// __FILE__ is whatever path the build gave the compiler, often absolute. Every file of the
// project is compiled the same way, so stripping the prefix that this file's own path has before
// "base/log.cpp" leaves paths like NCCL's "misc/socket.cc:484".
const char* shortFile(const char* file) {
  if (file == nullptr) return "?";
  static const std::string_view root = [] {
    std::string_view self = __FILE__;
    std::string_view tail = "base/log.cpp";
    return self.ends_with(tail) ? self.substr(0, self.size() - tail.size()) : std::string_view();
  }();
  std::string_view path = file;
  if (!root.empty() && path.starts_with(root)) return file + root.size();
  return file;
}

Level parseLevel(std::string_view text, bool* unknown) {
  *unknown = false;
  text = trimmed(text);
  if (text.empty()) return Level::None;
  if (equalsIgnoringCase(text, "VERSION")) return Level::Version;
  if (equalsIgnoringCase(text, "WARN")) return Level::Warn;
  if (equalsIgnoringCase(text, "INFO")) return Level::Info;
  if (equalsIgnoringCase(text, "ABORT")) return Level::Abort;
  if (equalsIgnoringCase(text, "TRACE")) return Level::Trace;
  *unknown = true;
  return Level::Warn;  // the user asked for output: give at least the warnings
}

}  // namespace

// NCCL's syntax: a comma list of names; a leading ^ means "all but these". Unknown names are
// ignored, as NCCL does.
uint64_t parseSubsysMask(std::string_view text) {
  text = trimmed(text);
  bool exclude = !text.empty() && text.front() == '^';
  if (exclude) text.remove_prefix(1);
  uint64_t mask = exclude ? static_cast<uint64_t>(All) : 0;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view token = trimmed(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    for (const SubsysName& subsys : kSubsysNames) {
      if (!equalsIgnoringCase(token, subsys.name)) continue;
      if (exclude)
        mask &= ~subsys.bits;
      else
        mask |= subsys.bits;
    }
  }
  return mask;
}

// %h: host name (up to the first '.'), %p: pid, %%: a percent sign; other text is kept.
std::string expandDebugFileName(std::string_view pattern, const std::string& hostname, long pid) {
  std::string name;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      name += pattern[i];
      continue;
    }
    char directive = pattern[++i];
    if (directive == 'h')
      name += hostname;
    else if (directive == 'p')
      name += std::to_string(pid);
    else if (directive == '%')
      name += '%';
    else {
      name += '%';
      name += directive;
    }
  }
  return name;
}

namespace {

// Writes one finished line; outputMutex() must be held.
void emitLocked(const std::string& line) {
  FILE* stream = output().stream != nullptr ? output().stream : stdout;
  std::fwrite(line.data(), 1, line.size(), stream);
  std::fflush(stream);
}

std::string prefix(Level level, uint64_t subsys, const char* file, int line) {
  const Output& out = output();
  char head[512];
  int pid = static_cast<int>(getpid());
  int tid = currentTid();
  switch (level) {
    case Level::Warn:
    case Level::Abort:
      std::snprintf(head, sizeof head, "%s:%d:%d [%d] %s:%d NCCL %s ", out.hostname.c_str(), pid, tid, tThreadDevice,
                    shortFile(file), line, level == Level::Warn ? "WARN" : "ABORT");
      break;
    case Level::Info:
      std::snprintf(head, sizeof head, "%s:%d:%d [%d] NCCL INFO ", out.hostname.c_str(), pid, tid, tThreadDevice);
      break;
    case Level::Trace:
      if (subsys == Call) {
        std::snprintf(head, sizeof head, "%s:%d:%d NCCL CALL ", out.hostname.c_str(), pid, tid);
      } else {
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - out.epoch).count();
        std::snprintf(head, sizeof head, "%s:%d:%d [%d] %f %s:%d NCCL TRACE ", out.hostname.c_str(), pid, tid,
                      tThreadDevice, seconds, shortFile(file), line);
      }
      break;
    case Level::Version:
    case Level::None: head[0] = '\0'; break;
  }
  return head;
}

// Where lines go instead of the output, when set (see redirect).
std::atomic<LineSink> gSink{nullptr};

// Reads the environment and (re)opens the output; outputMutex() must be held. Under a sink no
// file is opened (it would truncate the host's) and no banner is written (the host wrote one).
void configureLocked() {
  Output& out = output();
  if (out.ownsStream && out.stream != nullptr) std::fclose(out.stream);
  out.stream = stdout;
  out.ownsStream = false;
  out.hostname = shortHostname();

  bool unknownLevel = false;
  std::string levelText = tunables::kDebug.get();
  Level level = parseLevel(levelText, &unknownLevel);

  std::string subsysText = tunables::kDebugSubsys.get();
  if (trimmed(subsysText).empty()) subsysText = tunables::kDebugSubsys.defaultText();
  uint64_t mask = parseSubsysMask(subsysText);

  std::string failedFile;
  int failedErrno = 0;
  std::string filePattern = tunables::kDebugFile.get();
  const bool redirected = gSink.load() != nullptr;
  if (!redirected && level > Level::None && !filePattern.empty()) {
    std::string fileName = expandDebugFileName(filePattern, out.hostname, static_cast<long>(getpid()));
    // A new file starts empty, but reset() reopening the same file must not erase what this
    // process already wrote to it.
    FILE* file = std::fopen(fileName.c_str(), fileName == out.lastFileName ? "a" : "w");
    if (file != nullptr) {
      // Line-buffered: a crash loses at most the line being written.
      setvbuf(file, nullptr, _IOLBF, 0);
      out.stream = file;
      out.ownsStream = true;
      out.lastFileName = fileName;
    } else {
      failedFile = fileName;
      failedErrno = errno;
    }
  }

  gMask.store(mask, std::memory_order_relaxed);
  gLevel.store(static_cast<int>(level), std::memory_order_release);

  if (!redirected && level >= Level::Version && !gBannerWritten.exchange(true)) {
    // Like NCCL: a bare line at VERSION and WARN, an INFO line above.
    std::string banner = std::string("NCCL version ") + kNcclApiVersion + "+tutti-" + TUTTI_VERSION_STRING;
    std::string head = level >= Level::Info ? prefix(Level::Info, All, nullptr, 0) : std::string();
    emitLocked(head + banner + "\n");
  }
  if (unknownLevel) {
    emitLocked(prefix(Level::Warn, All, __FILE__, __LINE__) + "NCCL_DEBUG=" + levelText +
               ": unknown level (expected VERSION, WARN, INFO, ABORT or TRACE); using WARN\n");
  }
  if (!failedFile.empty()) {
    emitLocked(prefix(Level::Warn, All, __FILE__, __LINE__) + "NCCL_DEBUG_FILE: cannot open " + failedFile + ": " +
               std::strerror(failedErrno) + "; logging to stdout\n");
  }
}

int configuredLevel() {
  int level = gLevel.load(std::memory_order_acquire);
  if (level >= 0) return level;
  std::lock_guard<std::mutex> lock(outputMutex());
  if (gLevel.load(std::memory_order_acquire) < 0) configureLocked();
  return gLevel.load(std::memory_order_acquire);
}

}  // namespace

bool enabled(Level level, uint64_t subsys) {
  int current = gLevel.load(std::memory_order_relaxed);
  if (current < 0) current = configuredLevel();
  return current >= static_cast<int>(level) && (gMask.load(std::memory_order_relaxed) & subsys) != 0;
}

void write(Level level, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  if (level == Level::None || fmt == nullptr || !enabled(level, subsys)) return;

  char small[1024];
  std::string message;
  va_list args;
  va_start(args, fmt);
  va_list retry;
  va_copy(retry, args);
  int length = std::vsnprintf(small, sizeof small, fmt, args);
  va_end(args);
  if (length < 0) {
    message = fmt;  // a bad format: better the raw text than nothing
  } else if (static_cast<size_t>(length) < sizeof small) {
    message.assign(small, static_cast<size_t>(length));
  } else {
    message.resize(static_cast<size_t>(length) + 1);
    std::vsnprintf(message.data(), message.size(), fmt, retry);
    message.resize(static_cast<size_t>(length));
  }
  va_end(retry);
  while (!message.empty() && message.back() == '\n') message.pop_back();

  if (LineSink sink = gSink.load()) {
    sink(level, subsys, file, line, message.c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(outputMutex());
  emitLocked(prefix(level, subsys, file, line) + message + "\n");
}

void redirect(LineSink sink) { gSink.store(sink); }

void setThreadDevice(int device) { tThreadDevice = device; }

void reset() {
  std::lock_guard<std::mutex> lock(outputMutex());
  configureLocked();
}

}  // namespace tutti::log
