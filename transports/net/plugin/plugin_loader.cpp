// Finding and opening external net plugins (see plugin_loader.h).
#include "transports/net/plugin/plugin_loader.h"

#include <dlfcn.h>

#include <map>
#include <mutex>

#include "base/log.h"
#include "base/text.h"
#include "base/tunables.h"

namespace tutti::transport::net {
namespace {

constexpr const char* kDefaultLibrary = "libnccl-net.so";
constexpr const char* kPrefix = "libnccl-net-";

bool endsWith(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// One entry, opened: the plugin, or nothing (and the INFO line said why). A library that another
// entry opened already is that entry's plugin (initialised once, as NCCL does).
std::optional<NetPlugin> openEntry(const std::string& entry, std::map<void*, NetPlugin>& byLibrary) {
  std::string tried;
  for (const std::string& file : netPluginFileNames(entry)) {
    void* library = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char* why = ::dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (why ? why : file + ": dlopen failed");
      continue;
    }
    if (auto known = byLibrary.find(library); known != byLibrary.end()) {
      ::dlclose(library);  // the other entry's reference keeps it loaded
      return known->second;
    }
    std::unique_ptr<PluginNet> net = findPluginNet(library);
    if (!net) {
      TUTTI_INFO(log::Init | log::Net,
                 "NET/Plugin: %s (from NCCL_NET_PLUGIN entry \"%s\") exports no ncclNetPlugin_v6..v12: skipped",
                 file.c_str(), entry.c_str());
      ::dlclose(library);
      return std::nullopt;
    }
    TUTTI_INFO(log::Init | log::Net, "NET/Plugin: loaded %s: \"%s\", interface v%d", file.c_str(), net->name(),
               net->version());
    // Never closed: comms, requests and threads of the plugin may live until the process ends.
    NetPlugin plugin{file, std::shared_ptr<PluginNet>(std::move(net))};
    byLibrary.emplace(library, plugin);
    return plugin;
  }
  TUTTI_INFO(log::Init | log::Net, "NET/Plugin: NCCL_NET_PLUGIN entry \"%s\" could not be opened, skipped (%s)",
             entry.c_str(), tried.c_str());
  return std::nullopt;
}

}  // namespace

std::vector<std::string> netPluginEntries(const std::optional<std::string>& value) {
  if (!value) return {kDefaultLibrary};
  if (equalsIgnoringCase(*value, "none")) return {};
  std::vector<std::string> entries;
  size_t begin = 0;
  while (begin <= value->size()) {
    size_t end = value->find(',', begin);
    if (end == std::string::npos) end = value->size();
    std::string entry = value->substr(begin, end - begin);
    if (!entry.empty()) entries.push_back(entry);
    begin = end + 1;
  }
  return entries;
}

std::vector<std::string> netPluginFileNames(const std::string& entry) {
  std::vector<std::string> names{entry};
  bool isPath = entry.find('/') != std::string::npos;
  bool isLibraryName = entry.rfind("lib", 0) == 0 && endsWith(entry, ".so");
  if (!isPath && !isLibraryName) names.push_back(kPrefix + entry + ".so");
  return names;
}

std::vector<NetPlugin> openNetPlugins(const std::vector<std::string>& entries) {
  // An entry is opened, and its INFO line written, once per process.
  static std::mutex mutex;
  static std::map<std::string, std::optional<NetPlugin>> opened;
  static std::map<void*, NetPlugin> byLibrary;
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<NetPlugin> plugins;
  for (const std::string& entry : entries) {
    auto it = opened.find(entry);
    if (it == opened.end()) it = opened.emplace(entry, openEntry(entry, byLibrary)).first;
    if (it->second) plugins.push_back(*it->second);
  }
  return plugins;
}

std::vector<NetPlugin> configuredNetPlugins() {
  const params::String& param = tunables::kNetPlugin;
  return openNetPlugins(netPluginEntries(param.isSet() ? std::optional<std::string>(param.get()) : std::nullopt));
}

}  // namespace tutti::transport::net
