#include "agent/fabric/neighbors/smp_umad.h"

#include <infiniband/umad.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "agent/common/errno.h"
#include "agent/common/log.h"

namespace fabric::neighbors {
namespace {

// libibumad returns -errno (and mostly sets errno too): one mapping for every call.
absl::Status UmadError(const std::string& what, int err) {
  const std::string msg = absl::StrCat(what, ": ", ErrnoText(err));
  switch (err) {
    case ENODEV:
    case ENOENT:
    case ENXIO:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    default:
      return absl::UnavailableError(msg);
  }
}

int ErrOf(int rc) { return rc < 0 ? -rc : (errno != 0 ? errno : EIO); }

}  // namespace

absl::StatusOr<std::unique_ptr<UmadSmpTransportImpl>> UmadSmpTransportImpl::Open(
    const std::string& ca_name, int port) {
  // An empty name would make libibumad pick the first device: callers name one.
  if (ca_name.empty() || port < 1 || port > 254) {
    return absl::InvalidArgumentError(
        absl::StrCat("umad: device \"", ca_name, "\" port ", port, " (need a name and 1..254)"));
  }
  std::unique_ptr<UmadSmpTransportImpl> t(new UmadSmpTransportImpl());
  t->name_ = absl::StrCat(ca_name, ":", port);
  if (int rc = umad_init(); rc < 0) return UmadError("umad_init", ErrOf(rc));
  errno = 0;
  if (int rc = umad_open_port(ca_name.c_str(), port); rc < 0) {
    return UmadError(absl::StrCat("umad_open_port ", t->name_), ErrOf(rc));
  } else {
    t->port_id_ = rc;
  }
  // No method mask: this agent takes only the responses to its own requests.
  errno = 0;
  if (int rc =
          umad_register(t->port_id_, kMgmtClassSubnDirectedRoute, kSmpClassVersion, 0, nullptr);
      rc < 0) {
    return UmadError(absl::StrCat("umad_register class 0x81 on ", t->name_), ErrOf(rc));
  } else {
    t->agent_id_ = rc;
  }
  return t;
}

UmadSmpTransportImpl::~UmadSmpTransportImpl() {
  if (agent_id_ >= 0) {
    if (int rc = umad_unregister(port_id_, agent_id_); rc < 0) {
      Log(LogLevel::kWarning, "neighbors: umad_unregister ", name_, ": ", ErrnoText(ErrOf(rc)));
    }
  }
  if (port_id_ >= 0) {
    if (int rc = umad_close_port(port_id_); rc < 0) {
      Log(LogLevel::kWarning, "neighbors: umad_close_port ", name_, ": ", ErrnoText(ErrOf(rc)));
    }
  }
}

absl::StatusOr<std::string> UmadSmpTransportImpl::Exchange(const std::string& mad,
                                                           absl::Duration timeout) {
  if (mad.size() != kMadSize) {
    return absl::InvalidArgumentError(absl::StrCat("umad: a MAD of ", mad.size(), " bytes"));
  }
  std::vector<char> buf(umad_size() + kMadSize);
  std::memcpy(umad_get_mad(buf.data()), mad.data(), kMadSize);
  // Directed route from the permissive LID: QP0, SL 0, no Q_Key.
  if (int rc = umad_set_addr(buf.data(), kPermissiveLid, 0, 0, 0); rc < 0) {
    return UmadError("umad_set_addr", ErrOf(rc));
  }
  const int timeout_ms =
      static_cast<int>(std::clamp<int64_t>(absl::ToInt64Milliseconds(timeout), 1, 60'000));
  // The kernel keeps the request for timeout_ms and hands back either the response matched by
  // TID or the request itself with status ETIMEDOUT.
  errno = 0;
  if (int rc = umad_send(port_id_, agent_id_, buf.data(), kMadSize, timeout_ms, 0); rc < 0) {
    return UmadError(absl::StrCat("umad_send on ", name_), ErrOf(rc));
  }
  const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms) + absl::Seconds(1);
  for (;;) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("umad on ", name_, ": no response within ", timeout_ms, " ms"));
    }
    pollfd p{umad_get_fd(port_id_), POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return UmadError(absl::StrCat("poll on ", name_), errno);
    if (n == 0) continue;  // the deadline check above ends it
    int len = static_cast<int>(kMadSize);
    errno = 0;
    const int rc = umad_recv(port_id_, buf.data(), &len, 0);
    if (rc < 0 && (ErrOf(rc) == EAGAIN || ErrOf(rc) == EWOULDBLOCK)) continue;
    if (rc < 0) return UmadError(absl::StrCat("umad_recv on ", name_), ErrOf(rc));
    if (const int status = umad_status(buf.data()); status != 0) {
      return UmadError(absl::StrCat("SMP on ", name_), status);
    }
    if (rc != agent_id_) continue;  // not ours (cannot happen with one agent per port fd)
    len = std::clamp(len, 0, static_cast<int>(kMadSize));
    return std::string(static_cast<const char*>(umad_get_mad(buf.data())), len);
  }
}

}  // namespace fabric::neighbors
