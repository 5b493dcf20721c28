#include "cni-hook/envfile.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fabric::cni {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> ReadSmallFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[256];
  ssize_t n = read(fd, buf, sizeof(buf));
  close(fd);
  if (n < 0) return std::nullopt;
  return std::string(absl::StripAsciiWhitespace(absl::string_view(buf, static_cast<size_t>(n))));
}

// Names in `dir` sorted naturally enough for device and port names (numeric when both are).
std::vector<std::string> List(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    int x, y;
    if (absl::SimpleAtoi(a, &x) && absl::SimpleAtoi(b, &y)) return x < y;
    return a < b;
  });
  return names;
}

std::string IpText(const announce::Address& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(a.family, &a.addr, buf, sizeof(buf));
  return buf;
}

// The GID a RoCE v2 port holds for an IPv4 address: ::ffff:a.b.c.d.
in6_addr MappedGid(const announce::Address& a) {
  in6_addr g{};
  g.s6_addr[10] = 0xff;
  g.s6_addr[11] = 0xff;
  std::memcpy(&g.s6_addr[12], &a.addr, 4);
  return g;
}

// Values are names and addresses; quote anything else so the file stays safe to `source`.
std::string ShellValue(const std::string& v) {
  const bool plain = std::all_of(v.begin(), v.end(), [](char ch) {
    return absl::ascii_isalnum(static_cast<unsigned char>(ch)) ||
           std::strchr("_.,:=/+@%-", ch) != nullptr;
  });
  if (plain) return v;
  std::string out = "'";
  for (char ch : v) {
    if (ch == '\'') {
      out += "'\\''";
    } else {
      out += ch;
    }
  }
  return out + "'";
}

}  // namespace

std::vector<RdmaMatch> FindRdma(const std::string& sysfs_root,
                                const std::vector<EnvInterface>& ifaces) {
  std::vector<RdmaMatch> out;
  for (const EnvInterface& in : ifaces) {
    if (in.pci_bdf.empty() || in.pci_bdf.find('/') != std::string::npos) continue;
    const std::string ib = absl::StrCat(sysfs_root, "/bus/pci/devices/", in.pci_bdf, "/infiniband");
    std::vector<in6_addr> wanted;
    for (const announce::Address& a : in.addresses) {
      if (a.family == AF_INET) wanted.push_back(MappedGid(a));
    }
    for (const std::string& dev : List(ib)) {
      const std::string ports = absl::StrCat(ib, "/", dev, "/ports");
      std::optional<RdmaMatch> first_port;
      std::optional<RdmaMatch> found;
      for (const std::string& port : List(ports)) {
        RdmaMatch m{in.ifname, dev, 1, -1};
        if (!absl::SimpleAtoi(port, &m.port)) continue;
        if (!first_port) first_port = m;
        const std::string p = absl::StrCat(ports, "/", port);
        for (const std::string& idx : List(p + "/gids")) {
          int i = 0;
          if (!absl::SimpleAtoi(idx, &i)) continue;
          auto text = ReadSmallFile(absl::StrCat(p, "/gids/", idx));
          in6_addr gid{};
          if (!text || inet_pton(AF_INET6, text->c_str(), &gid) != 1) continue;
          const bool match = std::any_of(wanted.begin(), wanted.end(), [&](const in6_addr& w) {
            return std::memcmp(&w, &gid, sizeof(gid)) == 0;
          });
          if (!match) continue;
          auto type = ReadSmallFile(absl::StrCat(p, "/gid_attrs/types/", idx));
          if (type && absl::AsciiStrToLower(*type) == "roce v2") {
            m.gid_index = i;
            found = m;
            break;
          }
        }
        if (found) break;
      }
      if (found) {
        out.push_back(*found);
      } else if (first_port) {
        out.push_back(*first_port);  // the device is known even without a usable GID
      }
    }
  }
  return out;
}

std::string RenderEnvFile(const std::vector<EnvInterface>& ifaces,
                          const std::vector<RdmaMatch>& rdma) {
  std::vector<std::string> names, ips;
  for (const EnvInterface& in : ifaces) {
    names.push_back(in.ifname);
    for (const announce::Address& a : in.addresses) ips.push_back(IpText(a));
  }
  std::string out = "# fabric-cni: the pod's fabric environment\n";
  if (rdma.empty()) {
    absl::StrAppend(&out, "# no RDMA device found behind ", absl::StrJoin(names, ", "), "\n");
  } else {
    std::vector<std::string> hcas;
    int gid = -1;
    for (const RdmaMatch& m : rdma) {
      hcas.push_back(absl::StrCat(m.device, ":", m.port));
      if (m.gid_index < 0) {
        absl::StrAppend(&out, "# ", m.device, ":", m.port, " (", m.ifname,
                        "): no RoCE v2 GID holds the pod's IPv4\n");
      } else if (gid < 0) {
        gid = m.gid_index;
      } else if (gid != m.gid_index) {
        // NCCL and UCX take one GID index for all devices.
        absl::StrAppend(&out, "# ", m.device, ":", m.port, " has the pod's GID at index ",
                        m.gid_index, ", not ", gid, "\n");
      }
    }
    const std::string list = absl::StrJoin(hcas, ",");
    absl::StrAppend(&out, "NCCL_IB_HCA=", ShellValue("=" + list), "\n");
    if (gid >= 0) absl::StrAppend(&out, "NCCL_IB_GID_INDEX=", gid, "\n");
    absl::StrAppend(&out, "UCX_NET_DEVICES=", ShellValue(list), "\n");
    if (gid >= 0) absl::StrAppend(&out, "UCX_IB_GID_INDEX=", gid, "\n");
  }
  absl::StrAppend(&out, "NCCL_SOCKET_IFNAME=", ShellValue("=" + absl::StrJoin(names, ",")), "\n");
  absl::StrAppend(&out, "FABRIC_POD_IPS=", ShellValue(absl::StrJoin(ips, ",")), "\n");
  return out;
}

}  // namespace fabric::cni
