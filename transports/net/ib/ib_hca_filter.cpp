// NCCL_IB_HCA parsing and matching.
#include "transports/net/ib/ib_hca_filter.h"

#include <cstdlib>

#include "base/error.h"

namespace tutti::transport::net::ib {

HcaFilter::HcaFilter(const std::string& spec) {
  size_t at = 0;
  if (at < spec.size() && spec[at] == '^') exclude_ = true, ++at;
  if (at < spec.size() && spec[at] == '=') exact_ = true, ++at;
  while (at < spec.size()) {
    size_t end = spec.find(',', at);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    Entry e;
    size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      char* stop = nullptr;
      long port = std::strtol(item.c_str() + colon + 1, &stop, 10);
      if (stop == item.c_str() + colon + 1 || *stop != '\0' || port < 1 || port > 255)
        throw Error(ErrorCode::InvalidArgument, "NCCL_IB_HCA=" + spec + ": '" + item + "' has no valid port number");
      e.port = int(port);
    }
    entries_.push_back(e);
  }
}

bool HcaFilter::accepts(const std::string& device, int port) const {
  if (entries_.empty()) return true;
  bool listed = false;
  for (const Entry& e : entries_) {
    bool nameMatches = exact_ ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (nameMatches && (e.port < 0 || e.port == port)) listed = true;
  }
  return listed != exclude_;
}

}  // namespace tutti::transport::net::ib
