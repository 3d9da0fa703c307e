// The transport interface's own small parts.
#include "transports/transport.h"

namespace tutti {

const char* localityName(Locality locality) {
  switch (locality) {
    case Locality::SameProcess: return "in this process";
    case Locality::SameHost: return "on this host";
    case Locality::OtherHost: return "on another host";
  }
  return "?";
}

}  // namespace tutti
