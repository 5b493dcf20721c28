// GID tables: every used entry of each port's table (rdma::IsEmptyGidSlot false), with its type,
// netdev and address.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/common/strings.h"
#include "agent/inventory/discovery/discovery_internal.h"
#include "agent/inventory/discovery/parse.h"
#include "agent/rdma/gid.h"

namespace fabric::discovery_internal {

using namespace ::fabric::v1;  // NOLINT: the model's messages and enum values

namespace {

void ReadGids(const HostDir& pd, const std::string& dir, Port* port) {
  Problems* problems = port->mutable_problems();
  port->clear_port_guid();
  // Every slot of a GID table is a file, most of them empty: the hot loop of discovery. Read
  // each relative to the open gids/ directory into a stack buffer.
  auto gids = pd.OpenDir("gids");
  absl::StatusOr<std::vector<std::string>> entries =
      gids.ok() ? (*gids)->ListDir("") : absl::StatusOr<std::vector<std::string>>(gids.status());
  if (!entries.ok()) {
    AddProblem(problems, "gids", JoinPath(dir, "gids"), entries.status());
    return;
  }
  std::vector<uint32_t> indices;
  indices.reserve(entries->size());
  for (const std::string& e : *entries) {
    uint32_t i;
    if (absl::SimpleAtoi(e, &i)) indices.push_back(i);
  }
  std::sort(indices.begin(), indices.end());
  // Absent in some containers; then entries simply have no attributes.
  auto types = pd.OpenDir("gid_attrs/types");
  auto ndevs = pd.OpenDir("gid_attrs/ndevs");
  if (!types.ok())
    NoteTransient(problems, "gids.type", JoinPath(dir, "gid_attrs/types"), types.status());
  if (!ndevs.ok())
    NoteTransient(problems, "gids.netdev", JoinPath(dir, "gid_attrs/ndevs"), ndevs.status());
  char buf[64];
  char name[16];
  for (uint32_t i : indices) {
    const size_t name_len = static_cast<size_t>(std::snprintf(name, sizeof(name), "%u", i));
    const std::string_view index(name, name_len);
    auto len = (*gids)->ReadSmall(index, buf, sizeof(buf));
    if (!len.ok()) {
      AddProblem(problems, "gids", absl::StrCat(dir, "/gids/", i), len.status());
      continue;
    }
    const std::string_view text(buf, *len);
    auto gid = rdma::ParseGid(text);
    if (!gid.ok()) {
      AddProblem(problems, "gids", absl::StrCat(dir, "/gids/", i), gid.status());
      continue;
    }
    // Empty slots: all zero, or on InfiniBand the subnet prefix alone.
    if (rdma::IsEmptyGidSlot(*gid)) continue;
    Gid* g = port->add_gids();
    g->set_index(i);
    if (i == 0) {  // Its interface id is the port GUID.
      uint64_t guid = 0;
      for (size_t b = 8; b < 16; ++b) guid = guid << 8 | (*gid)[b];
      port->set_port_guid(absl::StrFormat("0x%016x", guid));
    }
    g->set_gid(absl::AsciiStrToLower(Av(Trim(text))));
    if (auto v4 = rdma::GidIpv4(*gid)) g->set_ipv4(*v4);
    if (auto v6 = rdma::GidIpv6(*gid)) g->set_ipv6(*v6);
    if (types.ok()) {
      if (auto type = (*types)->ReadFile(index); type.ok()) {
        if (auto t = ParseGidType(*type, port->link_layer()); t.ok()) {
          g->set_type(*t);
        } else {
          AddProblem(problems, "gids.type", absl::StrCat(dir, "/gid_attrs/types/", i), t.status());
        }
      } else if (!NoAttributes(type.status())) {
        AddProblem(problems, "gids.type", absl::StrCat(dir, "/gid_attrs/types/", i), type.status());
      }
    }
    if (ndevs.ok()) {
      if (auto ndev = (*ndevs)->ReadFile(index); ndev.ok()) {
        g->set_netdev(std::string(Trim(*ndev)));
      } else if (!NoAttributes(ndev.status())) {
        AddProblem(problems, "gids.netdev", absl::StrCat(dir, "/gid_attrs/ndevs/", i),
                   ndev.status());
      }
    }
  }
}

}  // namespace

// GID tables are most of discovery's reads and independent per port, so they are read in
// parallel, one port per task. Each task writes only its own Port; HostFs reads are plain
// system calls and safe to share.
void ReadGidTables(PortDirs port_dirs, Host* host) {
  std::vector<Port*> ports;
  for (RdmaDevice& dev : *host->mutable_rdma_devices()) {
    for (Port& p : *dev.mutable_ports()) {
      if (port_dirs.count(&p)) ports.push_back(&p);
    }
  }
  auto work = [&](std::atomic<size_t>* next) {
    for (size_t i; (i = next->fetch_add(1)) < ports.size();) {
      const auto& [dir, pd] = port_dirs.at(ports[i]);
      ReadGids(*pd, dir, ports[i]);
    }
  };
  std::atomic<size_t> next{0};
  const size_t threads =
      std::min<size_t>({ports.size(), std::max(1u, std::thread::hardware_concurrency()), 8});
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work, &next);
  work(&next);
  for (std::thread& t : pool) t.join();
}

}  // namespace fabric::discovery_internal
