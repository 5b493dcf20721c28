#include "agent/publish/metrics/port_counters.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
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

std::vector<PresentDevice> PresentRdmaDevices(const v1::Host& host, const HostFs& sysfs,
                                              std::string_view only) {
  std::vector<PresentDevice> out;
  for (const v1::RdmaDevice& dev : host.rdma_devices()) {
    if (!only.empty() && dev.name() != only) continue;
    auto dir = OpenRdmaDeviceDir(sysfs, dev.name());
    if (dir.ok()) out.push_back({&dev, *std::move(dir)});
  }
  return out;
}

bool IsHwSetting(std::string_view name) { return name == "lifespan"; }
bool IsHwLevel(std::string_view name) {
  return absl::StartsWith(Av(name), "active_") || absl::StartsWith(Av(name), "watermark_");
}

namespace {

// Names in an error message: the first few, then how many more (a host may have 500 VFs).
template <typename Range, typename Fn>
std::string FewOf(const Range& items, Fn name) {
  constexpr int kShown = 8;
  std::vector<std::string> names;
  int more = 0;
  for (const auto& item : items) {
    if (static_cast<int>(names.size()) < kShown) {
      names.push_back(name(item));
    } else {
      ++more;
    }
  }
  if (names.empty()) return "none";
  std::string out = absl::StrJoin(names, ", ");
  if (more > 0) absl::StrAppend(&out, " and ", more, " more");
  return out;
}

void AddValues(const std::vector<Counter>& from,
               google::protobuf::RepeatedPtrField<v1::CounterValue>* to) {
  for (const Counter& c : from) {
    v1::CounterValue* v = to->Add();
    v->set_name(c.name);
    v->set_value(c.value);
  }
}

}  // namespace

absl::StatusOr<v1::PortCountersResponse> ReadHostPortCounters(
    const v1::Host& host, const HostFs& sysfs, const v1::GetPortCountersRequest& req) {
  // The request is checked against the inventory before sysfs is touched: a name that is no
  // device of the host never becomes a path.
  if (req.port() != 0 && req.device().empty()) {
    return absl::InvalidArgumentError("a port needs its device (DEVICE:PORT, e.g. mlx5_1:1)");
  }
  if (!req.device().empty()) {
    const v1::RdmaDevice* found = nullptr;
    for (const v1::RdmaDevice& d : host.rdma_devices()) {
      if (d.name() == req.device()) found = &d;
    }
    if (found == nullptr) {
      return absl::NotFoundError(absl::StrCat(
          "no RDMA device \"", absl::CHexEscape(req.device().substr(0, 64)),
          "\" on this host (devices: ",
          FewOf(host.rdma_devices(), [](const v1::RdmaDevice& d) { return d.name(); }), ")"));
    }
    if (req.port() != 0) {
      bool has = false;
      for (const v1::Port& p : found->ports()) has = has || p.number() == req.port();
      if (!has) {
        return absl::NotFoundError(absl::StrCat(
            req.device(), " has no port ", req.port(), " (ports: ",
            FewOf(found->ports(), [](const v1::Port& p) { return absl::StrCat(p.number()); }),
            ")"));
      }
    }
  }
  v1::PortCountersResponse out;
  const int64_t now_ns = absl::ToUnixNanos(absl::Now());
  out.mutable_read_at()->set_seconds(now_ns / 1000000000);
  out.mutable_read_at()->set_nanos(static_cast<int32_t>(now_ns % 1000000000));
  const std::vector<PresentDevice> present = PresentRdmaDevices(host, sysfs, req.device());
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    if (!req.device().empty() && d.name() != req.device()) continue;
    bool there = false;
    for (const PresentDevice& p : present) there = there || p.device == &d;
    if (!there) out.add_notes(absl::StrCat(d.name(), ": gone since the inventory was taken"));
  }
  for (const PresentDevice& d : present) {
    for (const v1::Port& port : d.device->ports()) {
      if (req.port() != 0 && port.number() != req.port()) continue;
      auto port_dir = d.dir->OpenDir(absl::StrCat("ports/", port.number()));
      if (!port_dir.ok()) {
        out.add_notes(absl::StrCat(d.device->name(), ":", port.number(),
                                   ": gone since the inventory was taken"));
        continue;
      }
      const PortCounters read = ReadPortCounters(**port_dir);
      v1::PortCounterSet* set = out.add_ports();
      set->set_device(d.device->name());
      set->set_port(port.number());
      set->set_netdev(port.netdev());
      AddValues(read.counters, set->mutable_counters());
      AddValues(read.hw_counters, set->mutable_hw_counters());
      for (const v1::FieldProblem& p : read.problems) *set->add_problems() = p;
    }
  }
  return out;
}

}  // namespace fabric::metrics
