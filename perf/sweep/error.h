// The perf tool's error: a code and a message. perf is a client of the public API alone, so it
// keeps this small type of its own rather than borrow the library's internal one.
#pragma once

#include <exception>
#include <string>
#include <utility>

namespace tutti::perf {

enum class ErrorCode {
  InvalidArgument,  // a bad flag or value on the command line or in the environment
  InvalidUsage,     // a combination this run cannot serve (world size, build without MPI, ...)
  System,           // the OS or an NCCL call refused something
  Remote,           // an NCCL call reported a failed peer
  Timeout,          // a wait ran out (the unique id file, init)
};

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

}  // namespace tutti::perf
