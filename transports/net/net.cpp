// The registry of net backends and the choice among the plugins and them (NCCL_NET,
// TUTTI_NET_REQUIRE).
#include "transports/net/net.h"

#include <mutex>
#include <utility>

#include "base/error.h"
#include "base/log.h"
#include "base/text.h"
#include "transports/net/ib/ib_backend.h"
#include "transports/net/plugin/plugin_backend.h"
#include "transports/net/plugin/plugin_loader.h"
#include "transports/net/socket/socket_backend.h"

namespace tutti::transport::net {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<std::pair<std::string, NetBackendFactory>> backends;
};

// Built-in backends are listed here rather than by static initialisers, which a static link
// would drop.
Registry& registry() {
  // IB comes after Socket, unlike NCCL: it has run only against a software verbs stand-in, so it is
  // used where NCCL_NET=IB asks for it, never by default.
  static Registry r{{}, {{"Socket", makeSocketBackend}, {"IB", makeIbBackend}}};
  return r;
}

}  // namespace

void registerNetBackend(const std::string& name, NetBackendFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  for (auto& [existing, f] : r.backends)
    if (equalsIgnoringCase(existing, name)) {
      f = std::move(factory);
      return;
    }
  r.backends.emplace_back(name, std::move(factory));
}

std::vector<std::string> netBackendNames() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  for (auto& [name, f] : r.backends) names.push_back(name);
  return names;
}

std::unique_ptr<NetBackend> openNetBackend(const std::string& requested, const std::string& required) {
  // The plugins first, in NCCL_NET_PLUGIN's order (as NCCL prefers an external plugin), then the
  // built-in backends.
  std::vector<std::pair<std::string, NetBackendFactory>> all;
  for (NetPlugin& plugin : configuredNetPlugins())
    all.emplace_back(plugin.net->name(), [plugin] { return makePluginBackend(plugin.net, plugin.library); });
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    all.insert(all.end(), r.backends.begin(), r.backends.end());
  }
  std::vector<std::pair<std::string, NetBackendFactory>> candidates;
  std::string known;
  std::string wanted = !required.empty() ? required : requested;
  for (auto& entry : all) {
    known += (known.empty() ? "" : ", ") + entry.first;
    if (wanted.empty() || equalsIgnoringCase(entry.first, wanted)) candidates.push_back(entry);
  }
  if (!wanted.empty() && candidates.empty())
    throw Error(ErrorCode::InvalidUsage, std::string(!required.empty() ? "TUTTI_NET_REQUIRE" : "NCCL_NET") + "=" +
                                             wanted + ": no such network backend (available: " + known +
                                             "; plugins are those NCCL_NET_PLUGIN loaded, see NCCL_DEBUG_SUBSYS=NET)");
  std::string reasons;
  for (auto& [name, factory] : candidates) {
    try {
      std::unique_ptr<NetBackend> backend = factory();
      TUTTI_INFO(log::Net, "NET: using backend %s", name.c_str());
      return backend;
    } catch (const Error& e) {
      // A required backend must not be replaced by another; the first failure is the answer.
      if (!required.empty() || !requested.empty()) throw;
      reasons += (reasons.empty() ? "" : "; ") + name + ": " + e.message();
      TUTTI_INFO(log::Net, "NET: backend %s is not usable: %s", name.c_str(), e.what());
    }
  }
  throw Error(ErrorCode::System, "no usable network backend (" + reasons + ")");
}

}  // namespace tutti::transport::net
