#include "agent/fabric/doctor/verbs_open.h"

#include <infiniband/verbs.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"

namespace fabric::doctor {
namespace {

// libibverbs returns an errno value from most calls, -1 with errno set from some (and older
// providers): the errno either way.
int ErrOf(int rc) { return rc < 0 ? errno : rc; }

v1::PortState StateOf(ibv_port_state s) {
  // ibv_port_state has the kernel's values, as does v1::PortState; IBV_PORT_NOP is "not known".
  switch (s) {
    case IBV_PORT_DOWN:
      return v1::PORT_STATE_DOWN;
    case IBV_PORT_INIT:
      return v1::PORT_STATE_INIT;
    case IBV_PORT_ARMED:
      return v1::PORT_STATE_ARMED;
    case IBV_PORT_ACTIVE:
      return v1::PORT_STATE_ACTIVE;
    case IBV_PORT_ACTIVE_DEFER:
      return v1::PORT_STATE_ACTIVE_DEFER;
    default:
      return v1::PORT_STATE_UNSPECIFIED;
  }
}

v1::LinkLayer LinkLayerOf(uint8_t l) {
  switch (l) {
    case IBV_LINK_LAYER_INFINIBAND:
      return v1::LINK_LAYER_INFINIBAND;
    case IBV_LINK_LAYER_ETHERNET:
      return v1::LINK_LAYER_ETHERNET;
    default:
      return v1::LINK_LAYER_UNSPECIFIED;
  }
}

// Opens, queries and closes `dev` into `out`; the first failure ends the queries.
void QueryDevice(ibv_device* dev, VerbsOpen* out) {
  errno = 0;
  ibv_context* ctx = ibv_open_device(dev);
  if (ctx == nullptr) {
    // Some providers fail without setting errno.
    out->error = absl::StrCat("ibv_open_device ", out->device, ": ",
                              errno != 0 ? ErrnoText(errno) : "failed without a reason");
    return;
  }
  ibv_device_attr attr{};
  if (int rc = ibv_query_device(ctx, &attr); rc != 0) {
    out->error = absl::StrCat("ibv_query_device ", out->device, ": ", ErrnoText(ErrOf(rc)));
  } else {
    for (int p = 1; p <= attr.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (int prc = ibv_query_port(ctx, static_cast<uint8_t>(p), &pa); prc != 0) {
        out->error =
            absl::StrCat("ibv_query_port ", out->device, " port ", p, ": ", ErrnoText(ErrOf(prc)));
        break;
      }
      out->ports.push_back(VerbsPort{.number = p,
                                     .state = StateOf(pa.state),
                                     .link_layer = LinkLayerOf(pa.link_layer),
                                     .gid_table_len = pa.gid_tbl_len});
    }
  }
  if (int rc = ibv_close_device(ctx); rc != 0) {
    // The first failure is the one to report; a failed close after it only adds to it.
    const std::string close =
        absl::StrCat("ibv_close_device ", out->device, ": ", ErrnoText(ErrOf(rc)));
    out->error = out->error.empty() ? close : absl::StrCat(out->error, "; then ", close);
  }
}

}  // namespace

VerbsOpen OpenVerbsDevice(const std::string& name) {
  VerbsOpen out;
  out.device = name;
  int n = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    // ENOSYS: no kernel verbs support (no /sys/class/infiniband_verbs), as in many containers.
    out.error = absl::StrCat("ibv_get_device_list (looking for ", name,
                             "): ", errno != 0 ? ErrnoText(errno) : "failed without a reason");
    return out;
  }
  ibv_device* found = nullptr;
  for (int i = 0; i < n && found == nullptr; ++i) {
    const char* dev_name = ibv_get_device_name(list[i]);
    if (dev_name != nullptr && name == dev_name) found = list[i];
  }
  if (n == 0) {
    out.error = absl::StrCat("no RDMA device ", name,
                             ": libibverbs lists no devices (no provider for this host's devices, "
                             "or none are visible here)");
  } else if (found == nullptr) {
    out.error = absl::StrCat("no RDMA device ", name, " among the ", n, " libibverbs lists");
  } else {
    QueryDevice(found, &out);
  }
  ibv_free_device_list(list);
  return out;
}

}  // namespace fabric::doctor
