#include "agent/policy/doctor/consumer_vars.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <iterator>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/common/excerpt.h"
#include "agent/common/natural_order.h"
#include "agent/common/strings.h"

namespace fabric::doctor {
namespace {

// Characters a device or interface name can hold; anything else (spaces, quotes, shell
// metacharacters) never matches a real name.
bool PlainName(std::string_view name) {
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

// A rail or plane field as NCCL 2.30.7 reads it (utils.cc parseStringList): empty is -1, else
// atoi kept in an int16_t, so "x" is 0 and 40000 wraps; what reads otherwise than it looks is
// noted.
int NcclIdField(std::string_view raw, std::string_view field, std::string_view text,
                std::vector<std::string>* problems) {
  if (text.empty()) return -1;
  const std::string s(text);
  const int16_t v = static_cast<int16_t>(std::atoi(s.c_str()));
  const bool digits =
      std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isdigit(c); });
  if (!digits || text.size() > 5 || std::to_string(v) != s) {
    problems->push_back(absl::StrCat("NCCL entry ", Excerpt(raw), ": ", Av(field), " ",
                                     Excerpt(text), " is read as ", v));
  }
  return v;
}

// "name[:port[:rail[:plane]]]" as NCCL reads it (UCX: "name[:port]"); problems noted against
// `what`.
ListEntry ParseEntry(std::string_view raw, const char* what, std::vector<std::string>* problems) {
  ListEntry e;
  const size_t colon = raw.find(':');
  e.name = std::string(raw.substr(0, colon));
  if (colon != std::string_view::npos) {
    const std::string rest(raw.substr(colon + 1));
    e.port = std::atoi(rest.c_str());  // As NCCL reads it: "x" is port 0.
    const std::string_view digits = Sv(rest).substr(0, Sv(rest).find(':'));
    if (digits.empty() ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return absl::ascii_isdigit(c); }) ||
        e.port <= 0) {
      problems->push_back(absl::StrCat(what, " entry ", Excerpt(raw), ": port ", Excerpt(digits),
                                       " is read as ", e.port, ", which no RDMA port has"));
    }
    std::vector<absl::string_view> more = absl::StrSplit(Av(rest), ':');
    if (more.size() > 1 && std::string_view(what) != "NCCL") {
      problems->push_back(absl::StrCat(what, " entry ", Excerpt(raw), ": ", what,
                                       " names a port as device:port; no device has this name"));
    } else if (more.size() > 1) {
      e.rail = NcclIdField(raw, "rail", Sv(more[1]), problems);
      if (more.size() > 2) e.plane = NcclIdField(raw, "plane", Sv(more[2]), problems);
      if (e.plane >= 0 && (e.plane & (1 << 14)) != 0) {
        problems->push_back(absl::StrCat("NCCL entry ", Excerpt(raw), ": plane ", e.plane,
                                         " has bit 14 set, which NCCL refuses (invalid usage)"));
      }
      if (more.size() > 3) {
        problems->push_back(
            absl::StrCat("NCCL entry ", Excerpt(raw), ": what follows the plane is ignored"));
      }
    }
  }
  if (!PlainName(e.name)) {
    problems->push_back(absl::StrCat(what, " entry ", Excerpt(raw),
                                     ": the name holds characters no device name has (spaces, "
                                     "quotes, shell metacharacters are not stripped)"));
  }
  if (e.name.size() > kNcclMaxNameBytes) {
    problems->push_back(
        absl::StrCat(what, " entry ", Excerpt(raw), ": longer than ", kNcclMaxNameBytes, " bytes"));
  }
  return e;
}

// UCX's transport names and aliases (ucs/config, uct's component list, 1.12-1.18).
constexpr std::string_view kUcxRdma[] = {"all",      "ib",      "rc", "rc_v", "rc_x",
                                         "rc_verbs", "rc_mlx5", "ud", "ud_v", "ud_x",
                                         "ud_verbs", "ud_mlx5", "dc", "dc_x", "dc_mlx5"};
constexpr std::string_view kUcxOther[] = {
    "sm",   "shm",       "mm",       "posix", "sysv",      "xpmem",    "cma",
    "knem", "self",      "tcp",      "cuda",  "cuda_copy", "cuda_ipc", "gdr_copy",
    "rocm", "rocm_copy", "rocm_ipc", "ugni",  "ugni_rdma", "ugni_udt", "ugni_smsg"};

bool In(std::string_view name, const auto& names) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

}  // namespace

UcxTransports ParseUcxTls(std::string_view value) {
  UcxTransports t;
  absl::string_view v = absl::StripAsciiWhitespace(Av(value));
  if (v.empty()) {
    t.rdma = true;
    t.why = "UCX_TLS is empty: UCX's default (all) includes RDMA";
    return t;
  }
  const bool exclude = absl::ConsumePrefix(&v, "^");
  std::vector<std::string> rdma_named;
  size_t count = 0;
  for (absl::string_view raw : absl::StrSplit(v, ',', absl::SkipEmpty())) {
    if (++count > kUcxMaxEntries) {
      t.problems.push_back(
          absl::StrCat("more than ", kUcxMaxEntries, " entries: the rest is not read"));
      break;
    }
    absl::string_view name = raw;
    const bool aux = absl::ConsumeSuffix(&name, ":aux");
    if (!In(Sv(name), kUcxRdma) && !In(Sv(name), kUcxOther)) {
      t.problems.push_back(
          absl::StrCat("UCX_TLS names ", Excerpt(Sv(raw)), ", a transport UCX does not know"));
      continue;
    }
    if (In(Sv(name), kUcxRdma) && !aux && !In(Sv(name), rdma_named)) {
      rdma_named.push_back(std::string(name));
    }
  }
  if (exclude) {
    // Everything but the listed: RDMA stays unless "ib" or every RDMA family is excluded.
    const auto has = [&](std::string_view n) {
      return std::find(rdma_named.begin(), rdma_named.end(), n) != rdma_named.end();
    };
    const bool gone = has("all") || has("ib") || (has("rc") && has("ud") && has("dc"));
    t.rdma = !gone;
    t.why = gone ? absl::StrCat("UCX_TLS=", Excerpt(value), " excludes every RDMA transport")
                 : absl::StrCat("UCX_TLS=", Excerpt(value), " leaves RDMA transports");
  } else {
    t.rdma = !rdma_named.empty();
    t.why = t.rdma ? absl::StrCat("UCX_TLS allows ", absl::StrJoin(rdma_named, ", "))
                   : absl::StrCat("UCX_TLS=", Excerpt(value),
                                  " names no RDMA transport (rc, ud, dc, ib or all): UCX moves "
                                  "data over what it names, TCP or shared memory");
  }
  return t;
}

DeviceList ParseNcclList(std::string_view value, size_t max_entries) {
  DeviceList l;
  if (absl::StripAsciiWhitespace(Av(value)).empty()) {
    l.problems.push_back("the value is empty: NCCL treats it as unset and picks devices itself");
    return l;
  }
  absl::string_view v = Av(value);
  if (absl::ConsumePrefix(&v, "^")) l.exclude = true;
  if (absl::ConsumePrefix(&v, "=")) l.exact = true;
  size_t count = 0;
  for (absl::string_view raw : absl::StrSplit(v, ',')) {
    // NCCL's parser skips empty names: ",," and ":1" give no entry.
    if (raw.empty() || raw[0] == ':') continue;
    if (++count > max_entries) {
      l.problems.push_back(absl::StrCat("more than ", max_entries,
                                        " entries: NCCL ignores every entry after entry ",
                                        max_entries));
      break;
    }
    l.entries.push_back(ParseEntry(Sv(raw), "NCCL", &l.problems));
  }
  if (l.entries.empty()) l.problems.push_back("no device name in the value");
  // ncclIbGetPlaneIndex: 12 planes and the undefined one at most.
  std::set<int> planes;
  for (const ListEntry& e : l.entries) planes.insert(e.plane);
  if (planes.size() > 13) {
    l.problems.push_back(absl::StrCat(planes.size(),
                                      " distinct planes (the undefined one "
                                      "counted): NCCL 2.30.7 takes 13 at most and fails"));
  }
  return l;
}

DeviceList ParseUcxDevices(std::string_view value) {
  DeviceList l;
  l.exact = true;
  const absl::string_view v = absl::StripAsciiWhitespace(Av(value));
  if (v.empty()) {
    l.problems.push_back("the value is empty");
    return l;
  }
  if (v == "all") {
    l.all = true;
    return l;
  }
  size_t count = 0;
  for (absl::string_view raw : absl::StrSplit(Av(value), ',')) {
    if (raw.empty()) continue;
    if (++count > kUcxMaxEntries) {
      l.problems.push_back(
          absl::StrCat("more than ", kUcxMaxEntries, " entries: the rest is not read"));
      break;
    }
    if (raw == "all") {
      l.all = true;
      continue;
    }
    l.entries.push_back(ParseEntry(Sv(raw), "UCX", &l.problems));
  }
  if (l.entries.empty() && !l.all) l.problems.push_back("no device name in the value");
  return l;
}

absl::Status CheckListBounds(const std::map<std::string, std::string>& env) {
  for (const char* var : {"UCX_NET_DEVICES", "UCX_TLS"}) {
    auto it = env.find(var);
    if (it == env.end()) continue;
    // Entries as the parsers count them: non-empty pieces between commas.
    size_t entries = 0;
    bool in_entry = false;
    for (char ch : it->second) {
      if (ch == ',') {
        in_entry = false;
      } else if (!in_entry) {
        in_entry = true;
        ++entries;
      }
    }
    if (entries > kUcxMaxEntries) {
      return absl::InvalidArgumentError(absl::StrCat(var, " has ", entries,
                                                     " entries; the doctor judges at most ",
                                                     kUcxMaxEntries, " (no host has more ports)"));
    }
  }
  return absl::OkStatus();
}

bool EntrySelects(const DeviceList& list, const ListEntry& e, std::string_view device, int port) {
  const bool name = list.exact ? device == e.name : absl::StartsWith(Av(device), e.name);
  return name && (e.port == -1 || e.port == port);
}

std::string EntryText(const ListEntry& e) {
  const std::string name = PlainName(e.name) && e.name.size() <= kNcclMaxNameBytes
                               ? e.name
                               : Excerpt(e.name, kNcclMaxNameBytes);
  return e.port < 0 ? name : absl::StrCat(name, ":", e.port);
}

bool Selects(const DeviceList& list, std::string_view device, int port) {
  if (list.all) return true;
  bool matched = false;
  for (const ListEntry& e : list.entries) {
    if (EntrySelects(list, e, device, port)) {
      matched = true;
      break;
    }
  }
  return matched != list.exclude;
}

std::vector<DevicePort> UsedOnlyBy(const DeviceList& a, const DeviceList& b,
                                   const std::vector<DevicePort>& ports) {
  std::vector<DevicePort> out;
  for (const DevicePort& p : ports) {
    if (Selects(a, p.device, p.port) && !Selects(b, p.device, p.port)) out.push_back(p);
  }
  return out;
}

std::vector<std::string> PrefixSurprises(const DeviceList& list,
                                         const std::vector<std::string>& devices) {
  std::vector<std::string> out;
  if (list.exact || list.all) return out;
  for (const ListEntry& e : list.entries) {
    std::vector<std::string> more;
    for (const std::string& d : devices) {
      if (d != e.name && absl::StartsWith(d, e.name)) more.push_back(d);
    }
    if (more.empty()) continue;
    std::sort(more.begin(), more.end(), NaturalLess);
    out.push_back(absl::StrCat(e.name, " also ", list.exclude ? "excludes " : "takes ",
                               absl::StrJoin(more, ", "), " (NCCL matches by prefix; a leading '",
                               list.exclude ? "^=" : "=", "' makes the names exact)"));
  }
  return out;
}

NcclInt ReadNcclInt(std::string_view name, std::optional<std::string_view> value, int64_t dflt) {
  NcclInt r;
  r.value = dflt;
  if (!value || value->empty()) return r;
  r.set = true;
  // strtoll wants a terminated string; an environment value ends at its first NUL anyway.
  const std::string text(value->substr(0, value->find('\0')));
  const std::string shown = absl::StrCat(Av(name), "=", Excerpt(*value));
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0) {
    r.problem = absl::StrCat(shown, " is out of range: NCCL uses ", dflt);
    return r;
  }
  r.value = n;
  if (end == text.c_str() || *end != '\0' || text.size() != value->size()) {
    r.problem = absl::StrCat(shown, " is not a number: NCCL reads it as ", n);
    return r;
  }
  // A leading 0 that changes the number: "010" is 8 to NCCL, 10 to whoever wrote it.
  const size_t digits = text.find_first_not_of(" \t\n\v\f\r+-");
  if (digits != std::string::npos && text[digits] == '0' && digits + 1 < text.size() &&
      absl::ascii_isdigit(static_cast<unsigned char>(text[digits + 1])) &&
      std::strtoll(text.c_str(), nullptr, 10) != n) {
    r.problem = absl::StrCat(shown, " has a leading 0: NCCL reads it as octal, ", n);
  }
  return r;
}

NcclLevel ReadNcclLevel(std::string_view name, std::string_view value) {
  // topoPathTypeStr up to PATH_SYS (2.2x; P2C is 2.27's), and the old numbering's levelsOldToNew.
  static constexpr const char* kNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX",
                                           "PXB", "P2C", "PXN", "PHB", "SYS"};
  static constexpr const char* kOld[] = {"LOC", "PIX", "PXB", "PHB", "SYS", "SYS"};
  NcclLevel r;
  if (value.empty()) return r;
  for (const char* n : kNames) {
    if (value == n) {
      r.name = n;
      return r;
    }
  }
  const std::string shown = absl::StrCat(Av(name), "=", Excerpt(value));
  if (absl::ascii_isdigit(static_cast<unsigned char>(value[0]))) {
    const std::string text(value.substr(0, value.find('\0')));
    errno = 0;
    char* end = nullptr;
    const long n = std::strtol(text.c_str(), &end, 0);
    // NCCL keeps the number in an int: beyond one its reading is undefined.
    if (errno != 0 || n > INT_MAX) {
      r.problem = absl::StrCat(shown, " is out of range: NCCL's reading of it is undefined");
      return r;
    }
    r.name = kOld[std::min<long>(n, std::size(kOld) - 1)];
    if (*end != '\0' || text.size() != value.size()) {
      r.problem = absl::StrCat(shown, " is not a number: NCCL reads it as ", n, " (", r.name, ")");
    }
    return r;
  }
  for (const char* n : kNames) {
    if (absl::EqualsIgnoreCase(Av(value), n)) {
      r.problem = absl::StrCat(shown, ": NCCL reads level names in capitals only (", n,
                               ") and keeps its default");
      return r;
    }
  }
  r.problem = absl::StrCat(shown, " is not a level NCCL knows (", absl::StrJoin(kNames, ", "),
                           ", or 0-4): NCCL keeps its default");
  return r;
}

}  // namespace fabric::doctor
