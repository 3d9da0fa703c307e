// ncclUniqueId's byte layout.
#include "runtime/bootstrap_id.h"

#include <cstring>

#include "base/error.h"

namespace tutti {

namespace bootstrap_wire {

namespace {

struct UniqueIdLayout {
  uint64_t magic;
  uint64_t secret[2];
  uint32_t flags;
  uint32_t reserved;
  uint8_t root[SocketAddress::kWireBytes];
};
static_assert(sizeof(UniqueIdLayout) <= sizeof(ncclUniqueId));
constexpr uint32_t kFlagFromCommId = 1;

}  // namespace

UniqueIdContents decodeUniqueId(const ncclUniqueId& id) {
  UniqueIdLayout layout;
  std::memcpy(&layout, &id, sizeof layout);
  if (layout.magic != kUniqueIdMagic)
    throw Error(ErrorCode::InvalidArgument,
                "ncclUniqueId was not made by ncclGetUniqueId (bad magic); was it copied to every rank?");
  UniqueIdContents contents;
  contents.root = SocketAddress::fromWire(layout.root);
  if (contents.root.empty() || contents.root.port() == 0)
    throw Error(ErrorCode::InvalidArgument, "ncclUniqueId holds no bootstrap root address");
  contents.secret = {layout.secret[0], layout.secret[1]};
  contents.fromCommId = (layout.flags & kFlagFromCommId) != 0;
  return contents;
}

void encodeUniqueId(const UniqueIdContents& contents, ncclUniqueId* id) {
  UniqueIdLayout layout{};
  layout.magic = kUniqueIdMagic;
  layout.secret[0] = contents.secret[0];
  layout.secret[1] = contents.secret[1];
  layout.flags = contents.fromCommId ? kFlagFromCommId : 0;
  contents.root.toWire(layout.root);
  std::memset(id, 0, sizeof *id);
  std::memcpy(id, &layout, sizeof layout);
}

}  // namespace bootstrap_wire

}  // namespace tutti
