#include "agent/policy/select/gpu_names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/policy/place/place.h"
#include "agent/policy/select/select.h"
#include "tests/hosts/discovered.h"

namespace fabric {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

const v1::Host& Dgx() { return testing::DiscoveredExampleHost("dgx-h100-ib"); }
const v1::Host& Amd() { return testing::DiscoveredExampleHost("amd-mi300x-bnxt"); }

// GPU 0 and 2 of dgx-h100-ib (tests/hosts/hosts.cc), as the driver names them.
constexpr char kDgx0[] = "GPU-c15521b1-b3dc-a50a-9daa-37e51b591d75";
constexpr char kDgx0Pci[] = "0000:19:00.0";
constexpr char kDgx2Pci[] = "0000:50:00.0";
constexpr char kAmd0[] = "GPU-5c54e05b42a9ba21";
constexpr char kAmd0Pci[] = "0000:09:00.0";

// MIG devices for tests: uuid -> parent PCI address.
class FakeMig : public MigResolver {
 public:
  absl::StatusOr<std::string> ParentPciAddress(std::string_view uuid) const override {
    ++calls;
    auto it = parents.find(std::string(uuid));
    if (it == parents.end()) return absl::NotFoundError("NVML knows no MIG device");
    return it->second;
  }
  std::map<std::string, std::string> parents;
  mutable int calls = 0;
};

TEST(ResolveGpu, EveryForm) {
  FakeMig mig;
  mig.parents["MIG-11111111-2222-3333-4444-555555555555"] = "00000000:50:00.0";  // GPU 2
  mig.parents["MIG-66666666-2222-3333-4444-555555555555"] = "0000:ee:00.0";      // not here
  struct Case {
    std::string given;
    absl::StatusCode code;
    std::string pci;  // OK: the canonical address; else a substring of the message
  };
  const Case cases[] = {
      // PCI addresses, as ParseGpuName reads them.
      {"0000:19:00.0", absl::StatusCode::kOk, kDgx0Pci},
      {"19:00.0", absl::StatusCode::kOk, kDgx0Pci},
      {"00000000:19:00.0", absl::StatusCode::kOk, kDgx0Pci},
      {"0000:ee:00.0", absl::StatusCode::kNotFound, "is not an accelerator of this host"},
      {"0000:19:00", absl::StatusCode::kInvalidArgument, "is not a PCI address"},
      {"0000:18:00.0", absl::StatusCode::kNotFound, "not an accelerator"},  // a NIC
      // Indices: nvidia-smi order.
      {"0", absl::StatusCode::kOk, kDgx0Pci},
      {"2", absl::StatusCode::kOk, kDgx2Pci},
      {"7", absl::StatusCode::kOk, "0000:dd:00.0"},
      {"8", absl::StatusCode::kNotFound, "8 NVIDIA GPUs"},
      {"1234567890", absl::StatusCode::kInvalidArgument, "index too large"},
      // NVIDIA UUIDs, any case.
      {kDgx0, absl::StatusCode::kOk, kDgx0Pci},
      {"gpu-C15521B1-B3DC-A50A-9DAA-37E51B591D75", absl::StatusCode::kOk, kDgx0Pci},
      {"GPU-00000000-b3dc-a50a-9daa-37e51b591d75", absl::StatusCode::kNotFound, "no GPU"},
      {"GPU-c15521b1-b3dc-a50a-9daa-37e51b591d7", absl::StatusCode::kInvalidArgument, "malformed"},
      {"GPU-c15521b1b3dca50a9daa37e51b591d75", absl::StatusCode::kInvalidArgument, "malformed"},
      {"GPU-", absl::StatusCode::kInvalidArgument, "malformed"},
      {"GPU-5c54e05b42a9ba21", absl::StatusCode::kNotFound, "no GPU"},  // AMD form, not here
      // MIG devices through the resolver.
      {"MIG-11111111-2222-3333-4444-555555555555", absl::StatusCode::kOk, kDgx2Pci},
      {"mig-11111111-2222-3333-4444-555555555555", absl::StatusCode::kNotFound, "NVML knows no"},
      {"MIG-66666666-2222-3333-4444-555555555555", absl::StatusCode::kNotFound,
       "not an accelerator"},
      {"MIG-6666", absl::StatusCode::kInvalidArgument, "malformed"},
      // Neither.
      {"", absl::StatusCode::kInvalidArgument, "empty"},
      {"gpu0", absl::StatusCode::kInvalidArgument, "nor an index, GPU-<uuid> or MIG-<uuid>"},
      {"-1", absl::StatusCode::kInvalidArgument, "not a PCI address"},
      {std::string(65, '1'), absl::StatusCode::kInvalidArgument, "at most 64"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ResolvedGpu> got = ResolveGpu(Dgx(), c.given, &mig);
    EXPECT_EQ(got.status().code(), c.code) << c.given << ": " << got.status();
    if (got.ok() && c.code == absl::StatusCode::kOk) {
      EXPECT_EQ(got->pci_address, c.pci) << c.given;
      ASSERT_NE(got->accelerator, nullptr);
      EXPECT_EQ(got->accelerator->pci_address(), c.pci);
    } else if (!got.ok()) {
      EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.pci)) << c.given;
    }
  }
  EXPECT_EQ(mig.calls, 3);
}

TEST(ResolveGpu, AmdHost) {
  struct Case {
    std::string given;
    absl::StatusCode code;
    std::string pci;
  };
  const Case cases[] = {
      {kAmd0, absl::StatusCode::kOk, kAmd0Pci},
      {"GPU-5C54E05B42A9BA21", absl::StatusCode::kOk, kAmd0Pci},
      {"GPU-5c54e05b42a9ba2", absl::StatusCode::kInvalidArgument, "malformed"},
      {"GPU-0000000000000001", absl::StatusCode::kNotFound, "no GPU"},
      // rocm-smi order on a host without NVIDIA GPUs; the Tenstorrent card has no index.
      {"0", absl::StatusCode::kOk, kAmd0Pci},
      {"7", absl::StatusCode::kOk, "0000:f9:00.0"},
      {"8", absl::StatusCode::kNotFound, "rocm-smi"},
      {kDgx0, absl::StatusCode::kNotFound, "no GPU"},
      {"c6:00.0", absl::StatusCode::kOk, "0000:c6:00.0"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ResolvedGpu> got = ResolveGpu(Amd(), c.given, nullptr, "candidate");
    EXPECT_EQ(got.status().code(), c.code) << c.given << ": " << got.status();
    if (got.ok() && c.code == absl::StatusCode::kOk) {
      EXPECT_EQ(got->pci_address, c.pci) << c.given;
    } else if (!got.ok()) {
      EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.pci)) << c.given;
      EXPECT_THAT(std::string(got.status().message()), HasSubstr("candidate")) << c.given;
    }
  }
}

TEST(ResolveGpu, ManagementDisplayIsNotAGpu) {
  const v1::Host& roce = testing::DiscoveredExampleHost("roce-9port");
  absl::StatusOr<ResolvedGpu> got = ResolveGpu(roce, "03:00.0", nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("management display"));
}

TEST(ResolveGpu, MigWithoutNvml) {
  absl::StatusOr<ResolvedGpu> got =
      ResolveGpu(Dgx(), "MIG-11111111-2222-3333-4444-555555555555", nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(got.status())) << got.status();
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("needs libnvidia-ml (NVML)"));
}

// This machine has no NVIDIA driver: the real resolver says NVML is not loadable.
TEST(MigResolverImpl, NotLoadableHere) {
  MigResolverImpl impl("libnvidia-ml-absent-for-test.so.1");
  for (int i = 0; i < 2; ++i) {  // Loaded once; the answer stays.
    absl::StatusOr<std::string> got =
        impl.ParentPciAddress("MIG-11111111-2222-3333-4444-555555555555");
    EXPECT_TRUE(absl::IsFailedPrecondition(got.status())) << got.status();
    EXPECT_THAT(std::string(got.status().message()),
                HasSubstr("MIG-11111111-2222-3333-4444-555555555555 needs libnvidia-ml (NVML), "
                          "which is not loadable: "));
    EXPECT_THAT(std::string(got.status().message()), HasSubstr("libnvidia-ml-absent-for-test"));
  }
  // The process-wide one, with the real library name.
  absl::StatusOr<ResolvedGpu> real =
      ResolveGpu(Dgx(), "MIG-11111111-2222-3333-4444-555555555555", ProcessMigResolver());
  if (!real.ok()) {
    EXPECT_TRUE(absl::IsFailedPrecondition(real.status()) || absl::IsNotFound(real.status()))
        << real.status();
  }
}

// SelectNics takes every form, echoes the name given, and refuses one GPU under two names.
TEST(SelectNicsNames, GivenIsEchoedAndDuplicatesRefused) {
  absl::StatusOr<v1::Selection> sel =
      SelectNics(Dgx(), {kDgx0, "2", "5e:00.0", "00000000:9b:00.0"}, v1::SelectionPolicy());
  // 5e:00.0 is mlx5_5's NIC, not a GPU.
  EXPECT_TRUE(absl::IsNotFound(sel.status())) << sel.status();
  sel = SelectNics(Dgx(), {kDgx0, "2", "00000000:9b:00.0"}, v1::SelectionPolicy());
  ASSERT_TRUE(sel.ok()) << sel.status();
  ASSERT_EQ(sel->assignments_size(), 3);
  EXPECT_EQ(sel->assignments(0).given(), kDgx0);
  EXPECT_EQ(sel->assignments(0).gpu(), kDgx0Pci);
  EXPECT_EQ(sel->assignments(0).rdma_device(), "mlx5_0");
  EXPECT_EQ(sel->assignments(1).given(), "2");
  EXPECT_EQ(sel->assignments(1).gpu(), kDgx2Pci);
  EXPECT_EQ(sel->assignments(2).given(), "00000000:9b:00.0");
  EXPECT_EQ(sel->assignments(2).gpu(), "0000:9b:00.0");

  sel = SelectNics(Dgx(), {kDgx0, "0"}, v1::SelectionPolicy());
  EXPECT_TRUE(absl::IsInvalidArgument(sel.status())) << sel.status();
  EXPECT_THAT(std::string(sel.status().message()), HasSubstr("given twice"));
}

v1::VisibleDevices Vis(std::map<std::string, std::string> vars) {
  v1::VisibleDevices v;
  for (const auto& [k, val] : vars) {
    if (k == "NVIDIA") v.set_nvidia_visible_devices(val);
    if (k == "CUDA") v.set_cuda_visible_devices(val);
    if (k == "ROCR") v.set_rocr_visible_devices(val);
    if (k == "HIP") v.set_hip_visible_devices(val);
  }
  return v;
}

TEST(ExpandVisible, Table) {
  const std::string a = kDgx0;
  const std::string b = "GPU-3f372617-f0ba-ef3a-86f0-ce2ea6ec39c1";
  struct Case {
    std::map<std::string, std::string> vars;
    const v1::Host* host;
    absl::StatusCode code;
    std::vector<std::string> want;  // error: want[0] is a substring of the message
  };
  const v1::Host* dgx = &Dgx();
  const v1::Host* amd = &Amd();
  const Case cases[] = {
      {{{"NVIDIA", a + "," + b}}, dgx, absl::StatusCode::kOk, {a, b}},
      {{{"NVIDIA", " 3, 1 "}}, dgx, absl::StatusCode::kOk, {"3", "1"}},
      {{{"NVIDIA", "all"}}, dgx, absl::StatusCode::kInvalidArgument, {"names no GPU"}},
      {{{"NVIDIA", "none"}}, dgx, absl::StatusCode::kInvalidArgument, {"names no GPU"}},
      {{{"NVIDIA", "void"}}, dgx, absl::StatusCode::kInvalidArgument, {"names no GPU"}},
      {{{"NVIDIA", ""}}, dgx, absl::StatusCode::kInvalidArgument, {"names no GPU"}},
      {{{"NVIDIA", "1,,2"}}, dgx, absl::StatusCode::kInvalidArgument, {"empty entry"}},
      {{{"CUDA", "2,0"}}, dgx, absl::StatusCode::kOk, {"2", "0"}},
      {{{"CUDA", a}}, dgx, absl::StatusCode::kOk, {a}},
      {{{"CUDA", ""}}, dgx, absl::StatusCode::kInvalidArgument, {"CUDA_VISIBLE_DEVICES is empty"}},
      // The container rule: CUDA's indices count within NVIDIA's list.
      {{{"NVIDIA", a + "," + b}, {"CUDA", "1"}}, dgx, absl::StatusCode::kOk, {b}},
      {{{"NVIDIA", "4,6"}, {"CUDA", "1,0"}}, dgx, absl::StatusCode::kOk, {"6", "4"}},
      {{{"NVIDIA", a + "," + b}, {"CUDA", "2"}},
       dgx,
       absl::StatusCode::kNotFound,
       {"makes 2 GPUs visible"}},
      // NVIDIA's variables win over AMD's.
      {{{"CUDA", "1"}, {"ROCR", "3"}}, dgx, absl::StatusCode::kOk, {"1"}},
      {{{"ROCR", "0,3"}}, amd, absl::StatusCode::kOk, {"0", "3"}},
      {{{"ROCR", kAmd0}}, amd, absl::StatusCode::kOk, {kAmd0}},
      {{{"HIP", "1"}}, amd, absl::StatusCode::kOk, {"1"}},
      {{{"ROCR", "2,5,7"}, {"HIP", "2,0"}}, amd, absl::StatusCode::kOk, {"7", "2"}},
      {{{"ROCR", "2"}, {"HIP", "1"}}, amd, absl::StatusCode::kNotFound, {"makes 1 GPUs visible"}},
      {{{"ROCR", ""}}, amd, absl::StatusCode::kInvalidArgument, {"ROCR_VISIBLE_DEVICES is empty"}},
      // An AMD index on a host with NVIDIA GPUs would mean an NVIDIA GPU: no AMD GPU there.
      {{{"ROCR", "0"}}, dgx, absl::StatusCode::kNotFound, {"AMD GPU index 0"}},
      {{},
       dgx,
       absl::StatusCode::kInvalidArgument,
       {"NVIDIA_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES"}},
  };
  for (const Case& c : cases) {
    const v1::VisibleDevices v = Vis(c.vars);
    absl::StatusOr<std::vector<std::string>> got = ExpandVisible(v, *c.host);
    EXPECT_EQ(got.status().code(), c.code) << v.ShortDebugString() << ": " << got.status();
    if (got.ok() && c.code == absl::StatusCode::kOk) {
      EXPECT_THAT(*got, ElementsAreArray(c.want)) << v.ShortDebugString();
    } else if (!got.ok()) {
      EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.want[0]));
    }
    EXPECT_EQ(HasVisible(v), !c.vars.empty());
  }
}

// What ExpandVisible gives resolves, in the container's order.
TEST(ExpandVisible, ResolvesThroughSelectNics) {
  auto names = ExpandVisible(
      Vis({{"NVIDIA", "GPU-3f372617-f0ba-ef3a-86f0-ce2ea6ec39c1,2"}, {"CUDA", "1,0"}}), Dgx());
  ASSERT_TRUE(names.ok()) << names.status();
  absl::StatusOr<v1::Selection> sel = SelectNics(Dgx(), *names, v1::SelectionPolicy());
  ASSERT_TRUE(sel.ok()) << sel.status();
  ASSERT_EQ(sel->assignments_size(), 2);
  EXPECT_EQ(sel->assignments(0).gpu(), kDgx2Pci);
  EXPECT_EQ(sel->assignments(1).gpu(), "0000:41:00.0");
  EXPECT_THAT(std::vector<std::string>({sel->assignments(0).given(), sel->assignments(1).given()}),
              ElementsAre("2", "GPU-3f372617-f0ba-ef3a-86f0-ce2ea6ec39c1"));
}

// One reading of a request wherever it is answered: names, all, or visible, exactly one.
TEST(RequestedGpus, Table) {
  auto req = [](std::vector<std::string> gpus, bool all, std::optional<std::string> cuda) {
    v1::SelectNicsRequest r;
    for (std::string& g : gpus) r.add_gpus(std::move(g));
    r.set_all(all);
    if (cuda) r.mutable_visible()->set_cuda_visible_devices(*cuda);
    return r;
  };
  struct Case {
    const char* name;
    v1::SelectNicsRequest req;
    absl::StatusCode code;
    std::vector<std::string> want;  // OK: the names; else one substring of the message.
  };
  const v1::Host& dgx = Dgx();
  std::vector<std::string> all_dgx;
  for (const v1::Accelerator& a : dgx.accelerators()) {
    if (!a.management_display()) all_dgx.push_back(a.pci_address());
  }
  ASSERT_EQ(all_dgx.size(), 8u);
  const Case cases[] = {
      {"names as given",
       req({"3", kDgx0}, false, std::nullopt),
       absl::StatusCode::kOk,
       {"3", kDgx0}},
      {"all", req({}, true, std::nullopt), absl::StatusCode::kOk, all_dgx},
      {"visible", req({}, false, "1,0"), absl::StatusCode::kOk, {"1", "0"}},
      {"none", req({}, false, std::nullopt), absl::StatusCode::kInvalidArgument, {"gpus is empty"}},
      {"names and all",
       req({"0"}, true, std::nullopt),
       absl::StatusCode::kInvalidArgument,
       {"give one of them"}},
      {"names and visible",
       req({"0"}, false, "0"),
       absl::StatusCode::kInvalidArgument,
       {"give one of them"}},
      {"all and visible",
       req({}, true, "0"),
       absl::StatusCode::kInvalidArgument,
       {"give one of them"}},
      {"empty visible", req({}, false, ""), absl::StatusCode::kInvalidArgument, {"CUDA"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = RequestedGpus(dgx, c.req);
    ASSERT_EQ(got.status().code(), c.code) << got.status();
    if (c.code == absl::StatusCode::kOk) {
      EXPECT_THAT(*got, ElementsAreArray(c.want));
    } else {
      EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.want.front()));
    }
  }
  // `all` on a host whose only accelerators are not NVIDIA or AMD GPUs, and on one without any.
  v1::Host gaudi = dgx;
  for (v1::Accelerator& a : *gaudi.mutable_accelerators()) {
    a.set_vendor(v1::ACCELERATOR_VENDOR_INTEL);
  }
  auto none = RequestedGpus(gaudi, req({}, true, std::nullopt));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("no NVIDIA or AMD GPU"));
  gaudi.clear_accelerators();
  EXPECT_THAT(std::string(RequestedGpus(gaudi, req({}, true, std::nullopt)).status().message()),
              HasSubstr("no GPU or accelerator"));
}

// SelectNics reads MIG devices through the resolver it is given, and through none by default.
TEST(SelectNicsNames, MigThroughTheInjectedResolver) {
  FakeMig mig;
  const std::string uuid = "MIG-11111111-2222-3333-4444-555555555555";
  mig.parents[uuid] = "00000000:50:00.0";  // GPU 2
  auto sel = SelectNics(Dgx(), {uuid}, {}, &mig);
  ASSERT_TRUE(sel.ok()) << sel.status();
  EXPECT_EQ(sel->assignments(0).gpu(), kDgx2Pci);
  EXPECT_EQ(sel->assignments(0).given(), uuid);
  EXPECT_EQ(mig.calls, 1);
  EXPECT_EQ(SelectNics(Dgx(), {uuid}, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  v1::PlaceRequest place;
  place.set_gpu_count(1);
  place.add_candidates(uuid);
  auto placed = Place(Dgx(), place, {}, &mig);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_GT(placed->placements_size(), 0);
  EXPECT_THAT(placed->placements(0).gpus(), ElementsAre(kDgx2Pci));
  EXPECT_EQ(Place(Dgx(), place, {}).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fabric
