// ResourceSlices as resource.k8s.io/v1 writes and lists them, pure: our devices as the object the
// agent creates or updates, and the API server's list parsed back to what the publisher compares
// (outside bytes: bounded, never trusted; a fuzz target).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/publish/dra/devices.h"

namespace fabric::dra {

inline constexpr char kApiVersion[] = "resource.k8s.io/v1";
// A list body past this is refused before it is parsed (the publisher also bounds what it reads):
// a node's slices are a few hundred kB even with 512 VFs.
inline constexpr size_t kMaxListBytes = 16 << 20;

// One pool per node, named after it; its slices named "<node>-rdma.fabric.io-<index>", cut to a
// DNS subdomain's 253 characters.
std::string SliceName(std::string_view node, size_t index);

struct SliceMeta {
  std::string node;
  std::string node_uid;  // The Node's UID: the slice's owner, so deleting the node removes it.
  int64_t generation = 1;
  int64_t slice_count = 1;
  size_t index = 0;
  std::string resource_version;  // Set for an update (a stale one is a 409 from the server).
};

// The ResourceSlice object as JSON text.
std::string SliceJson(const SliceMeta& meta, const std::vector<Device>& devices);

// What comparing a slice's devices with ours reads: the devices as canonical JSON without the
// taints' timeAdded (the server fills one in where a taint has none).
std::string DevicesKey(const std::vector<Device>& devices);

struct ListedSlice {
  std::string name;
  std::string resource_version;
  std::string node;
  std::string driver;
  std::string pool;
  int64_t generation = 0;
  int64_t slice_count = 0;
  std::string devices_key;  // As DevicesKey renders ours.
};

// A ResourceSliceList's items. InvalidArgument for a body that is not one (not JSON, too deep,
// too large, items not an array, an item without a name).
absl::StatusOr<std::vector<ListedSlice>> ParseSliceList(std::string_view body);

}  // namespace fabric::dra
