#include "agent/publish/metrics/port_counters.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "agent/common/strings.h"

namespace fabric::metrics {
namespace {

// The input as messages show it: C-escaped, at most 32 bytes of it.
std::string Quoted(std::string_view s) {
  constexpr size_t kShown = 32;
  return absl::StrCat("\"", absl::CHexEscape(Av(s.substr(0, kShown))), "\"",
                      s.size() > kShown ? "..." : "");
}

absl::Status Invalid(std::string_view what, std::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat(Av(what), ": ", Quoted(text)));
}

// A uint64 in decimal has at most 20 digits; with its newline 21 bytes. A longer file is no
// counter, so reads stop there (ReadSmall reports it as too long).
constexpr size_t kMaxCounterFile = 32;

}  // namespace

absl::StatusOr<uint64_t> ParseCounterValue(std::string_view text) {
  std::string_view t = text;
  if (!t.empty() && t.back() == '\n') t.remove_suffix(1);
  if (t.empty()) return Invalid("empty counter value", text);
  if (t == "N/A (no PMA)") {
    return absl::UnavailableError(absl::StrCat("counter not available: ", Quoted(text)));
  }
  if (t[0] == '-') return Invalid("negative counter value", text);
  uint64_t v = 0;
  for (char c : t) {
    if (c < '0' || c > '9') return Invalid("not a decimal counter value", text);
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return Invalid("counter value out of range (over 64 bits)", text);
    }
    v = v * 10 + digit;
  }
  return v;
}

PortCounters ReadPortCounters(const HostDir& port_dir) {
  PortCounters out;
  auto problem = [&](const std::string& field, const absl::Status& status) {
    v1::FieldProblem* p = &out.problems.emplace_back();
    p->set_field(field);
    p->set_path(JoinPath(port_dir.path(), field));
    p->set_reason(std::string(status.message()));
  };
  for (const char* dir_name : {"counters", "hw_counters"}) {
    std::vector<Counter>* list =
        std::string_view(dir_name) == "counters" ? &out.counters : &out.hw_counters;
    auto dir = port_dir.OpenDir(dir_name);
    if (!dir.ok()) {
      if (!absl::IsNotFound(dir.status())) problem(dir_name, dir.status());
      continue;
    }
    auto names = (*dir)->ListDir("");
    if (!names.ok()) {
      if (!absl::IsNotFound(names.status())) problem(dir_name, names.status());
      continue;
    }
    list->reserve(names->size());
    for (const std::string& name : *names) {
      char buf[kMaxCounterFile];
      auto len = (*dir)->ReadSmall(name, buf, sizeof(buf));
      if (!len.ok()) {
        // Gone since the listing (a device being removed): not a value, not a problem.
        if (!absl::IsNotFound(len.status())) {
          problem(absl::StrCat(dir_name, "/", name), len.status());
        }
        continue;
      }
      auto value = ParseCounterValue(std::string_view(buf, *len));
      if (value.ok()) {
        list->push_back(Counter{name, *value});
      } else if (!absl::IsUnavailable(value.status())) {
        problem(absl::StrCat(dir_name, "/", name), value.status());
      }
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<HostDir>> OpenRdmaDeviceDir(const HostFs& sysfs,
                                                           std::string_view device) {
  auto real = sysfs.RealPath(absl::StrCat("class/infiniband/", Av(device)));
  if (!real.ok()) return real.status();
  return sysfs.OpenDir(*real);
}

absl::StatusOr<PortCounters> ReadPortCounters(const HostFs& sysfs, std::string_view device,
                                              uint32_t port) {
  auto dev = OpenRdmaDeviceDir(sysfs, device);
  if (!dev.ok()) return dev.status();
  auto port_dir = (*dev)->OpenDir(absl::StrCat("ports/", port));
  if (!port_dir.ok()) return port_dir.status();
  return ReadPortCounters(**port_dir);
}

}  // namespace fabric::metrics
