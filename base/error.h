// tutti's one internal error type: a code from a small taxonomy and a message with context.
#pragma once

#include <exception>
#include <string>

namespace tutti {

// The taxonomy. The C boundary (runtime/api_*.cpp) maps it to ncclResult_t in one place.
enum class ErrorCode {
  Internal,         // a bug in tutti
  System,           // the OS refused something (socket, mmap, shm, thread)
  InvalidArgument,  // a bad value passed by the caller
  InvalidUsage,     // a call that is not allowed now, or not supported yet
  Remote,           // a peer failed, vanished, or sent something wrong
  Timeout,          // a bounded wait ran out (a peer never arrived or stopped moving)
  Aborted,          // ncclCommAbort (or an earlier fatal error) ended the operation
};

const char* errorCodeName(ErrorCode code);

class Error : public std::exception {
 public:
  Error(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  ErrorCode code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string message_;
};

// "<strerror(err)> (errno <err>)".
std::string errnoText(int err);

// Throws ErrorCode::System with "<what>: <errnoText(err)>".
[[noreturn]] void throwSystemError(const std::string& what, int err);

}  // namespace tutti
