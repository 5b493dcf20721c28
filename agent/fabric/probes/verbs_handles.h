// Owning handles for verbs and rdma_cm objects. Each destroy call is checked, as rdma-core's
// examples do by hand: a failure (a removed device fails them with EIO, and the rest must still be
// freed) is recorded in a ReleaseErrors, which the owner returns from its Release() or logs.
// Resources are released in the reverse order of their creation because the struct that owns
// them declares them in creation order (see VerbsObjects).
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace fabric::probes {

// The destroy calls that failed, in the order they ran.
class ReleaseErrors {
 public:
  ReleaseErrors() = default;
  ReleaseErrors(const ReleaseErrors&) = delete;
  ReleaseErrors& operator=(const ReleaseErrors&) = delete;
  // Logs the failures not taken, as a destructor cannot return them.
  ~ReleaseErrors();

  // `err` is 0 (nothing to record) or an errno value.
  void Add(const char* what, int err);
  // Internal listing the failures since the last Take ("ibv_destroy_qp: Input/output error;
  // ..."), else OK.
  absl::Status Take();

 private:
  std::vector<std::string> failed_;
};

// Calls Destroy(p): 0, or an errno value (a negative return is taken as -1 with errno set; a
// destroy that returns nothing cannot fail).
template <auto Destroy, typename T>
int CheckedDestroy(T* p) {
  errno = 0;
  if constexpr (std::is_void_v<decltype(Destroy(p))>) {
    Destroy(p);
    return 0;
  } else {
    int rc = Destroy(p);
    if (rc < 0) rc = errno != 0 ? errno : EIO;
    return rc;
  }
}

// Owns one object and destroys it once with Destroy, on reset() or in its destructor; a failed
// destroy goes to the ReleaseErrors given with the object.
template <typename T, auto Destroy>
class Owned {
 public:
  Owned() = default;
  // `what` (a literal) names the destroy in reports.
  Owned(T* p, const char* what, ReleaseErrors& errors) : p_(p), what_(what), errors_(&errors) {}
  Owned(Owned&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), what_(o.what_), errors_(o.errors_) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      what_ = o.what_;
      errors_ = o.errors_;
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { reset(); }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }
  void reset() {
    if (p_ != nullptr) errors_->Add(what_, CheckedDestroy<Destroy>(std::exchange(p_, nullptr)));
  }

 private:
  T* p_ = nullptr;
  const char* what_ = "";
  ReleaseErrors* errors_ = nullptr;
};

// Destroys the elements of `v` newest first (std::vector destroys its elements from the front).
template <typename V>
void PopBackToFront(V& v) {
  while (!v.empty()) v.pop_back();
}

inline void FreeBuffer(uint8_t* p) { std::free(p); }

using EventChannel = Owned<rdma_event_channel, rdma_destroy_event_channel>;
using CmId = Owned<rdma_cm_id, rdma_destroy_id>;
using CmQp = Owned<rdma_cm_id, rdma_destroy_qp>;          // the QP rdma_create_qp gave an id
using CmConnection = Owned<rdma_cm_id, rdma_disconnect>;  // an established connection
using Context = Owned<ibv_context, ibv_close_device>;
using Pd = Owned<ibv_pd, ibv_dealloc_pd>;
using Buffer = Owned<uint8_t, FreeBuffer>;  // posix_memalign'd
using Mr = Owned<ibv_mr, ibv_dereg_mr>;
using Cq = Owned<ibv_cq, ibv_destroy_cq>;
using Qp = Owned<ibv_qp, ibv_destroy_qp>;

}  // namespace fabric::probes
