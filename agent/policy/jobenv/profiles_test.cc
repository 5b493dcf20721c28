// What the job gets beyond the port list: NCCL_IB_HCA's rails and order by NCCL version, the
// GPUDirect decision, NIC vendor profiles, and GPUs of several vendors in one job.
#include "agent/policy/jobenv/profiles.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/policy/jobenv/jobenv.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::jobenv {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;

// GPU i on InfiniBand mlx5_<i>, whose PCI addresses run against the names (mlx5_0 highest).
Request Ib(int n) {
  Request r;
  for (int i = 0; i < n; ++i) {
    Pick p;
    p.gpu = absl::StrCat("0000:", 0x10 + i, ":00.0");
    p.gpu_vendor = "nvidia";
    p.device = absl::StrCat("mlx5_", i);
    p.device_pci = absl::StrCat("0000:", 0x9f - i, ":00.0");
    p.profile = "mlx5";
    p.sys_image_guid = absl::StrCat("0c42:a103:0000:000", i);
    r.scope.push_back(p);
  }
  r.default_route_netdevs = {"eth0"};
  return r;
}

Result Must(const Request& r) {
  absl::StatusOr<Result> out = Render(r);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : Result{};
}

std::string Notes(const Result& r) {
  std::string out;
  for (const std::string& n : r.notes) absl::StrAppend(&out, n, "\n");
  return out;
}

TEST(VersionTest, ParsesNcclReleasesAndRefusesTheRest) {
  struct Case {
    const char* text;
    bool ok;
    Version want;
  } cases[] = {
      {"2.30.7", true, {2, 30, 7}},
      {"2.30.7-1", true, {2, 30, 7}},
      {"2.28.9+cuda12.9", true, {2, 28, 9}},
      {"0.0.0", true, {0, 0, 0}},
      {"2.30", false, {}},
      {"2.30.7.1", false, {}},
      {"", false, {}},
      {"2..7", false, {}},
      {"2.30.x", false, {}},
      {" 2.30.7", false, {}},
      {"2.30.-7", false, {}},
      {"99999.1.1", false, {}},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Version> v = ParseVersion(c.text);
    EXPECT_EQ(v.ok(), c.ok) << c.text;
    if (c.ok && v.ok()) {
      EXPECT_EQ(*v, c.want) << c.text;
    }
  }
  EXPECT_LT(Version({2, 29, 7}), kNcclRails);
  EXPECT_LT(Version({2, 30, 4}), kNcclRails);
  EXPECT_GE(Version({2, 31, 0}), kNcclRails);
}

TEST(NcclHcaTest, RailsFromNccl2307InNcclsOwnOrder) {
  Request r = Ib(3);
  for (int i = 0; i < 3; ++i) r.scope[i].rail = static_cast<uint32_t>(2 - i);
  r.nccl_version = Version{2, 30, 7};
  Result got = Must(r);
  // NCCL sorts by PCI path: mlx5_2 (0000:9d) first.
  EXPECT_EQ(got.job.at("NCCL_IB_HCA"), "=mlx5_2:1:0,mlx5_1:1:1,mlx5_0:1:2");
  EXPECT_THAT(Notes(got), Not(HasSubstr("rail")));

  r.nccl_version = Version{2, 29, 7};  // PCI order, no rails.
  got = Must(r);
  EXPECT_EQ(got.job.at("NCCL_IB_HCA"), "=mlx5_2:1,mlx5_1:1,mlx5_0:1");
  EXPECT_THAT(Notes(got), HasSubstr("NCCL 2.29.7 reads none (2.30.7 does)"));

  r.nccl_version.reset();  // Unknown: natural order, no rails, and how to get them.
  got = Must(r);
  EXPECT_EQ(got.job.at("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1,mlx5_2:1");
  EXPECT_THAT(Notes(got), HasSubstr("version is unknown"));

  r.nccl_version = Version{2, 31, 0};  // One port without a rail: none named.
  r.scope[1].rail.reset();
  got = Must(r);
  EXPECT_EQ(got.job.at("NCCL_IB_HCA"), "=mlx5_2:1,mlx5_1:1,mlx5_0:1");
  EXPECT_THAT(Notes(got), HasSubstr("no rail known for mlx5_1:1"));

  // The rails do not reach the libraries that read their own lists.
  EXPECT_EQ(got.job.at("MC_TE_FILTERS"), "mlx5_0,mlx5_1,mlx5_2");
}

TEST(NcclHcaTest, OneNicsFunctionsSharingAGuidAreNamedWhenNoRailsAre) {
  Request r = Ib(2);
  r.scope[1].sys_image_guid = r.scope[0].sys_image_guid;
  EXPECT_THAT(Notes(Must(r)), HasSubstr("mlx5_0 and mlx5_1 (0c42:a103:0000:0000)"));
  r.scope[0].rail = 0;
  r.scope[1].rail = 1;
  r.nccl_version = Version{2, 30, 7};
  EXPECT_THAT(Notes(Must(r)), Not(HasSubstr("system image GUID")));
}

TEST(GpuDirectTest, NoPathForAnyGpuTellsNcclAndUcx) {
  Request r = Ib(2);
  for (Pick& p : r.scope) p.gpudirect = "none";
  Result got = Must(r);
  EXPECT_EQ(got.job.at("NCCL_NET_GDR_LEVEL"), "LOC");
  EXPECT_EQ(got.job.at("UCX_IB_GPU_DIRECT_RDMA"), "no");
  EXPECT_THAT(Notes(got), HasSubstr("staged through host memory"));
  r.consumers.ucx = false;
  EXPECT_THAT(Must(r).job, Not(Contains(Key("UCX_IB_GPU_DIRECT_RDMA"))));
}

TEST(GpuDirectTest, SomeWithoutAPathAreNamedAndNcclDecidesPerGpu) {
  Request r = Ib(2);
  r.scope[0].gpudirect = "dma_buf";
  r.scope[1].gpudirect = "none";
  Result got = Must(r);
  EXPECT_THAT(got.job, Not(Contains(Key("NCCL_NET_GDR_LEVEL"))));
  EXPECT_THAT(got.job, Contains(Pair("NCCL_DMABUF_ENABLE", "1")));
  EXPECT_THAT(Notes(got), HasSubstr("no GPUDirect RDMA path for GPU 0000:17:00.0"));

  r.scope[1].gpudirect = "nvidia_peermem";  // Two ways: NCCL's own preference decides.
  got = Must(r);
  EXPECT_THAT(got.job, Not(Contains(Key("NCCL_DMABUF_ENABLE"))));
  EXPECT_THAT(Notes(got), Not(HasSubstr("GPUDirect")));

  for (Pick& p : r.scope) p.gpudirect.clear();  // Not known: nothing said.
  got = Must(r);
  EXPECT_THAT(got.job, Not(Contains(Key("NCCL_DMABUF_ENABLE"))));
  EXPECT_THAT(got.job, Not(Contains(Key("NCCL_NET_GDR_LEVEL"))));
}

TEST(ProfileTest, EveryProfileHasItsSourceAndDriversMapToOne) {
  for (const Profile& p : Profiles()) {
    EXPECT_EQ(FindProfile(p.name), &p);
    for (const ProfileVar& v : p.vars) {
      EXPECT_FALSE(v.source.empty()) << p.name << " " << v.name;
      EXPECT_FALSE(v.value.empty()) << p.name << " " << v.name;
    }
  }
  EXPECT_EQ(FindProfile("cxgb4"), nullptr);
  struct Case {
    const char* driver;
    const char* device;
    const char* want;
  } cases[] = {
      {"mlx5_core", "mlx5_3", "mlx5"},
      {"bnxt_en", "bnxt_re0", "bnxt_re"},
      {"ionic", "ionic_0", "ionic"},
      {"ice", "rocep23s0", "irdma"},
      {"efa", "rdmap16s27", "efa"},
      {"", "irdma1", "irdma"},
      {"", "efa_0", "efa"},
      {"", "rxe0", ""},
      {"cxgb4", "mlx5_0", ""},
      {"", "", ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ProfileOf(c.driver, c.device), c.want) << c.driver << " " << c.device;
  }
}

TEST(ProfileTest, IonicGetsAmdsRecipeOverTheComputedValues) {
  Request r = Ib(2);
  for (Pick& p : r.scope) {
    p.profile = "ionic";
    p.gpu_vendor = "amd";
    p.gpudirect = "dma_buf";
  }
  Result got = Must(r);
  EXPECT_EQ(got.job.at("NCCL_NET_PLUGIN"), "librccl-anp.so");
  EXPECT_EQ(got.job.at("NCCL_IB_TC"), "104");
  // The dma-buf decision gives way to the vendor's recipe, and the note says so.
  EXPECT_EQ(got.job.at("NCCL_DMABUF_ENABLE"), "0");
  EXPECT_THAT(Notes(got),
              HasSubstr("NIC profile ionic sets NCCL_DMABUF_ENABLE=0 over the computed 1"));
  EXPECT_EQ(got.job.at("NCCL_IB_HCA"), "=mlx5_0:1,mlx5_1:1");

  // The operator's changes: a site's traffic class, a variable left out.
  r.profile_env["ionic"] = {{"NCCL_IB_TC", "41"}, {"NCCL_MAX_P2P_CHANNELS", ""}};
  got = Must(r);
  EXPECT_EQ(got.job.at("NCCL_IB_TC"), "41");
  EXPECT_THAT(got.job, Not(Contains(Key("NCCL_MAX_P2P_CHANNELS"))));
  // static_env still wins over both.
  r.static_env = {{"NCCL_IB_TC", "106"}};
  EXPECT_EQ(Must(r).job.at("NCCL_IB_TC"), "106");
  // Without NCCL among the consumers, no NCCL recipe.
  r.consumers.nccl = false;
  EXPECT_THAT(Must(r).job, Not(Contains(Key("NCCL_NET_PLUGIN"))));
}

TEST(ProfileTest, NicsOfSeveralProfilesGetNone) {
  Request r = Ib(2);
  r.scope[1].profile = "bnxt_re";
  Result got = Must(r);
  EXPECT_THAT(got.job, Not(Contains(Key("NCCL_PXN_DISABLE"))));
  EXPECT_THAT(Notes(got), HasSubstr("NIC vendor profiles differ (bnxt_re on mlx5_1:1; mlx5 on "
                                    "mlx5_0:1)"));
}

TEST(ProfileTest, EfaIsReachedThroughLibfabricNotNcclIbHca) {
  Request r = Ib(2);
  for (int i = 0; i < 2; ++i) {
    r.scope[i].profile = "efa";
    r.scope[i].device = absl::StrCat("efa_", i);
  }
  Result got = Must(r);
  EXPECT_THAT(got.job, Not(Contains(Key("NCCL_IB_HCA"))));
  EXPECT_EQ(got.job.at("FI_EFA_IFACE"), "efa_0,efa_1");
  EXPECT_EQ(got.job.at("NCCL_NET_PLUGIN"), "ofi");
  EXPECT_THAT(Notes(got), HasSubstr("through a net plugin"));
  // A container given one device gets no list that names another.
  EXPECT_THAT(SubsetInvariant(got.job), Not(Contains(Key("FI_EFA_IFACE"))));
}

TEST(MixedVendorsTest, NvidiaAndAmdInOneJobGetUccOverUcxNotNccl) {
  Request r = Ib(2);
  r.scope[1].gpu_vendor = "amd";
  for (Pick& p : r.scope) p.gpudirect = "dma_buf";
  r.rank = 1;
  Result got = Must(r);
  for (const auto& [name, value] : got.job) {
    EXPECT_FALSE(name.starts_with("NCCL_")) << name << "=" << value;
  }
  EXPECT_EQ(got.job.at("UCC_CL_BASIC_TLS"), "ucp");
  EXPECT_EQ(got.pins.at("UCX_NET_DEVICES"), "mlx5_1:1");
  EXPECT_THAT(Notes(got), HasSubstr("ROCm/rccl#1220"));
  // One vendor with other accelerators beside it (gpu_vendor empty) is not mixed.
  r.scope[1].gpu_vendor.clear();
  got = Must(r);
  EXPECT_THAT(got.job, Contains(Key("NCCL_IB_HCA")));
  EXPECT_THAT(got.job, Not(Contains(Key("UCC_CL_BASIC_TLS"))));
}

}  // namespace
}  // namespace fabric::jobenv
