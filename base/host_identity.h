// Who we are: this host's name, the hash that tells hosts apart, and the token that tells
// processes apart. Ranks compare these to decide which of them share a node or a process.
#pragma once

#include <cstdint>
#include <string>

namespace tutti {

// This host's name as gethostname() gives it; empty when the system gives none (callers that
// print it choose their own stand-in).
std::string hostname();

// Hosts are told apart by hostname and boot id (a container or a rebooted machine with a reused
// name is another host); NCCL_HOSTID, when set, replaces both.
uint64_t hostHash();

// A token that differs between processes (and between runs), so two ranks can tell whether
// they live in the same process. A forked child draws its own.
uint64_t processToken();

}  // namespace tutti
