#include "agent/daemon/workers/ib_neighbors.h"

#include <google/protobuf/util/message_differencer.h>
#include <sys/eventfd.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/common/k8s_label.h"
#include "agent/daemon/workers/neighbor_lay.h"
#include "agent/fabric/neighbors/smp_umad.h"
#include "agent/inventory/discovery/refresh.h"

namespace fabric {
namespace {

using v1::Neighbor;

constexpr absl::Duration kSmpTimeout = absl::Milliseconds(500);

absl::StatusOr<neighbors::IbNeighbor> AskOverUmad(const std::string& ca, int port) {
  auto t = neighbors::UmadSmpTransportImpl::Open(ca, port);
  if (!t.ok()) return t.status();
  return neighbors::QueryIbNeighbor(**t, port, kSmpTimeout);
}

std::string Key(const std::string& device, uint32_t port) {
  return absl::StrCat(device, ":", port);
}

bool SameNeighbor(const Neighbor& a, const Neighbor& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

}  // namespace

Neighbor IbNeighborProto(const neighbors::IbNeighbor& n, absl::Time first_seen) {
  Neighbor out;
  out.set_source(Neighbor::SOURCE_IB_SMP);
  out.set_chassis_id(neighbors::GuidText(n.node_guid));
  out.set_port_id(absl::StrCat(n.remote_port));
  out.set_system_name(n.description);
  out.set_port_description(neighbors::NodeTypeName(n.node_type));
  out.set_first_seen_unix_ms(absl::ToUnixMillis(first_seen));
  out.set_switch_label(!n.description.empty() && IsValidLabelValue(n.description)
                           ? n.description
                           : absl::StrFormat("n-%016x", n.node_guid));
  return out;
}

IbNeighbors::IbNeighbors(Query query, absl::Duration requery)
    : query_(std::move(query)), requery_(requery), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!query_) query_ = AskOverUmad;
  worker_ = std::thread([this] { Work(); });
}

IbNeighbors::~IbNeighbors() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void IbNeighbors::Work() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    Answer a{job.key, query_(job.ca, job.port), absl::Now()};
    {
      std::lock_guard<std::mutex> lock(mu_);
      answers_.push_back(std::move(a));
    }
    const uint64_t one = 1;
    if (write(wake_.get(), &one, sizeof(one)) < 0) {
      // EAGAIN: the counter is saturated, so the loop is already woken.
    }
  }
}

bool IbNeighbors::Sync(const v1::Host& host, absl::Time now) {
  std::map<std::string, PortState> keep;
  std::vector<Job> ask;
  for (const v1::RdmaDevice& d : host.rdma_devices()) {
    for (const v1::Port& p : d.ports()) {
      if (p.link_layer() != v1::LINK_LAYER_INFINIBAND || p.state() != v1::PORT_STATE_ACTIVE) {
        continue;
      }
      const std::string key = Key(d.name(), p.number());
      auto it = ports_.find(key);
      PortState s = it == ports_.end() ? PortState() : std::move(it->second);
      if (!s.queued && now >= s.due) {
        s.queued = true;
        ask.push_back({key, d.name(), static_cast<int>(p.number())});
      }
      keep[key] = std::move(s);
    }
  }
  bool dropped = false;
  for (const auto& [key, s] : ports_) {
    if (!keep.count(key)) {
      dropped = dropped || s.heard;
      errors_.erase(key);
    }
  }
  ports_ = std::move(keep);
  if (!ask.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Job& j : ask) jobs_.push_back(std::move(j));
    }
    cv_.notify_one();
  }
  return dropped;
}

bool IbNeighbors::Collect() {
  uint64_t n;
  while (read(wake_.get(), &n, sizeof(n)) == sizeof(n)) {
  }
  std::vector<Answer> answers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    answers.swap(answers_);
  }
  bool changed = false;
  for (Answer& a : answers) {
    ++queries_;
    auto it = ports_.find(a.key);
    if (it == ports_.end()) continue;  // Gone or down since it was asked.
    PortState& s = it->second;
    s.queued = false;
    s.due = a.at + requery_;
    if (!a.neighbor.ok()) {
      // No umad device for the port (a container without /dev/infiniband/umad*, a driver with
      // no SMI): nothing to report, as for a netdev LLDP cannot open in another namespace.
      if (!absl::IsNotFound(a.neighbor.status())) {
        errors_[a.key] = a.neighbor.status();
      }
      changed = changed || s.heard;
      s.heard = false;
      continue;
    }
    errors_.erase(a.key);
    // The same node and port keep the time first seen.
    const bool same_node = s.heard &&
                           s.neighbor.chassis_id() == neighbors::GuidText(a.neighbor->node_guid) &&
                           s.neighbor.port_id() == absl::StrCat(a.neighbor->remote_port);
    Neighbor nb = IbNeighborProto(
        *a.neighbor, same_node ? absl::FromUnixMillis(s.neighbor.first_seen_unix_ms()) : a.at);
    changed = changed || !s.heard || !SameNeighbor(nb, s.neighbor);
    s.heard = true;
    s.neighbor = std::move(nb);
  }
  return changed;
}

absl::Time IbNeighbors::NextQuery() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [key, s] : ports_) {
    if (!s.queued) next = std::min(next, s.due);
  }
  return next;
}

std::optional<Neighbor> IbNeighbors::Want(const v1::Netdev& nd) const {
  if (nd.rdma_device().empty() || !nd.has_rdma_port()) return std::nullopt;
  auto it = ports_.find(Key(nd.rdma_device(), nd.rdma_port()));
  if (it == ports_.end() || !it->second.heard) return std::nullopt;
  return it->second.neighbor;
}

void IbNeighbors::Lay(v1::Host* host) const {
  LayNeighbors(host, Neighbor::SOURCE_IB_SMP, [this](const v1::Netdev& nd) { return Want(nd); });
}

bool IbNeighbors::Shows(const v1::Host& host) const {
  return ShowsNeighbors(host, Neighbor::SOURCE_IB_SMP,
                        [this](const v1::Netdev& nd) { return Want(nd); });
}

void IbNeighborFindings(const IbNeighbors& ib, std::vector<v1::Finding>* out) {
  std::vector<std::string> denied;
  for (const auto& [port, error] : ib.errors()) {
    if (absl::IsPermissionDenied(error)) {
      denied.push_back(port);
      continue;
    }
    v1::Finding f;
    f.set_severity(v1::SEVERITY_WARNING);
    f.set_check("neighbors");
    f.set_subject(port);
    f.set_message(absl::StrCat("cannot ask the InfiniBand node behind this port (", error.message(),
                               "): its leaf is unknown"));
    out->push_back(std::move(f));
  }
  if (denied.empty()) return;
  v1::Finding f;
  f.set_severity(v1::SEVERITY_OK);
  f.set_check("neighbors");
  f.set_subject(absl::StrJoin(denied, ","));
  f.set_message(
      "InfiniBand leaves unknown: asking them takes read-write access to /dev/infiniband/umad* "
      "(root's by default), which this agent is not given");
  out->push_back(std::move(f));
}

void IbNeighbors::Findings(absl::Time, std::vector<v1::Finding>* out) const {
  IbNeighborFindings(*this, out);
}

}  // namespace fabric
