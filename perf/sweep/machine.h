// Facts about the machine a rank runs on, for the "# Using devices" lines and the fingerprint.
#pragma once

#include <string>

namespace tutti::perf {

std::string hostName();
// The CPU model from /proc/cpuinfo, "unknown" when it does not say.
std::string cpuModel();
// The CPUs the calling thread may run on, as ranges ("0-3,6").
std::string cpuAffinity();
// Local time as "2025-01-31 12:00:00" (-S's timestamps).
std::string nowString();

}  // namespace tutti::perf
