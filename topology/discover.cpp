// Discovery: hwloc (CPUs, NUMA, PCI bridges), sysfs (NICs), CUDA and NVML through dlopen (GPUs).
#include "topology/discover.h"

#include "topology/xml.h"

#include <dlfcn.h>
#include <hwloc.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "base/host_identity.h"
#include "base/tunables.h"

namespace tutti::topo {

namespace {

namespace fs = std::filesystem;

std::string readLine(const fs::path& file) { return readFirstLine(file.string()); }

// "dddd:bb:dd.f" (domain of 4 to 8 hex digits). Written out rather than with std::regex, which
// GCC 12 warns about (-Wmaybe-uninitialized) in sanitizer builds.
std::string hex(unsigned value, int digits) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%0*x", digits, value);
  return text;
}

// What discovery has found so far, and how to hang a PCI device in the graph.
class Discovery {
 public:
  explicit Discovery(const DiscoveryOptions& options) : options_(options) {}

  NodeSystem run() {
    identity();
    if (options_.useHwloc) loadHwloc();
    cpus();
    if (options_.useCuda) gpus();
    nics();
    system_.graph.buildLinks(system_.warnings);
    return std::move(system_);
  }

  void warn(const std::string& text) { system_.warnings.push_back(text); }
  void note(const std::string& text) { system_.notes.push_back(text); }
  TopologyGraph& graph() { return system_.graph; }

  void identityOnly(NodeSystem& system) {
    identity();
    system.hostname = system_.hostname;
    system.bootId = system_.bootId;
    system.warnings.insert(system.warnings.end(), system_.warnings.begin(), system_.warnings.end());
    system.notes.insert(system.notes.end(), system_.notes.begin(), system_.notes.end());
  }

 private:
  void identity() {
    system_.hostname = hostname();
    if (system_.hostname.empty()) {
      warn("hostname unavailable; using \"localhost\"");
      system_.hostname = "localhost";
    }
    system_.bootId = readLine(fs::path(options_.procRoot) / "sys/kernel/random/boot_id");
    if (system_.bootId.empty()) {
      warn("no boot id in " + options_.procRoot +
           "/sys/kernel/random/boot_id; the hostname alone identifies this node");
      system_.bootId = "unknown";
    }
  }

  // --- hwloc ------------------------------------------------------------------------------

  struct TopologyDeleter {
    void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
  };

  void loadHwloc() {
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) {
      warn("hwloc: topology init failed; CPU and PCI layout unknown");
      return;
    }
    hwloc_.reset(raw);
    hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(raw) != 0) {
      warn("hwloc: topology load failed; CPU and PCI layout unknown");
      hwloc_.reset();
    }
  }

  void cpus() {
    int count = hwloc_ ? hwloc_get_nbobjs_by_type(hwloc_.get(), HWLOC_OBJ_NUMANODE) : 0;
    for (int i = 0; i < count; ++i) {
      hwloc_obj_t numa = hwloc_get_obj_by_type(hwloc_.get(), HWLOC_OBJ_NUMANODE, i);
      addCpu(static_cast<int>(numa->os_index), affinity(numa->cpuset));
      numaSets_.push_back(numa->cpuset);
    }
    if (count == 0) {
      if (hwloc_) note("hwloc found no NUMA node; assuming one CPU");
      addCpu(0, "");
    }
  }

  static std::string affinity(hwloc_const_bitmap_t set) {
    char text[1024] = {};
    if (!set || hwloc_bitmap_snprintf(text, sizeof text, set) < 0) return "";
    std::string out;
    for (const char* p = text; *p; ++p) {  // NCCL writes the words without 0x
      if (p[0] == '0' && p[1] == 'x')
        ++p;
      else
        out += *p;
    }
    return out;
  }

  void addCpu(int numaId, const std::string& mask) {
    Node cpu;
    cpu.kind = NodeKind::Cpu;
    cpu.name = "cpu" + std::to_string(numaId);
    cpu.attributes = {{"numaid", std::to_string(numaId)}};
    if (!mask.empty()) cpu.attributes.emplace_back("affinity", mask);
    struct utsname names {};
    if (uname(&names) == 0) cpu.attributes.emplace_back("arch", names.machine);
    for (const auto& [key, value] : cpuIdentity()) cpu.attributes.emplace_back(key, value);
    cpuByNuma_[numaId] = graph().addNode(std::move(cpu));
  }

  std::vector<std::pair<std::string, std::string>> cpuIdentity() const {
    std::ifstream in(fs::path(options_.procRoot) / "cpuinfo");
    std::map<std::string, std::string> found;
    static const std::pair<const char*, const char*> wanted[] = {
        {"vendor_id", "vendor"}, {"cpu family", "familyid"}, {"model", "modelid"}};
    for (std::string line; std::getline(in, line) && found.size() < 3;) {
      size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
      for (const auto& [source, attribute] : wanted) {
        if (key == source && !found.count(attribute)) found[attribute] = line.substr(std::min(colon + 2, line.size()));
      }
    }
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& [source, attribute] : wanted) {
      if (found.count(attribute)) out.emplace_back(attribute, found[attribute]);
    }
    return out;
  }

  int cpuForNuma(int numa) {
    auto it = cpuByNuma_.find(numa);
    if (it != cpuByNuma_.end()) return it->second;
    return cpuByNuma_.begin()->second;
  }

  // The CPU and the PCI switches above a device. As NCCL does, a switch is its upstream
  // port: the bridges just above a device and above each switch (downstream ports, the root
  // port) are skipped.
  // `numaHint`: the NUMA node sysfs gives for the device, used when hwloc does not know it.
  int placeDevice(const std::string& busId, int numaHint) {
    hwloc_obj_t device = findPci(busId);
    if (!device) return cpuForNuma(numaHint);
    std::vector<hwloc_obj_t> bridges;
    for (hwloc_obj_t at = device->parent; at && at->type == HWLOC_OBJ_BRIDGE; at = at->parent) {
      if (at->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) break;
      bridges.push_back(at);
    }
    int parent = cpuForNuma(numaOf(device, numaHint));
    for (size_t i = bridges.size(); i-- > 0;) {
      if (i % 2 == 1) parent = addSwitch(bridges[i], parent);
    }
    return parent;
  }

  hwloc_obj_t findPci(const std::string& busId) const {
    unsigned domain = 0, bus = 0, dev = 0, func = 0;
    if (!hwloc_ || std::sscanf(busId.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &func) != 4) return nullptr;
    return hwloc_get_pcidev_by_busid(hwloc_.get(), domain, bus, dev, func);
  }

  int numaOf(hwloc_obj_t device, int numaHint) {
    hwloc_obj_t ancestor = hwloc_get_non_io_ancestor_obj(hwloc_.get(), device);
    for (size_t i = 0; ancestor && i < numaSets_.size(); ++i) {
      if (hwloc_bitmap_intersects(ancestor->cpuset, numaSets_[i])) {
        return static_cast<int>(hwloc_get_obj_by_type(hwloc_.get(), HWLOC_OBJ_NUMANODE, static_cast<int>(i))->os_index);
      }
    }
    return numaHint;
  }

  // A device directory's numa_node; -1 (what single-socket machines and VMs report) when unknown.
  static int sysfsNuma(const fs::path& deviceDir) {
    std::string text = readLine(deviceDir / "numa_node");
    return text.empty() ? -1 : std::atoi(text.c_str());
  }

  int addSwitch(hwloc_obj_t bridge, int parent) {
    const auto& pci = bridge->attr->bridge.upstream.pci;
    char id[32];
    std::snprintf(id, sizeof id, "%04x:%02x:%02x.%x", pci.domain, pci.bus, pci.dev, pci.func);
    int existing = graph().find(NodeKind::PciSwitch, id);
    if (existing >= 0) return existing;
    Node node = pciNode(NodeKind::PciSwitch, id, parent);
    return graph().addNode(std::move(node));
  }

  // A PCI function's NCCL attributes, from sysfs.
  Node pciNode(NodeKind kind, const std::string& busId, int parent) const {
    Node node;
    node.kind = kind;
    node.name = normalizeBusId(busId);
    node.parent = parent;
    node.attributes = pciAttributes(busId, (fs::path(options_.sysRoot) / "bus/pci/devices" / busId).string());
    return node;
  }

  // --- GPUs ----------------------------------------------------------------------------------

  struct Library {
    void* handle = nullptr;
    explicit Library(const char* name) : handle(dlopen(name, RTLD_NOW | RTLD_LOCAL)) {}
    ~Library() {
      if (handle) dlclose(handle);
    }
    Library(const Library&) = delete;
    Library& operator=(const Library&) = delete;
    template <typename F>
    F symbol(const char* name) const {
      return handle ? reinterpret_cast<F>(dlsym(handle, name)) : nullptr;
    }
  };

  struct CudaGpu {
    int dev;
    std::string busId;
    int sm;
    bool gdr;
  };

  std::vector<CudaGpu> cudaGpus() {
    Library cuda(tunables::kCudaLibrary.get().c_str());
    using Init = int (*)(unsigned);
    using Count = int (*)(int*);
    using Get = int (*)(int*, int);
    using BusId = int (*)(char*, int, int);
    using Attribute = int (*)(int*, int, int);
    auto init = cuda.symbol<Init>("cuInit");
    auto count = cuda.symbol<Count>("cuDeviceGetCount");
    auto get = cuda.symbol<Get>("cuDeviceGet");
    auto busId = cuda.symbol<BusId>("cuDeviceGetPCIBusId");
    auto attribute = cuda.symbol<Attribute>("cuDeviceGetAttribute");
    // No driver is the normal state of a CPU-only host (host mode), not an odd entry: no warning.
    if (!cuda.handle) return {};
    int n = 0;
    if (!init || !count || !get || !busId || !attribute || init(0) != 0 || count(&n) != 0) {
      warn("CUDA driver present but not usable (cuInit failed): no GPUs");
      return {};
    }
    std::vector<CudaGpu> out;
    for (int i = 0; i < n; ++i) {
      int device = 0, major = 0, minor = 0, gdr = 0;
      char id[64] = {};
      if (get(&device, i) != 0 || busId(id, sizeof id, device) != 0) {
        warn("CUDA device " + std::to_string(i) + ": no PCI bus id; skipped");
        continue;
      }
      if (id[0] == '\0') continue;    // no place on a PCI bus (the emulated driver's devices, unless given one)
      attribute(&major, 75, device);  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
      attribute(&minor, 76, device);
      if (attribute(&gdr, 116, device) != 0) gdr = 0;  // ..._GPU_DIRECT_RDMA_SUPPORTED
      out.push_back({i, normalizeBusId(id), major * 10 + minor, gdr != 0});
    }
    return out;
  }

  void gpus() {
    for (const CudaGpu& found : cudaGpus()) {
      int numa = sysfsNuma(fs::path(options_.sysRoot) / "bus/pci/devices" / found.busId);
      Node gpu = pciNode(NodeKind::Gpu, found.busId, placeDevice(found.busId, numa));
      gpu.deviceAttributes = {{"dev", std::to_string(found.dev)},
                              {"sm", std::to_string(found.sm)},
                              {"rank", std::to_string(found.dev)},
                              {"gdr", found.gdr ? "1" : "0"}};
      graph().addNode(std::move(gpu));
    }
    if (!graph().nodesOf(NodeKind::Gpu).empty()) nvlinks();
  }

  struct NvmlPciInfo {  // nvmlPciInfo_t, whose layout NVML keeps stable
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
  };

  void nvlinks() {
    Library nvml("libnvidia-ml.so.1");
    using Init = int (*)();
    using Handle = int (*)(const char*, void**);
    using State = int (*)(void*, unsigned, int*);
    using Remote = int (*)(void*, unsigned, NvmlPciInfo*);
    using RemoteType = int (*)(void*, unsigned, int*);
    auto init = nvml.symbol<Init>("nvmlInit_v2");
    auto shutdown = nvml.symbol<Init>("nvmlShutdown");
    auto handle = nvml.symbol<Handle>("nvmlDeviceGetHandleByPciBusId_v2");
    auto state = nvml.symbol<State>("nvmlDeviceGetNvLinkState");
    auto remote = nvml.symbol<Remote>("nvmlDeviceGetNvLinkRemotePciInfo_v2");
    auto remoteType = nvml.symbol<RemoteType>("nvmlDeviceGetNvLinkRemoteDeviceType");
    if (!init || !handle || !state || !remote || init() != 0) {
      warn("NVML (libnvidia-ml.so.1) not usable: NVLinks unknown, GPUs talk over PCI");
      return;
    }
    for (int index : graph().nodesOf(NodeKind::Gpu)) gpuNvlinks(graph().node(index), handle, state, remote, remoteType);
    if (shutdown) shutdown();
  }

  template <typename Handle, typename State, typename Remote, typename RemoteType>
  void gpuNvlinks(Node& gpu, Handle handle, State state, Remote remote, RemoteType remoteType) {
    void* device = nullptr;
    if (handle(gpu.name.c_str(), &device) != 0) {
      warn("NVML does not know GPU " + gpu.name + "; its NVLinks are unknown");
      return;
    }
    std::map<std::string, NvLinkSpec> peers;      // links to one peer are counted, as NCCL lists them
    for (unsigned link = 0; link < 18; ++link) {  // NVML_NVLINK_MAX_LINKS
      int active = 0, type = 0;
      NvmlPciInfo info{};
      if (state(device, link, &active) != 0 || !active || remote(device, link, &info) != 0) continue;
      if (!remoteType || remoteType(device, link, &type) != 0) type = 0;
      std::string target = normalizeBusId(info.busId);
      auto [it, added] = peers.try_emplace(target, NvLinkSpec{target, 0, ""});
      it->second.count += 1;
      it->second.targetClass = type == 2 ? "0x068000" : type == 1 ? "0x068001" : "0x030200";
    }
    for (auto& [target, spec] : peers) gpu.nvlinks.push_back(spec);
  }

  // --- NICs ----------------------------------------------------------------------------------

  static bool skippedInterface(const std::string& name) {
    for (const char* prefix : {"docker", "virbr", "veth", "br-"}) {
      if (name.rfind(prefix, 0) == 0) return true;
    }
    return name == "lo";
  }

  // The PCI function behind an interface: the last bus id on its device's resolved path
  // (virtio and similar put a bus of their own below the PCI function).
  std::string interfaceBusId(const fs::path& interface) {
    std::error_code error;
    fs::path device = fs::canonical(interface / "device", error);
    if (error) return "";
    std::string found;
    for (const fs::path& part : device) {
      if (isBusId(part.string())) found = part.string();
    }
    return found;
  }

  double interfaceSpeed(const fs::path& interface, const std::string& name) {
    std::string text = readLine(interface / "speed");
    long speed = text.empty() ? -1 : std::atol(text.c_str());
    if (speed <= 0) {
      note("interface " + name + ": speed " + (text.empty() ? "unreadable" : text) + " in sysfs; assuming 10000 Mb/s");
      return 10000;
    }
    return static_cast<double>(speed);
  }

  void nics() {
    fs::path root = fs::path(options_.sysRoot) / "class/net";
    std::error_code error;
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(root, error)) {
      std::error_code ignored;  // bonding_masters and similar are files, not interfaces
      if (fs::is_directory(entry.path(), ignored)) names.push_back(entry.path().filename().string());
    }
    if (error) warn("cannot list " + root.string() + ": " + error.message() + "; no NICs");
    std::sort(names.begin(), names.end());
    int dev = 0;
    for (const std::string& name : names) {
      if (!skippedInterface(name)) addInterface(root / name, name, dev++);
    }
  }

  void addInterface(const fs::path& interface, const std::string& name, int dev) {
    double speed = interfaceSpeed(interface, name);
    std::string busId = interfaceBusId(interface);
    int nic = busId.empty() ? -1 : graph().find(NodeKind::Nic, normalizeBusId(busId));
    if (busId.empty()) {
      note("interface " + name + ": no PCI device in sysfs (virtual?); placed under CPU " +
           graph().node(cpuForNuma(-1)).name);
      Node node;
      node.kind = NodeKind::Nic;
      node.parent = cpuForNuma(-1);
      nic = graph().addNode(std::move(node));
    } else if (nic < 0) {
      int numa = sysfsNuma(interface / "device");
      if (numa < 0 && cpuByNuma_.size() > 1)
        note("interface " + name + ": no numa_node in sysfs; placed by hwloc or under CPU 0");
      nic = graph().addNode(pciNode(NodeKind::Nic, busId, placeDevice(busId, numa)));
    }
    Node net;
    net.kind = NodeKind::Net;
    net.name = name;
    net.parent = nic;
    net.attributes = {{"name", name},
                      {"dev", std::to_string(dev)},
                      {"speed", std::to_string(static_cast<long>(speed))},
                      {"port", "1"},
                      {"guid", hex(static_cast<unsigned>(dev), 1)},
                      {"maxconn", "65536"},
                      {"gdr", "0"}};
    graph().addNode(std::move(net));
  }

  const DiscoveryOptions& options_;
  NodeSystem system_;
  std::unique_ptr<hwloc_topology, TopologyDeleter> hwloc_;
  std::vector<hwloc_const_cpuset_t> numaSets_;
  std::map<int, int> cpuByNuma_;
};

}  // namespace

std::string readFirstLine(const std::string& file) {
  std::ifstream in(file);
  std::string line;
  if (in) std::getline(in, line);
  return line;
}

Attributes pciAttributes(const std::string& busId, const std::string& directory) {
  Attributes attributes = {{"busid", normalizeBusId(busId)}};
  static const std::pair<const char*, const char*> files[] = {{"class", "class"},
                                                              {"vendor", "vendor"},
                                                              {"device", "device"},
                                                              {"subsystem_vendor", "subsystem_vendor"},
                                                              {"subsystem_device", "subsystem_device"},
                                                              {"current_link_speed", "link_speed"},
                                                              {"current_link_width", "link_width"}};
  for (const auto& [file, attribute] : files) {
    std::string value = readLine(fs::path(directory) / file);
    if (!value.empty()) attributes.emplace_back(attribute, value);
  }
  return attributes;
}

NodeSystem discoverNode(const DiscoveryOptions& options) { return Discovery(options).run(); }

NodeSystem localSystem(const std::string& topoFile, const std::string& dumpFile, const DiscoveryOptions& options) {
  NodeSystem system;
  if (topoFile.empty()) {
    system = discoverNode(options);
  } else {
    system = loadTopologyFile(topoFile);
    Discovery(options).identityOnly(system);  // the file describes hardware, not which host this is
  }
  if (!dumpFile.empty()) saveTopologyFile(system, dumpFile);
  return system;
}

}  // namespace tutti::topo
