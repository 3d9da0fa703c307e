// tutti's net interface over an external plugin: listen / connect / accept polled to completion
// within the caller's deadline, isend / irecv / test over the plugin's requests, registrations as
// the plugin's memory handles.
#pragma once

#include <memory>
#include <string>

#include "transports/net/net.h"
#include "transports/net/plugin/plugin_net.h"

namespace tutti::transport::net {

// Initialises the plugin (once per process before v11, per backend from v11) and checks that it
// has a device that takes host memory (tutti's proxy moves host FIFOs). Throws System naming the
// plugin and `library` when it does not initialise or has no such device.
std::unique_ptr<NetBackend> makePluginBackend(std::shared_ptr<PluginNet> plugin, const std::string& library);

}  // namespace tutti::transport::net
