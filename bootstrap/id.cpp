// ncclUniqueId: making one (a fresh root and a random secret, or NCCL_COMM_ID's fixed root), and
// its byte layout.
#include "bootstrap/id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/network_interface.h"
#include "base/socket.h"
#include "base/tunables.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"

namespace tutti::bootstrap {

namespace wire {

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

}  // namespace wire

namespace {

using namespace wire;

Secret randomSecret() {
  Secret secret{};
  uint8_t* bytes = reinterpret_cast<uint8_t*>(secret.data());
  size_t filled = 0;
  while (filled < sizeof secret) {
    ssize_t count = getrandom(bytes + filled, sizeof secret - filled, 0);
    if (count < 0) {
      if (errno == EINTR) continue;
      throwSystemError("ncclGetUniqueId: getrandom for the bootstrap secret", errno);
    }
    filled += static_cast<size_t>(count);
  }
  return secret;
}

}  // namespace

void getUniqueId(ncclUniqueId* id) {
  if (id == nullptr) throw Error(ErrorCode::InvalidArgument, "ncclGetUniqueId: uniqueId is null");
  UniqueIdContents contents;
  std::string commId = tunables::kCommId.get();
  if (!commId.empty()) {
    try {
      contents.root = SocketAddress::parse(commId);
    } catch (const Error& error) {
      throw Error(ErrorCode::InvalidUsage, "NCCL_COMM_ID=" + commId + ": " + error.message());
    }
    if (contents.root.port() == 0)
      throw Error(ErrorCode::InvalidUsage, "NCCL_COMM_ID=" + commId + ": the port must not be 0");
    contents.secret = kCommIdSecret;
    contents.fromCommId = true;
    encodeUniqueId(contents, id);
    return;
  }
  newUniqueId(id);
}

void newUniqueId(ncclUniqueId* id) {
  if (id == nullptr) throw Error(ErrorCode::InvalidArgument, "bootstrap: the unique id to fill is null");
  UniqueIdContents contents;
  double timeoutSeconds = configuredTimeoutSeconds();
  NetworkInterface interface = findNetworkInterfaces().front();
  Socket listener = Socket::listen(interface.address);
  contents.root = listener.localAddress();
  contents.secret = randomSecret();
  bootstrap::startRoot(std::move(listener), contents.secret, timeoutSeconds);
  encodeUniqueId(contents, id);
}

}  // namespace tutti::bootstrap
