// The transport interface's own small parts.
#include "transports/transport.h"

namespace tutti::transport {

const char* localityName(Locality locality) {
  switch (locality) {
    case Locality::SameProcess: return "in this process";
    case Locality::SameHost: return "on this host";
    case Locality::OtherHost: return "on another host";
  }
  return "?";
}

namespace {

// An attach that was done at once: its one step hands the connection over.
class MadeSend final : public PendingSend {
 public:
  explicit MadeSend(std::unique_ptr<Connection> connection) : connection_(std::move(connection)) {}
  std::unique_ptr<Connection> poll(SteadyTime) override { return std::move(connection_); }

 private:
  std::unique_ptr<Connection> connection_;
};

}  // namespace

std::unique_ptr<PendingSend> PendingSend::made(std::unique_ptr<Connection> connection) {
  return std::make_unique<MadeSend>(std::move(connection));
}

}  // namespace tutti::transport
