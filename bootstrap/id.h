// What an ncclUniqueId holds: the root's address, the job's secret, and whether it came from
// NCCL_COMM_ID; its byte layout is part of the bootstrap's wire format.
#pragma once

#include "base/socket_address.h"
#include "bootstrap/wire.h"
#include "nccl.h"

namespace tutti::bootstrap::wire {

inline constexpr uint64_t kUniqueIdMagic = 0x3144494954545554ull;  // "TUTTIID1"

// The secret carried by ids made from NCCL_COMM_ID. A fixed address has no channel to hand out a
// random secret, so such jobs run with this well-known value: frames are still checked for shape
// and size, but anyone who can reach the root can join. Use ncclGetUniqueId for a real secret.
inline constexpr Secret kCommIdSecret = {0x4e4f2d5345435245ull, 0x542d434f4d4d4944ull};

// What an ncclUniqueId made by getUniqueId holds. Throws InvalidArgument when the bytes
// are not such an id.
struct UniqueIdContents {
  SocketAddress root;
  Secret secret{};
  bool fromCommId = false;  // made from NCCL_COMM_ID: rank 0's process starts the root
};
UniqueIdContents decodeUniqueId(const ncclUniqueId& id);
void encodeUniqueId(const UniqueIdContents& contents, ncclUniqueId* id);

}  // namespace tutti::bootstrap::wire
