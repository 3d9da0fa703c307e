// The stand-in's knobs (read from TUTTI_STRICT_PLUGIN_*), its messages on stderr, its registry.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/net_plugin_standin/strict_plugin.h"

namespace strict {
namespace {

struct KnobName {
  Knob knob;
  const char* name;
};
constexpr KnobName kKnobNames[] = {{kConnect, "CONNECT"},      {kAccept, "ACCEPT"},           {kNoSizes, "NO_SIZES"},
                                   {kNoGoodbye, "NO_GOODBYE"}, {kReorder, "REORDER"},         {kBusy, "BUSY"},
                                   {kExpire, "EXPIRE"},        {kBlockAccept, "BLOCK_ACCEPT"}};

bool flagSet(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
}

void report(const char* kind, const char* call, const char* fmt, va_list args) {
  char text[1024];
  std::vsnprintf(text, sizeof text, fmt, args);
  // One write, so that lines of concurrent ranks do not interleave.
  std::fprintf(stderr, "NET/Strict %s: %s: %s\n", kind, call, text);
}

}  // namespace

Knobs readKnobs() {
  Knobs knobs;
  const bool all = flagSet("TUTTI_STRICT_PLUGIN_ALL");
  for (const KnobName& k : kKnobNames)
    if ((all && k.knob != kBlockAccept) || flagSet(("TUTTI_STRICT_PLUGIN_" + std::string(k.name)).c_str()))
      knobs.on |= k.knob;
  // With every knob on, a caller gets the fewest receives per irecv.
  knobs.maxRecvs = all ? 1 : kMaxRecvsLimit;
  if (const char* value = std::getenv("TUTTI_STRICT_PLUGIN_MAXRECVS")) {
    const int n = std::atoi(value);
    if (n >= 1 && n <= kMaxRecvsLimit)
      knobs.maxRecvs = n;
    else
      std::fprintf(stderr, "NET/Strict: TUTTI_STRICT_PLUGIN_MAXRECVS=%s is not 1 to %d: keeping %d\n", value,
                   kMaxRecvsLimit, knobs.maxRecvs);
  }
  return knobs;
}

std::string describe(const Knobs& knobs) {
  std::string text;
  for (const KnobName& k : kKnobNames)
    if (knobs.has(k.knob)) text += (text.empty() ? "" : "+") + std::string(k.name);
  if (text.empty()) text = "no strictness knob";
  return text + ", maxRecvs " + std::to_string(knobs.maxRecvs);
}

ncclResult_t misuse(ncclResult_t code, const char* call, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  report("misuse", call, fmt, args);
  va_end(args);
  return code;
}

ncclResult_t failure(const char* call, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  report("failure", call, fmt, args);
  va_end(args);
  return ncclSystemError;
}

Registry& registry() {
  static Registry* instance = new Registry();  // never destroyed: calls may come during exit
  return *instance;
}

void retire(Request* request) {
  Registry& r = registry();
  r.requests.erase(request);
  r.freed.push_back(request);
  r.freedSet.insert(request);
  constexpr size_t kKeptFreed = 4096;
  if (r.freed.size() > kKeptFreed) {
    Request* oldest = r.freed.front();
    r.freed.pop_front();
    r.freedSet.erase(oldest);
    delete oldest;
  }
}

ncclResult_t unsupported(const char* call) {
  return misuse(ncclInternalError, call, "not offered by this plugin (no device offload, no virtual devices)");
}

}  // namespace strict
