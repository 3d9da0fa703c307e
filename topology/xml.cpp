// A small XML reader/writer, and NCCL's topology-file format on top of it.
#include "topology/xml.h"

#include <cerrno>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/text.h"
#include "topology/graph.h"

namespace tutti::topo {

const std::string* XmlElement::attribute(const std::string& key) const { return findAttribute(attributes, key); }

void XmlElement::set(const std::string& key, const std::string& value) { setAttribute(attributes, key, value); }

namespace {

class XmlReader {
 public:
  XmlReader(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  XmlElement document() {
    if (text_.size() > kXmlMaxBytes) fail("file is larger than " + std::to_string(kXmlMaxBytes) + " bytes");
    skipMisc();
    if (pos_ >= text_.size()) fail("no root element");
    XmlElement root = element(1);
    skipMisc();
    if (pos_ < text_.size()) fail("unexpected content after the root element </" + root.name + ">");
    return root;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(ErrorCode::InvalidArgument, source_ + ":" + std::to_string(line_) + ": " + what);
  }

  bool at(const char* literal) const { return text_.compare(pos_, std::strlen(literal), literal) == 0; }

  void advance(size_t count) {
    for (size_t i = 0; i < count && pos_ < text_.size(); ++i) {
      if (text_[pos_++] == '\n') ++line_;
    }
  }

  void skipSpace() {
    while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) && text_[pos_] != '\0') advance(1);
  }

  void skipPast(const char* terminator, const char* what) {
    size_t end = text_.find(terminator, pos_);
    if (end == std::string::npos) fail("unterminated " + std::string(what));
    advance(end + std::strlen(terminator) - pos_);
  }

  // Whitespace, comments, <?...?> and <!DOCTYPE ...> between elements.
  void skipMisc() {
    for (;;) {
      skipSpace();
      if (at("<!--")) {
        skipPast("-->", "comment");
      } else if (at("<?")) {
        skipPast("?>", "processing instruction");
      } else if (at("<!")) {
        skipPast(">", "declaration");
      } else {
        return;
      }
    }
  }

  static bool nameChar(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  }

  std::string name(const char* what) {
    size_t start = pos_;
    if (pos_ < text_.size() && (std::isalpha(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
      while (pos_ < text_.size() && nameChar(text_[pos_])) ++pos_;
    }
    if (pos_ == start) fail("expected " + std::string(what) + describeHere());
    return text_.substr(start, pos_ - start);
  }

  std::string describeHere() const {
    if (pos_ >= text_.size()) return " but the file ended";
    char c = text_[pos_];
    if (std::isprint(static_cast<unsigned char>(c))) return std::string(" but found '") + c + "'";
    return " but found byte " + std::to_string(static_cast<unsigned char>(c));
  }

  void expect(char c, const std::string& context) {
    if (pos_ >= text_.size() || text_[pos_] != c)
      fail("expected '" + std::string(1, c) + "' " + context + describeHere());
    advance(1);
  }

  std::string entity() {
    size_t end = text_.find(';', pos_);
    if (end == std::string::npos || end - pos_ > 10) fail("unterminated entity reference");
    std::string ref = text_.substr(pos_ + 1, end - pos_ - 1);
    advance(end + 1 - pos_);
    static const std::pair<const char*, const char*> named[] = {
        {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
    for (const auto& [k, v] : named) {
      if (ref == k) return v;
    }
    if (ref.size() > 1 && ref[0] == '#') {
      bool hex = ref[1] == 'x' || ref[1] == 'X';
      char* end2 = nullptr;
      const char* digits = ref.c_str() + (hex ? 2 : 1);
      long code = std::strtol(digits, &end2, hex ? 16 : 10);
      if (*digits && *end2 == '\0' && code > 0 && code < 128) return std::string(1, static_cast<char>(code));
    }
    fail("unknown entity '&" + ref + ";'");
  }

  std::string attributeValue() {
    if (pos_ >= text_.size() || (text_[pos_] != '"' && text_[pos_] != '\''))
      fail("expected a quoted attribute value" + describeHere());
    char quote = text_[pos_];
    advance(1);
    std::string value;
    for (;;) {
      if (pos_ >= text_.size()) fail("unterminated attribute value");
      char c = text_[pos_];
      if (c == quote) break;
      if (c == '<') fail("'<' inside an attribute value");
      if (c == '&') {
        value += entity();
      } else {
        value += c;
        advance(1);
      }
    }
    advance(1);
    return value;
  }

  void attributes(XmlElement& element) {
    for (;;) {
      skipSpace();
      if (pos_ >= text_.size()) fail("unterminated tag <" + element.name + ">");
      if (text_[pos_] == '/' || text_[pos_] == '>') return;
      std::string key = name("an attribute name or '>'");
      skipSpace();
      expect('=', "after attribute " + key);
      skipSpace();
      if (element.attribute(key)) fail("attribute '" + key + "' repeated in <" + element.name + ">");
      element.attributes.emplace_back(key, attributeValue());
    }
  }

  XmlElement element(int depth) {
    if (depth > kXmlMaxDepth) fail("elements nested deeper than " + std::to_string(kXmlMaxDepth));
    if (++elements_ > kXmlMaxElements) fail("more than " + std::to_string(kXmlMaxElements) + " elements");
    XmlElement element;
    element.line = line_;
    expect('<', "to open an element");
    element.name = name("an element name");
    attributes(element);
    if (at("/>")) {
      advance(2);
      return element;
    }
    expect('>', "to close the tag <" + element.name + ">");
    content(element, depth);
    return element;
  }

  void content(XmlElement& element, int depth) {
    for (;;) {
      size_t next = text_.find('<', pos_);
      if (next == std::string::npos) {
        advance(text_.size() - pos_);
        fail("element <" + element.name + "> (line " + std::to_string(element.line) + ") is never closed");
      }
      advance(next - pos_);  // text content carries nothing in this format
      if (at("</")) {
        advance(2);
        std::string closing = name("an element name after '</'");
        if (closing != element.name) {
          fail("</" + closing + "> closes <" + element.name + "> opened on line " + std::to_string(element.line));
        }
        skipSpace();
        expect('>', "to end </" + closing);
        return;
      }
      if (at("<!--") || at("<?") || at("<!")) {
        skipMisc();
        continue;
      }
      element.children.push_back(this->element(depth + 1));
    }
  }

  const std::string& text_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
  int elements_ = 0;
};

std::string escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

void write(const XmlElement& element, int depth, std::string& out) {
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "<" + element.name;
  for (const auto& [k, v] : element.attributes) out += " " + k + "=\"" + escape(v) + "\"";
  if (element.children.empty()) {
    out += "/>\n";
    return;
  }
  out += ">\n";
  for (const XmlElement& child : element.children) write(child, depth + 1, out);
  out.append(static_cast<size_t>(depth) * 2, ' ');
  out += "</" + element.name + ">\n";
}

// A whole decimal integer ("-1", "42"; not "4x", " 4" or "+4"); nullopt otherwise.
std::optional<long long> parseInteger(const std::string& text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  auto [at, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || at != end) return std::nullopt;
  return value;
}

// A leading number ("16.0" of "16.0 GT/s PCIe"), which must end the text or be followed by a
// space when `unitsFollow`; nullopt otherwise.
std::optional<double> parseNumber(const std::string& text, bool unitsFollow) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return std::nullopt;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value)) return std::nullopt;
  if (*end != '\0' && !(unitsFollow && *end == ' ')) return std::nullopt;
  return value;
}

// A CPU mask as NCCL writes it: 32-bit hex groups separated by commas ("ffffffff,00000000").
bool isCpuMask(const std::string& text) {
  if (text.empty() || text.front() == ',' || text.back() == ',' || text.find(",,") != std::string::npos) return false;
  for (char c : text) {
    if (c != ',' && !std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Builds the graph from NCCL's element tree. Values the importer reads are checked here, each
// against what NCCL itself writes, so that a file NCCL produced loads and a broken one is an
// error naming its line, element and attribute rather than a silently wrong graph. Attributes
// the importer only carries through (vendor, device, guid, gdr, ...) are not checked.
class TopologyImporter {
 public:
  TopologyImporter(NodeSystem& system, const std::string& source) : system_(system), source_(source) {}

  void system(const XmlElement& root) {
    if (root.name != "system") fail(root, "the root element is <" + root.name + ">, expected <system>");
    const std::string* version = root.attribute("version");
    if (version && *version != "1")
      warn(root, "<system version=\"" + *version + "\">: only version 1 is known; reading on");
    if (const std::string* host = root.attribute("hostname")) system_.hostname = *host;
    if (const std::string* boot = root.attribute("bootid")) system_.bootId = *boot;
    for (const XmlElement& child : root.children) {
      if (child.name == "cpu") {
        cpu(child);
      } else {
        ignore(child, "<system>");
      }
    }
  }

 private:
  [[noreturn]] void fail(const XmlElement& at, const std::string& what) const {
    throw Error(ErrorCode::InvalidArgument, source_ + ":" + std::to_string(at.line) + ": " + what);
  }
  void warn(const XmlElement& at, const std::string& what) {
    system_.warnings.push_back(source_ + ":" + std::to_string(at.line) + ": " + what);
  }
  void ignore(const XmlElement& at, const std::string& where) {
    warn(at, "unknown element <" + at.name + "> in " + where + " ignored");
  }

  const std::string& required(const XmlElement& element, const char* key) {
    const std::string* value = element.attribute(key);
    if (!value || value->empty()) fail(element, "<" + element.name + "> has no " + key + " attribute");
    return *value;
  }

  [[noreturn]] void badValue(const XmlElement& element, const char* key, const std::string& what) const {
    fail(element, "<" + element.name + "> attribute " + key + "=\"" + *element.attribute(key) + "\" " + what);
  }

  // A whole number of at least `least`; nullopt when the attribute is absent.
  std::optional<int> integer(const XmlElement& element, const char* key, int least) const {
    const std::string* text = element.attribute(key);
    if (!text) return std::nullopt;
    std::optional<long long> value = parseInteger(*text);
    if (!value || *value > INT_MAX || *value < INT_MIN) badValue(element, key, "is not a whole number");
    if (*value < least) {
      badValue(element, key,
               least == 0   ? "is negative"
               : least == 1 ? "is not a positive number"
                            : "is less than " + std::to_string(least));
    }
    return static_cast<int>(*value);
  }

  int requiredInteger(const XmlElement& element, const char* key, int least) {
    required(element, key);
    return *integer(element, key, least);
  }

  const std::string& busId(const XmlElement& element, const char* key) {
    const std::string& value = required(element, key);
    if (!isBusId(value)) badValue(element, key, "is not a PCI bus id (domain:bus:device.function, like 0000:07:00.0)");
    return value;
  }

  // link_speed and link_width feed the PCI bandwidth. NCCL copies link_speed from sysfs and
  // falls back to a default for any string it does not know; sysfs says "Unknown" (or nothing)
  // in VMs, and link_width 0 means unknown too. Those fall back to kDefaultPciBandwidth quietly,
  // as in NCCL; anything else must read as a rate and a lane count.
  void pciLink(const XmlElement& element) {
    if (const std::string* speed = element.attribute("link_speed")) {
      std::optional<double> rate =
          speed->empty() || startsWithIgnoringCase(*speed, "unknown") ? 0.0 : parseNumber(*speed, true);
      if (!rate) badValue(element, "link_speed", "is not a PCIe rate (like \"16.0 GT/s PCIe\" or \"Unknown\")");
      if (*rate < 0) badValue(element, "link_speed", "is negative");
    }
    integer(element, "link_width", 0);
  }

  void cpu(const XmlElement& element) {
    Node node;
    node.kind = NodeKind::Cpu;
    // NCCL writes numaid -1 when the NUMA node is unknown.
    node.name = "cpu" + std::to_string(requiredInteger(element, "numaid", -1));
    // Not read here, but checked: a dump written back carries it, and NCCL parses it as a mask.
    const std::string* affinity = element.attribute("affinity");
    if (affinity && !affinity->empty() && !isCpuMask(*affinity)) {
      badValue(element, "affinity", "is not a CPU mask (comma-separated hex digits, like ffffffff,00000000)");
    }
    node.attributes = element.attributes;
    if (!seen_.insert(node.name).second) fail(element, "two <cpu> elements with numaid " + required(element, "numaid"));
    int index = system_.graph.addNode(std::move(node));
    for (const XmlElement& child : element.children) attached(child, index, "<cpu>");
  }

  void attached(const XmlElement& element, int parent, const std::string& where) {
    if (element.name == "pci") {
      pci(element, parent);
    } else if (element.name == "nic") {
      nic(element, parent, Node{});
    } else {
      ignore(element, where);
    }
  }

  void pci(const XmlElement& element, int parent) {
    Node node;
    node.name = normalizeBusId(busId(element, "busid"));
    pciLink(element);
    node.attributes = element.attributes;
    node.parent = parent;
    if (!seen_.insert(node.name).second) fail(element, "PCI bus id " + node.name + " appears twice");
    const XmlElement* gpuElement = nullptr;
    const XmlElement* nicElement = nullptr;
    for (const XmlElement& child : element.children) {
      if (child.name == "gpu" && !gpuElement) gpuElement = &child;
      if (child.name == "nic" && !nicElement) nicElement = &child;
    }
    if (gpuElement) {
      gpu(*gpuElement, std::move(node));
    } else if (nicElement) {
      nic(*nicElement, parent, std::move(node));
    } else {
      node.kind = NodeKind::PciSwitch;
      int index = system_.graph.addNode(std::move(node));
      for (const XmlElement& child : element.children)
        attached(child, index, "<pci busid=\"" + system_.graph.node(index).name + "\">");
      return;
    }
    for (const XmlElement& child : element.children) {
      if (&child != gpuElement && &child != nicElement) ignore(child, "an endpoint <pci>");
    }
  }

  void gpu(const XmlElement& element, Node node) {
    node.kind = NodeKind::Gpu;
    // dev orders the GPUs and rank names the process on them: both unique on a node. NCCL
    // requires sm and rank as well; files written for tests often leave them out.
    int dev = requiredInteger(element, "dev", 0);
    if (!gpuDevs_.insert(dev).second) fail(element, "two <gpu> elements with dev " + std::to_string(dev));
    if (std::optional<int> rank = integer(element, "rank", 0); rank && !gpuRanks_.insert(*rank).second) {
      fail(element, "two <gpu> elements with rank " + std::to_string(*rank));
    }
    integer(element, "sm", 0);
    node.deviceAttributes = element.attributes;
    for (const XmlElement& child : element.children) {
      if (child.name != "nvlink") {
        ignore(child, "<gpu>");
        continue;
      }
      NvLinkSpec spec;
      spec.count = integer(child, "count", 1).value_or(1);
      spec.target = busId(child, "target");
      // tclass is only compared with NVSwitch's class: any other value means "not a switch".
      const std::string* tclass = child.attribute("tclass");
      spec.targetClass = tclass ? *tclass : "";
      node.nvlinks.push_back(spec);
    }
    system_.graph.addNode(std::move(node));
  }

  // `node` carries the PCI function's attributes, or nothing for a <nic> straight under <cpu>.
  void nic(const XmlElement& element, int parent, Node node) {
    node.kind = NodeKind::Nic;
    node.parent = parent;
    int index = system_.graph.addNode(std::move(node));
    for (const XmlElement& child : element.children) {
      if (child.name != "net") {
        ignore(child, "<nic>");
        continue;
      }
      Node net;
      net.kind = NodeKind::Net;
      net.name = required(child, "name");
      netDevAndSpeed(child);
      net.attributes = child.attributes;
      net.parent = index;
      system_.graph.addNode(std::move(net));
    }
  }

  // dev orders the ports (ring c uses port c mod K), so it is unique on a node. NCCL treats a
  // speed <= 0 as unknown ("some NICs define speed = -1") and assumes 10 Gb/s; so do we, with a
  // warning. Other negative speeds are no NCCL marker and are errors.
  void netDevAndSpeed(const XmlElement& element) {
    if (std::optional<int> dev = integer(element, "dev", 0); dev && !netDevs_.insert(*dev).second) {
      fail(element, "two <net> elements with dev " + std::to_string(*dev));
    }
    const std::string* speed = element.attribute("speed");
    std::optional<double> mbps = speed ? parseNumber(*speed, false) : 0.0;
    if (!mbps) badValue(element, "speed", "is not a number of Mb/s");
    if (*mbps < 0 && *mbps != -1) badValue(element, "speed", "is negative (only -1, \"unknown\", is allowed)");
    if (*mbps <= 0) {
      warn(element, "<net name=\"" + required(element, "name") + "\">: speed " +
                        (speed ? "\"" + *speed + "\" is unknown" : "missing") + "; assuming " +
                        std::to_string(static_cast<long>(kUnknownNetSpeed)) + " Mb/s");
    }
  }

  NodeSystem& system_;
  const std::string& source_;
  std::set<std::string> seen_;  // CPU and PCI names, which must be unique
  std::set<int> gpuDevs_, gpuRanks_, netDevs_;
};

using ChildLists = std::vector<std::vector<int>>;

XmlElement exportNode(const TopologyGraph& graph, const ChildLists& below, int index);

XmlElement exportChildren(const TopologyGraph& graph, const ChildLists& below, int index, XmlElement element) {
  for (int child : below[index]) element.children.push_back(exportNode(graph, below, child));
  return element;
}

XmlElement exportNode(const TopologyGraph& graph, const ChildLists& below, int index) {
  const Node& node = graph.node(index);
  XmlElement element;
  element.attributes = node.attributes;
  switch (node.kind) {
    case NodeKind::Cpu: element.name = "cpu"; return exportChildren(graph, below, index, std::move(element));
    case NodeKind::PciSwitch: element.name = "pci"; return exportChildren(graph, below, index, std::move(element));
    case NodeKind::Gpu: {
      element.name = "pci";
      XmlElement gpu{"gpu", node.deviceAttributes, {}, 0};
      for (const NvLinkSpec& spec : node.nvlinks) {
        XmlElement link{"nvlink", {{"target", spec.target}, {"count", std::to_string(spec.count)}}, {}, 0};
        if (!spec.targetClass.empty()) link.set("tclass", spec.targetClass);
        gpu.children.push_back(std::move(link));
      }
      element.children.push_back(std::move(gpu));
      return element;
    }
    case NodeKind::Nic: {
      XmlElement nic = exportChildren(graph, below, index, XmlElement{"nic", {}, {}, 0});
      if (node.name.empty()) return nic;
      element.name = "pci";
      element.children.push_back(std::move(nic));
      return element;
    }
    case NodeKind::Net: element.name = "net"; return element;
    case NodeKind::NvSwitch: break;
  }
  throw Error(ErrorCode::Internal, "topology export: node " + node.name + " has no XML form");
}

}  // namespace

XmlElement parseXml(const std::string& text, const std::string& source) { return XmlReader(text, source).document(); }

std::string writeXml(const XmlElement& root) {
  std::string out;
  write(root, 0, out);
  return out;
}

NodeSystem importTopologyXml(const XmlElement& root, const std::string& source) {
  NodeSystem system;
  TopologyImporter(system, source).system(root);
  system.graph.buildLinks(system.warnings);
  return system;
}

XmlElement exportTopologyXml(const NodeSystem& system) {
  XmlElement root{"system", {{"version", "1"}}, {}, 0};
  if (!system.hostname.empty()) root.set("hostname", system.hostname);
  if (!system.bootId.empty()) root.set("bootid", system.bootId);
  ChildLists below(system.graph.nodes().size());
  for (size_t i = 0; i < below.size(); ++i) {
    int parent = system.graph.node(static_cast<int>(i)).parent;
    if (parent >= 0) below[parent].push_back(static_cast<int>(i));
  }
  for (int cpu : system.graph.nodesOf(NodeKind::Cpu)) root.children.push_back(exportNode(system.graph, below, cpu));
  return root;
}

NodeSystem loadTopologyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::System, "topology file " + path + ": cannot open: " + std::strerror(errno));
  std::string text;
  char buffer[65536];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kXmlMaxBytes)
      throw Error(ErrorCode::InvalidArgument,
                  path + ": file is larger than " + std::to_string(kXmlMaxBytes) + " bytes");
  }
  return importTopologyXml(parseXml(text, path), path);
}

void saveTopologyFile(const NodeSystem& system, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorCode::System, "topology file " + path + ": cannot create: " + std::strerror(errno));
  out << writeXml(exportTopologyXml(system));
  out.flush();
  if (!out) throw Error(ErrorCode::System, "topology file " + path + ": write failed: " + std::strerror(errno));
}

}  // namespace tutti::topo
