// A small XML reader/writer and NCCL's topology-file format (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "topology/graph.h"

namespace tutti::topo {

// One element: attributes keep their order so a file written back reads like the original.
struct XmlElement {
  std::string name;
  Attributes attributes;
  std::vector<XmlElement> children;
  int line = 0;

  const std::string* attribute(const std::string& key) const;
  void set(const std::string& key, const std::string& value);
};

// Limits that keep a hostile or corrupt file from exhausting memory or the stack.
inline constexpr size_t kXmlMaxBytes = 16u << 20;
inline constexpr int kXmlMaxDepth = 64;
inline constexpr int kXmlMaxElements = 65536;  // a large node's dump has a few hundred

// Parses a document with one root element. Throws tutti::Error naming `source`, the line and
// what was wrong. Comments, processing instructions (<?xml ...?>) and DOCTYPE are skipped.
XmlElement parseXml(const std::string& text, const std::string& source);
std::string writeXml(const XmlElement& root);

// NCCL's format: <system version="1"><cpu ...><pci ...><gpu ...><nvlink .../></gpu></pci>
// <nic><net .../></nic></cpu></system>. Unknown elements and attributes produce warnings on
// the system, never errors; missing required parts (a GPU without a PCI parent's busid, a
// net without a name) are errors naming the line.
NodeSystem importTopologyXml(const XmlElement& root, const std::string& source);
XmlElement exportTopologyXml(const NodeSystem& system);

NodeSystem loadTopologyFile(const std::string& path);
void saveTopologyFile(const NodeSystem& system, const std::string& path);

}  // namespace tutti::topo
