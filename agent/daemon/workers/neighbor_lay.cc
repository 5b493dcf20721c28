#include "agent/daemon/workers/neighbor_lay.h"

#include <google/protobuf/util/message_differencer.h>

#include <utility>

#include "agent/inventory/discovery/refresh.h"

namespace fabric {
namespace {

// `want` for `nd`, its rail taken from what `nd` shows: kept, not compared.
std::optional<v1::Neighbor> Wanted(const v1::Netdev& nd, const NeighborWant& want) {
  std::optional<v1::Neighbor> w = want(nd);
  if (w && nd.has_neighbor()) w->set_rail(nd.neighbor().rail());
  return w;
}

bool Mine(const v1::Netdev& nd, v1::Neighbor::Source source) {
  return nd.has_neighbor() && nd.neighbor().source() == source;
}

bool Shows(const v1::Netdev& nd, const v1::Neighbor& w) {
  return nd.has_neighbor() && google::protobuf::util::MessageDifferencer::Equals(nd.neighbor(), w);
}

}  // namespace

void LayNeighbors(v1::Host* host, v1::Neighbor::Source source, const NeighborWant& want) {
  for (int i = 0; i < host->netdevs_size(); ++i) {
    const v1::Netdev& nd = host->netdevs(i);
    std::optional<v1::Neighbor> w = Wanted(nd, want);
    if (!w) {
      if (Mine(nd, source)) MutableNetdev(host, i)->clear_neighbor();
    } else if (!Shows(nd, *w)) {
      *MutableNetdev(host, i)->mutable_neighbor() = std::move(*w);
    }
  }
}

bool ShowsNeighbors(const v1::Host& host, v1::Neighbor::Source source, const NeighborWant& want) {
  for (const v1::Netdev& nd : host.netdevs()) {
    std::optional<v1::Neighbor> w = Wanted(nd, want);
    if (w ? !Shows(nd, *w) : Mine(nd, source)) return false;
  }
  return true;
}

}  // namespace fabric
