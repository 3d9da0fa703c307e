// The C boundary: exporting each pnccl symbol with its weak nccl alias, converting tutti::Error
// to ncclResult_t in one place, recording the thread's last error, and checking arguments.
#pragma once

#include <string>

#include "base/error.h"
#include "nccl.h"

#define TUTTI_API extern "C" __attribute__((visibility("default")))
// Defines nccl<Name> as a weak alias of pnccl<Name>, as NVIDIA's library does, so profilers
// and shims can interpose on either.
#define TUTTI_NCCL_ALIAS(name) \
  extern "C" __attribute__((weak, alias("p" #name), visibility("default"))) __typeof__(p##name) name;

namespace tutti {

ncclResult_t toNcclResult(ErrorCode code);

// Runs body; maps any exception to a result, records its message for ncclGetLastError and
// logs it at WARN. Never lets an exception out.
template <typename Body>
ncclResult_t guard(const char* operation, Body&& body);

void setLastError(const std::string& message);
ncclResult_t failCall(const char* operation, const Error& error);

// Argument checks shared by the entry points; each throws InvalidArgument/InvalidUsage naming
// the operation and the rank.
void checkComm(const char* operation, const ncclComm* comm);  // live, not aborted
void checkUsableComm(const char* operation, ncclComm* comm);  // also initialised, not failed
void checkType(const char* operation, const ncclComm* comm, ncclDataType_t type);
void checkOp(const char* operation, ncclComm* comm, ncclRedOp_t op, ncclDataType_t type);
void checkRank(const char* operation, const ncclComm* comm, int rank, const char* what);
// A buffer of `count` elements of eltSize bytes: not null when count > 0, and usable by the
// communicator's backend (device memory for the cuda backend).
void checkBuffer(const char* operation, const ncclComm* comm, const void* buffer, size_t count, size_t eltSize,
                 const char* what);
void checkStream(const char* operation, const ncclComm* comm, cudaStream_t stream);

template <typename Body>
ncclResult_t guard(const char* operation, Body&& body) {
  try {
    body();
    return ncclSuccess;
  } catch (const Error& e) {
    return failCall(operation, e);
  } catch (const std::bad_alloc&) {
    return failCall(operation, Error(ErrorCode::System, std::string(operation) + ": out of host memory"));
  } catch (const std::exception& e) {
    return failCall(operation, Error(ErrorCode::Internal, std::string(operation) + ": " + e.what()));
  } catch (...) {
    return failCall(operation, Error(ErrorCode::Internal, std::string(operation) + ": unknown exception"));
  }
}

}  // namespace tutti
