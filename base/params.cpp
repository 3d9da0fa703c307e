// The parameter registry: one row per tunable, and the accessors that read and parse them.
#include "base/params.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/error.h"
#include "base/text.h"

namespace tutti::params {

namespace {

// One table, in the order tutti-info --env prints it: NCCL's names first, then ours.
// Defaults are text so the table reads like the environment a user would write.
const std::vector<Param> kParams = {
    {"NCCL_DEBUG", Type::String, "",
     "log level: VERSION, WARN, INFO, ABORT or TRACE (unset: no output)"},
    {"NCCL_DEBUG_SUBSYS", Type::String, "INIT,BOOTSTRAP,ENV",
     "subsystems logged at INFO/TRACE: comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, "
     "ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS or ALL; ^ excludes"},
    {"NCCL_DEBUG_FILE", Type::String, "",
     "write the log to this file instead of stdout; %h expands to the host name, %p to the pid"},
    {"NCCL_COMM_ID", Type::String, "",
     "host:port of a fixed bootstrap root, instead of the one ncclGetUniqueId opens"},
    {"NCCL_SOCKET_IFNAME", Type::String, "",
     "network interfaces to use: prefix list, ^ excludes, = matches exactly (unset: automatic)"},
    {"NCCL_SOCKET_FAMILY", Type::String, "",
     "address family of sockets: AF_INET or AF_INET6 (unset: either)"},
    {"NCCL_NET", Type::String, "",
     "network backend by name: Socket (unset: the first that works)"},
    {"NCCL_SOCKET_NTHREADS", Type::Int, "1",
     "Socket backend: helper threads per connection, each driving NCCL_NSOCKS_PERTHREAD sockets "
     "(1: the proxy thread drives them; sockets at most 64)"},
    {"NCCL_NSOCKS_PERTHREAD", Type::Int, "1",
     "Socket backend: sockets per group; a message is striped over all sockets of a connection"},
    {"NCCL_ALGO", Type::String, "",
     "algorithms the selector may use: a list (ring, tree, pat, ... or a custom plan file's "
     "names), ^ to exclude, per collective as 'allreduce:tree,ring;broadcast:ring' (case-insensitive)"},
    {"NCCL_PROTO", Type::String, "",
     "protocols the selector may use: Simple (LL and LL128 are not implemented yet); ^ excludes"},
    {"NCCL_TOPO_FILE", Type::String, "",
     "an NCCL topology XML file describing this node, used instead of discovery"},
    {"NCCL_TOPO_DUMP_FILE", Type::String, "",
     "write this node's topology (as discovered or loaded) to this file, in NCCL's XML format"},
    {"NCCL_BUFFSIZE", Type::Size, "4194304",
     "bytes of FIFO per connection (K, M, G suffixes accepted); unset with TUTTI_NSTEPS, a communicator whose "
     "ranks are each alone on their node uses 4 slots of 1 MiB"},
    {"NCCL_MIN_NCHANNELS", Type::Int, "1", "fewest channels a communicator uses"},
    {"NCCL_MAX_NCHANNELS", Type::Int, "2", "most channels a communicator uses (host mode default)"},
    {"NCCL_SHM_DISABLE", Type::Bool, "0",
     "1: no shared-memory connections between processes of a node (use the network)"},
    {"NCCL_P2P_DISABLE", Type::Bool, "0",
     "1: no direct in-process connections between rank threads (use shared memory or network)"},
    {"NCCL_COMM_BLOCKING", Type::Bool, "1", "default of ncclConfig_t.blocking"},
    {"NCCL_HOSTID", Type::String, "",
     "overrides the host identity that decides which ranks share a node"},
    {"TUTTI_DEVICE", Type::String, "auto",
     "device backend: auto (cuda when a device is usable, else host), host or cuda"},
    {"TUTTI_BOOTSTRAP_TIMEOUT", Type::Int, "120",
     "seconds the bootstrap waits for every rank before failing"},
    {"TUTTI_TIMEOUT", Type::Int, "300",
     "seconds an operation may make no progress before it fails naming the peer it waits for"},
    {"TUTTI_ALGO_FILE", Type::String, "",
     "custom algorithms: plan files (':'-separated), verified at init and selectable by name"},
    {"TUTTI_DETERMINISTIC", Type::Bool, "0",
     "1: only algorithms with a fixed reduction order, so results are bitwise identical across runs "
     "and message sizes for a given rank count, type and op (slower: see the README)"},
    {"TUTTI_NET_LINK_TIMEOUT", Type::Int, "15",
     "seconds a network connection may leave data unacknowledged (or keepalive probes unanswered) "
     "before it counts as broken, so a cut link fails in seconds (0: the kernel's defaults)"},
    {"TUTTI_NET_REQUIRE", Type::String, "",
     "network backend that must be used: init fails instead of falling back to another"},
    {"TUTTI_NSTEPS", Type::Int, "8",
     "FIFO slots per connection; an operation under 32 slots' worth is cut into chunks of half a slot, down to 512 KiB"},
    {"TUTTI_NTHREADS", Type::Int, "0",
     "host worker threads per communicator (0: one per channel); never more than the channels"},
    {"TUTTI_SPIN", Type::Int, "200",
     "busy-poll iterations before a wait yields (unset: 20 when a host's ranks outnumber its cores)"},
    {"TUTTI_YIELD", Type::Int, "50",
     "polls that yield the CPU (sched_yield) after the busy polls, before a wait sleeps (unset: 50; 0 "
     "where a communicator spans hosts and its ranks outnumber their cores, so proxy threads carry the network)"},
    {"TUTTI_CALIBRATE", Type::Bool, "1",
     "1: measure the host fabric at init (handoff between ranks, copy and reduce bandwidth, cores) for "
     "the selector's cost model; 0: fixed default figures (every rank takes them when the ranks differ)"},
};

const Param& find(const char* name) {
  for (const Param& param : kParams)
    if (std::strcmp(param.name, name) == 0) return param;
  throw Error(ErrorCode::Internal,
              std::string("parameter ") + name + " is not in the registry (base/params.cpp)");
}

// A numeric variable set to the empty string counts as unset, as in NCCL; for a string the
// empty value is a value (NCCL_DEBUG= turns logging off).
const char* environmentValue(const Param& param) {
  const char* value = std::getenv(param.name);
  if (value != nullptr && value[0] == '\0' && param.type != Type::String) return nullptr;
  return value;
}

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

[[noreturn]] void throwBadValue(const Param& param, const char* value, const char* expected) {
  throw Error(ErrorCode::InvalidUsage, std::string(param.name) + "=" + value + ": " + expected);
}

// strtoll over the whole text (decimal, or 0x hex as NCCL accepts); false when something is
// left over or the value does not fit.
bool parseInteger(std::string_view text, int64_t* out, std::string_view* rest) {
  std::string copy(text);
  if (copy.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(copy.c_str(), &end, 0);
  if (end == copy.c_str() || errno == ERANGE) return false;
  *out = value;
  *rest = text.substr(static_cast<size_t>(end - copy.c_str()));
  return true;
}

int64_t parseInt(const Param& param, const char* value) {
  int64_t result = 0;
  std::string_view rest;
  if (!parseInteger(trimmed(value), &result, &rest) || !rest.empty())
    throwBadValue(param, value, "not an integer");
  return result;
}

int64_t parseSize(const Param& param, const char* value) {
  const char* expected = "not a size (expected bytes, optionally with K, M or G)";
  int64_t number = 0;
  std::string_view rest;
  if (!parseInteger(trimmed(value), &number, &rest) || number < 0) throwBadValue(param, value, expected);
  int shift = 0;
  if (!rest.empty()) {
    switch (std::toupper(static_cast<unsigned char>(rest.front()))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: throwBadValue(param, value, expected);
    }
    rest.remove_prefix(1);
    // "4MB" and "4MiB" mean what the user thinks they mean.
    if (equalsIgnoringCase(rest, "B") || equalsIgnoringCase(rest, "iB")) rest = {};
    if (!rest.empty()) throwBadValue(param, value, expected);
  }
  if (number > (INT64_MAX >> shift)) throwBadValue(param, value, "size too large");
  return number << shift;
}

int64_t parseBool(const Param& param, const char* value) {
  std::string_view text = trimmed(value);
  for (std::string_view yes : {"1", "true", "yes", "on"})
    if (equalsIgnoringCase(text, yes)) return 1;
  for (std::string_view no : {"0", "false", "no", "off"})
    if (equalsIgnoringCase(text, no)) return 0;
  throwBadValue(param, value, "not a boolean (expected 0, 1, true, false, yes or no)");
}

}  // namespace

const std::vector<Param>& all() { return kParams; }

int64_t getInt(const char* name) {
  const Param& param = find(name);
  const char* value = environmentValue(param);
  if (value == nullptr) value = param.defaultValue;
  switch (param.type) {
    case Type::Int: return parseInt(param, value);
    case Type::Size: return parseSize(param, value);
    case Type::Bool: return parseBool(param, value);
    case Type::String: break;
  }
  throw Error(ErrorCode::Internal,
              std::string("parameter ") + name + " is a string; read it with params::getString");
}

std::string getString(const char* name) {
  const Param& param = find(name);
  const char* value = environmentValue(param);
  return value != nullptr ? value : param.defaultValue;
}

bool isSet(const char* name) { return environmentValue(find(name)) != nullptr; }

const char* source(const char* name) { return isSet(name) ? "environment" : "default"; }

}  // namespace tutti::params
