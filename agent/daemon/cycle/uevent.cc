#include "agent/daemon/cycle/uevent.h"

#include "absl/strings/str_cat.h"
#include "agent/common/strings.h"

namespace fabric {

absl::StatusOr<Uevent> ParseUevent(std::string_view d) {
  if (d.substr(0, 8) == std::string_view("libudev\0", 8)) {
    return absl::InvalidArgumentError("udev message, not a kernel uevent");
  }
  size_t end = d.find('\0');
  std::string_view head = d.substr(0, end);
  size_t at = head.find('@');
  if (at == std::string_view::npos || at == 0 || at + 1 >= head.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("uevent header is not ACTION@DEVPATH: \"", Av(head.substr(0, 64)), "\""));
  }
  Uevent e;
  e.action = std::string(head.substr(0, at));
  e.devpath = std::string(head.substr(at + 1));
  while (end != std::string_view::npos && end + 1 < d.size()) {
    size_t start = end + 1;
    end = d.find('\0', start);
    std::string_view kv = d.substr(start, end == std::string_view::npos ? end : end - start);
    if (kv.empty()) continue;
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("uevent entry is not KEY=VALUE: \"", Av(kv.substr(0, 64)), "\""));
    }
    e.env[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
  }
  auto it = e.env.find("ACTION");
  if (it != e.env.end() && it->second != e.action) {
    return absl::InvalidArgumentError(
        absl::StrCat("uevent ACTION=", it->second, " disagrees with header ", e.action));
  }
  it = e.env.find("SUBSYSTEM");
  if (it != e.env.end()) e.subsystem = it->second;
  return e;
}

bool AffectsInventory(const Uevent& e) {
  const bool kind = e.action == "add" || e.action == "remove" || e.action == "bind" ||
                    e.action == "unbind" || e.action == "move" || e.action == "change";
  if (!kind) return false;
  if (e.subsystem == "infiniband" || e.subsystem == "infiniband_verbs" ||
      e.subsystem == "infiniband_mad" || e.subsystem == "net") {
    return true;
  }
  // PCI: a GPU or NIC hot-plugged or its driver (un)bound; "change" is too noisy to matter here.
  return e.subsystem == "pci" && e.action != "change";
}

void AddToScope(const Uevent& e, ChangeScope* scope) {
  const size_t slash = e.devpath.rfind('/');
  const std::string last = slash == std::string::npos ? e.devpath : e.devpath.substr(slash + 1);
  if (e.subsystem == "net") {
    auto it = e.env.find("INTERFACE");
    scope->Netdev(it != e.env.end() ? it->second : last);
  } else if (e.subsystem == "infiniband") {
    scope->RdmaDevice(last);
  } else if (e.subsystem == "infiniband_verbs" || e.subsystem == "infiniband_mad") {
    scope->Uverbs();
  } else if (e.subsystem == "pci") {
    scope->Full(absl::StrCat("PCI function ", last, " ", e.action));
  }
}

}  // namespace fabric
