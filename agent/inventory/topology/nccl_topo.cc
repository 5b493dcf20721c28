#include "agent/inventory/topology/nccl_topo.h"

#include <tinyxml2.h>

#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/common/strings.h"
#include "agent/hostfs/host_fs.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/inventory/topology/topology.h"

namespace fabric {
namespace {

// tinyxml2 stops at 500 levels itself; NCCL's files are a handful deep.
constexpr int kMaxDepth = 64;

// "DDDD:BB:DD.F" as NCCL prints it (int64ToBusId), lower case; empty when malformed. The
// project's one PCI address parser, held to the long form NCCL writes (no short or nvidia-smi
// form, no blanks).
std::string CanonicalBusId(std::string_view id) {
  absl::StatusOr<std::string> c = ParsePciAddress(id);
  if (!c.ok() || *c != absl::AsciiStrToLower(Av(id))) return "";
  return *std::move(c);
}

struct Walk {
  v1::NcclTopology out;
  std::map<std::string, int> lines;  // busid -> line of its element
  absl::Status status;
};

void Visit(const tinyxml2::XMLElement& e, std::vector<std::string>* path, std::optional<int> numa,
           int depth, Walk* w) {
  if (!w->status.ok()) return;
  if (depth > kMaxDepth) {
    w->status = absl::InvalidArgumentError(
        absl::StrCat("elements nest deeper than ", kMaxDepth, " at line ", e.GetLineNum()));
    return;
  }
  const char* name = e.Name();
  bool pushed = false;
  if (std::strcmp(name, "cpu") == 0) {
    const char* id = e.Attribute("numaid");
    int n = 0;
    if (id != nullptr && absl::SimpleAtoi(id, &n) && n >= 0) {
      numa = n;
      path->push_back(absl::StrCat("cpu ", n));
    } else {
      numa.reset();
      // Without a numaid, two <cpu>s are still two: the line tells them apart.
      path->push_back(absl::StrCat("cpu ? (line ", e.GetLineNum(), ")"));
    }
    pushed = true;
  } else if (std::strcmp(name, "pci") == 0) {
    const char* raw = e.Attribute("busid");
    const std::string id = raw == nullptr ? "" : CanonicalBusId(raw);
    if (id.empty()) {
      w->status = absl::InvalidArgumentError(
          raw == nullptr ? absl::StrCat("a <pci> element without busid at line ", e.GetLineNum())
                         : absl::StrCat("busid \"", raw, "\" at line ", e.GetLineNum(),
                                        " is not a PCI address (DDDD:BB:DD.F)"));
      return;
    }
    auto [it, fresh] = w->lines.emplace(id, e.GetLineNum());
    if (!fresh) {
      w->status = absl::InvalidArgumentError(absl::StrCat(
          "busid ", id, " appears twice (lines ", it->second, " and ", e.GetLineNum(), ")"));
      return;
    }
    if (w->out.devices_size() >= kMaxNcclTopoDevices) {
      w->status = absl::InvalidArgumentError(
          absl::StrCat("more than ", kMaxNcclTopoDevices, " <pci> elements"));
      return;
    }
    v1::NcclTopoDevice* d = w->out.add_devices();
    d->set_bus_id(id);
    for (const std::string& p : *path) d->add_path(p);
    if (numa) d->set_numa_node(*numa);
    path->push_back(absl::StrCat("pci ", id));
    pushed = true;
  }
  for (const tinyxml2::XMLElement* c = e.FirstChildElement(); c != nullptr;
       c = c->NextSiblingElement()) {
    Visit(*c, path, numa, depth + 1, w);
  }
  if (pushed) path->pop_back();
}

}  // namespace

absl::StatusOr<v1::NcclTopology> ParseNcclTopology(std::string_view xml) {
  if (xml.size() > kMaxNcclTopoBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        xml.size(), " bytes: more than the ", kMaxNcclTopoBytes, " an NCCL topology file may be"));
  }
  // The standard entities only: tinyxml2 reads no DTD, so nothing expands beyond the input.
  tinyxml2::XMLDocument doc(/*processEntities=*/true, tinyxml2::COLLAPSE_WHITESPACE);
  if (doc.Parse(xml.data(), xml.size()) != tinyxml2::XML_SUCCESS) {
    return absl::InvalidArgumentError(
        absl::StrCat("not well-formed XML: ", doc.ErrorStr() ? doc.ErrorStr() : "parse error"));
  }
  const tinyxml2::XMLElement* root = doc.RootElement();
  if (root == nullptr || std::strcmp(root->Name(), "system") != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an NCCL topology file: the root element is <", root ? root->Name() : "",
                     ">, not <system>"));
  }
  Walk w;
  std::vector<std::string> path;
  Visit(*root, &path, std::nullopt, 0, &w);
  if (!w.status.ok()) return w.status;
  if (w.out.devices().empty()) {
    return absl::InvalidArgumentError("the file names no <pci> element");
  }
  return std::move(w.out);
}

v1::NcclTopology ReadNcclTopology(const std::string& path, const v1::NcclTopology* last) {
  v1::NcclTopology out;
  absl::StatusOr<v1::NcclTopology> parsed;
  if (path.empty() || path.front() != '/') {
    parsed = absl::InvalidArgumentError("not an absolute path");
  } else if (absl::StatusOr<std::string> text = HostFsImpl("/").ReadFile(path); !text.ok()) {
    parsed = text.status();
  } else {
    parsed = ParseNcclTopology(*text);
  }
  if (parsed.ok()) {
    out = *std::move(parsed);
  } else {
    if (last != nullptr && last->path() == path && !last->devices().empty()) {
      *out.mutable_devices() = last->devices();
      out.set_stale(true);
    }
    out.set_error(std::string(parsed.status().message()));
  }
  out.set_path(path);
  return out;
}

void ApplyNcclTopology(const std::string& path, const v1::NcclTopology* last, v1::Host* host) {
  if (path.empty()) {
    if (!host->has_nccl_topology()) return;
    host->clear_nccl_topology();
  } else {
    *host->mutable_nccl_topology() = ReadNcclTopology(path, last);
  }
  // Only a virtual tree's pairs read the file (BuildTopology); a real one's stay as they are.
  if (!VirtualPciTree(*host).empty()) BuildTopology(host);
}

}  // namespace fabric
