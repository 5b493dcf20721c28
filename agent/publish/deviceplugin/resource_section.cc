#include "agent/publish/deviceplugin/resource_section.h"

#include <sys/un.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/common/strings.h"

namespace fabric::deviceplugin {
namespace {

bool Alnum(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)); }

// A DNS-1123 label: lower-case alphanumerics and '-', at most 63, alphanumeric at both ends.
bool DnsLabel(std::string_view s) {
  if (s.empty() || s.size() > 63 || !Alnum(s.front()) || !Alnum(s.back())) return false;
  for (char c : s) {
    if (!(absl::ascii_islower(static_cast<unsigned char>(c)) ||
          absl::ascii_isdigit(static_cast<unsigned char>(c)) || c == '-')) {
      return false;
    }
  }
  return true;
}

bool Hex4(std::string_view s) {
  if (s.size() != 4) return false;
  for (char c : s) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

absl::Status CheckList(const std::string& what,
                       const google::protobuf::RepeatedPtrField<std::string>& values,
                       bool (*ok)(std::string_view), std::string_view expected) {
  std::set<std::string> seen;
  for (const std::string& v : values) {
    if (!ok(v)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": \"", v, "\" is not ", Av(expected)));
    }
    if (!seen.insert(absl::AsciiStrToLower(v)).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": \"", v, "\" is listed twice"));
    }
  }
  return absl::OkStatus();
}

bool NonEmpty(std::string_view s) { return !s.empty() && s.size() <= 64; }
// "ether" is k8s-rdma-shared-dev-plugin's word for it, taken so its configs carry over.
bool LinkType(std::string_view s) { return s == "ethernet" || s == "ether" || s == "infiniband"; }

}  // namespace

absl::Status ValidResourceName(std::string_view name) {
  const size_t slash = name.find('/');
  if (slash == std::string_view::npos || name.find('/', slash + 1) != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Av(name), "\" is not domain/name (an extended resource name)"));
  }
  const std::string_view domain = name.substr(0, slash);
  const std::string_view part = name.substr(slash + 1);
  if (domain.empty() || domain.size() > 253) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Av(name), "\": the domain is empty or longer than 253"));
  }
  for (absl::string_view label : absl::StrSplit(Av(domain), '.')) {
    if (!DnsLabel(Sv(label))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", Av(name),
          "\": the domain is not a DNS subdomain (lower-case letters, digits, '-', '.')"));
    }
  }
  // The kubelet refuses these for device plugins: they are Kubernetes' own.
  if (domain == "kubernetes.io" || absl::EndsWith(Av(domain), ".kubernetes.io") ||
      absl::StartsWith(Av(name), "requests.")) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Av(name), "\": kubernetes.io names are not extended resources"));
  }
  if (part.empty() || part.size() > 63 || !Alnum(part.front()) || !Alnum(part.back())) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", Av(name),
                     "\": the name after '/' must be 1-63 characters, alphanumeric at both ends"));
  }
  for (char c : part) {
    if (!(Alnum(c) || c == '-' || c == '_' || c == '.')) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", Av(name), "\": the name after '/' takes only alphanumerics, '-', '_' and '.'"));
    }
  }
  return absl::OkStatus();
}

std::string Sanitized(std::string_view resource) {
  std::string out(resource);
  for (char& c : out) {
    if (!(Alnum(c) || c == '-' || c == '_' || c == '.')) c = '-';
  }
  return out;
}

std::string SocketName(std::string_view resource) {
  return absl::StrCat("fabric-", Sanitized(resource), ".sock");
}

std::string SocketPath(std::string_view dir, std::string_view resource) {
  return (std::filesystem::path(dir) / SocketName(resource)).string();
}

size_t MaxSocketPath() { return sizeof(sockaddr_un::sun_path) - 1; }

absl::Status CheckSocketPaths(std::string_view dir, const v1::DevicePluginConfig& config) {
  for (const v1::RdmaResource& r : config.resources()) {
    const std::string path = SocketPath(dir, r.name());
    if (path.size() > MaxSocketPath()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_plugin resource \"", r.name(), "\": its socket ", path, " is ",
                       path.size(), " bytes, longer than the ", MaxSocketPath(),
                       " a Unix socket path takes; use a shorter name or --device-plugin-dir"));
    }
  }
  return absl::OkStatus();
}

std::string SharedIdPrefix(std::string_view resource) {
  const size_t slash = resource.find('/');
  std::string part =
      Sanitized(slash == std::string_view::npos ? resource : resource.substr(slash + 1));
  if (part.size() > 56) part.resize(56);  // "-9999" and more still fit 63.
  return part;
}

uint32_t SharedCount(const v1::RdmaResource& r) {
  return r.shared_count() == 0 ? kDefaultSharedCount : r.shared_count();
}

absl::Status ValidateDevicePlugin(const v1::DevicePluginConfig& config,
                                  const v1::SelectionPolicy& policy) {
  if (config.resources_size() > kMaxResources) {
    return absl::InvalidArgumentError(
        absl::StrCat("device_plugin: more than ", kMaxResources, " resources"));
  }
  std::set<std::string> names;
  std::set<std::string> sockets;
  for (const v1::RdmaResource& r : config.resources()) {
    const std::string what = absl::StrCat("device_plugin resource \"", r.name(), "\"");
    if (absl::Status s = ValidResourceName(r.name()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("device_plugin: ", s.message()));
    }
    // "a/b-c" and "a-b/c" share a socket name.
    if (!names.insert(r.name()).second || !sockets.insert(SocketName(r.name())).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, " is configured twice"));
    }
    // Wherever the directory is, the path is at least "/" and the socket's name.
    if (const size_t n = SocketName(r.name()).size() + 1; n > MaxSocketPath()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": its socket's name makes a path of ",
                                                     n, " bytes or more, longer than the ",
                                                     MaxSocketPath(), " a Unix socket takes"));
    }
    if (r.mode() != v1::RdmaResource::SHARED && r.mode() != v1::RdmaResource::EXCLUSIVE) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": mode must be SHARED or EXCLUSIVE (got ", static_cast<int>(r.mode()), ")"));
    }
    if (r.mode() == v1::RdmaResource::EXCLUSIVE && r.shared_count() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shared_count is for SHARED resources"));
    }
    if (r.shared_count() > kMaxSharedCount) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shared_count ", r.shared_count(), " is above ", kMaxSharedCount));
    }
    const v1::RdmaSelectors& sel = r.selectors();
    if (sel.vendors().empty() && sel.device_ids().empty() && sel.drivers().empty() &&
        sel.if_names().empty() && sel.link_types().empty() && sel.rdma_devices().empty() &&
        sel.rails().empty() && sel.role().empty() && sel.function().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": no selector (it would take every NIC; name at least one)"));
    }
    auto prefixed = [&](absl::Status s) {
      return s.ok() ? s : absl::InvalidArgumentError(absl::StrCat(what, ": ", s.message()));
    };
    for (absl::Status s :
         {CheckList("selectors.vendors", sel.vendors(), Hex4, "four hex digits (\"15b3\")"),
          CheckList("selectors.device_ids", sel.device_ids(), Hex4, "four hex digits (\"101b\")"),
          CheckList("selectors.drivers", sel.drivers(), NonEmpty, "a driver name"),
          CheckList("selectors.if_names", sel.if_names(), NonEmpty, "a netdev name"),
          CheckList("selectors.link_types", sel.link_types(), LinkType,
                    "\"ethernet\" or \"infiniband\""),
          CheckList("selectors.rdma_devices", sel.rdma_devices(), NonEmpty, "an RDMA device name"),
          CheckList("selectors.rails", sel.rails(), NonEmpty, "a rail name")}) {
      if (!s.ok()) return prefixed(s);
    }
    for (const std::string& rail : sel.rails()) {
      if (std::none_of(policy.rails().begin(), policy.rails().end(),
                       [&](const v1::Rail& x) { return x.name() == rail; })) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": selectors.rails names \"", rail,
                                                       "\", not a rail of selection.rails"));
      }
    }
    if (!sel.role().empty() && sel.role() != "back-end" && sel.role() != "front-end") {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": selectors.role \"", sel.role(), "\" is not back-end or front-end"));
    }
    if (!sel.function().empty() && sel.function() != "pf" && sel.function() != "vf") {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": selectors.function \"", sel.function(), "\" is not pf or vf"));
    }
  }
  return absl::OkStatus();
}

}  // namespace fabric::deviceplugin
