// Names of error codes and the errno-carrying helper.
#include "base/error.h"

#include <cstring>

namespace tutti {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::Internal: return "internal error";
    case ErrorCode::System: return "system error";
    case ErrorCode::InvalidArgument: return "invalid argument";
    case ErrorCode::InvalidUsage: return "invalid usage";
    case ErrorCode::Remote: return "remote error";
    case ErrorCode::Timeout: return "timeout";
    case ErrorCode::Aborted: return "aborted";
  }
  return "unknown error";
}

std::string errnoText(int err) {
  char buf[256];
  const char* text = strerror_r(err, buf, sizeof buf);
  return std::string(text) + " (errno " + std::to_string(err) + ")";
}

void throwSystemError(const std::string& what, int err) {
  throw Error(ErrorCode::System, what + ": " + errnoText(err));
}

}  // namespace tutti
