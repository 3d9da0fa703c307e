// Finding and opening external net plugins as NCCL 2.28 does: NCCL_NET_PLUGIN names a plugin
// ("name": libnccl-net-name.so), a library file or path, a comma-separated list of these, or
// "none"; unset, libnccl-net.so is used when it can be opened. Each library is opened once per
// process and stays loaded; one that cannot be opened, or exports no interface version tutti
// knows (ncclNetPlugin_v6 to _v12), is skipped with an INFO line naming it and why.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "transports/net/plugin/plugin_net.h"

namespace tutti::transport::net {

// The entries NCCL_NET_PLUGIN's value names, in order (nullopt: unset).
std::vector<std::string> netPluginEntries(const std::optional<std::string>& value);

// The file names dlopen is given for one entry, in order: the entry itself, then
// libnccl-net-<entry>.so unless the entry is a path (has a '/') or a library name (lib*.so).
std::vector<std::string> netPluginFileNames(const std::string& entry);

struct NetPlugin {
  std::string library;  // the file name that opened
  std::shared_ptr<PluginNet> net;
};

// The plugins among `entries` that open (see the top of this file).
std::vector<NetPlugin> openNetPlugins(const std::vector<std::string>& entries);

// The plugins NCCL_NET_PLUGIN names now.
std::vector<NetPlugin> configuredNetPlugins();

}  // namespace tutti::transport::net
