// Resolving a call's reduction for the executor (redop.h).
#include "runtime/launch/redop.h"

#include <cstring>
#include <mutex>

#include "kernels/backend.h"
#include "kernels/dtypes.h"
#include "kernels/host_reduce.h"
#include "runtime/comm/comm.h"

namespace tutti {

namespace {

double scalarAsDouble(ncclDataType_t type, uint64_t bits) {
  switch (type) {
    case ncclFloat16: return kern::half_t{uint16_t(bits)}.toFloat();
    case ncclBfloat16: return kern::bf16_t{uint16_t(bits)}.toFloat();
    case ncclFloat8e4m3: return kern::fp8e4m3_t{uint8_t(bits)}.toFloat();
    case ncclFloat8e5m2: return kern::fp8e5m2_t{uint8_t(bits)}.toFloat();
    case ncclFloat32: {
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case ncclFloat64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    default: return 0;
  }
}

}  // namespace

kern::RedOp resolveRedOp(ncclComm* comm, ncclDataType_t type, ncclRedOp_t op, const void** deviceScalar) {
  *deviceScalar = nullptr;
  kern::RedOp r;
  const bool floating = kern::dtypeIsFloating(type);
  switch (op) {
    case ncclSum: r.kind = kern::RedKind::Sum; return r;
    case ncclProd: r.kind = kern::RedKind::Prod; return r;
    case ncclMax: r.kind = kern::RedKind::Max; return r;
    case ncclMin: r.kind = kern::RedKind::Min; return r;
    case ncclAvg:
      if (floating) {
        r.kind = kern::RedKind::PreMulSum;
        r.floatScalar = 1.0 / comm->identity.nranks;
      } else {
        r.kind = kern::RedKind::SumPostDiv;
        r.intScalar = uint64_t(comm->identity.nranks);
      }
      return r;
    default: break;
  }
  UserRedOp user;
  {
    std::lock_guard<std::mutex> lock(comm->redops.mutex);
    user = comm->redops.ops.at(size_t(op) - ncclNumOps);
  }
  r.kind = kern::RedKind::PreMulSum;
  uint64_t bits = user.hostValue;
  if (user.residence == ncclScalarDevice) {
    if (comm->executor.backend->readsDeviceScalars()) {
      // Read by the executor when the operation runs, in stream order, as NCCL does.
      *deviceScalar = user.pointer;
      return r;
    }
    bits = 0;
    std::memcpy(&bits, user.pointer, kern::dtypeSize(type));
  }
  if (floating)
    r.floatScalar = scalarAsDouble(type, bits);
  else
    r.intScalar = bits;
  return r;
}

}  // namespace tutti
