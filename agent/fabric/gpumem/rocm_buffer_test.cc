// RocmBuffer and LoadRocm against fake_rocm (a stand-in for HIP's and the HSA runtime): the
// loader's errors, each failure's reason, the export, and that every path gives back what it
// took (the fake's counters).
#include "agent/fabric/gpumem/rocm_buffer.h"

#include <dlfcn.h>
#include <fcntl.h>

#include <memory>

#include "absl/status/status.h"
#include "agent/fabric/gpumem/gpu_buffer.h"
#include "agent/fabric/gpumem/rocm_api.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fabric::gpumem {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class RocmBufferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The same handle LoadRocm gets (dlopen counts references), so the fake's state is shared.
    handle_ = dlopen(FAKE_ROCM, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    set_ = reinterpret_cast<void (*)(const char*, long long)>(dlsym(handle_, "fake_rocm_set"));
    get_ = reinterpret_cast<long long (*)(const char*)>(dlsym(handle_, "fake_rocm_get"));
    ASSERT_NE(set_, nullptr);
    ASSERT_NE(get_, nullptr);
    set_("reset", 0);
  }
  void TearDown() override {
    if (handle_ != nullptr) dlclose(handle_);
  }

  std::unique_ptr<RocmApi> Load(bool dmabuf = true) {
    absl::StatusOr<std::unique_ptr<RocmApi>> rocm = LoadRocm(FAKE_ROCM, FAKE_ROCM, dmabuf);
    EXPECT_TRUE(rocm.ok()) << rocm.status();
    return rocm.ok() ? std::move(*rocm) : nullptr;
  }
  void ExpectNothingHeld() {
    EXPECT_EQ(get_("allocated"), 0);
    EXPECT_EQ(get_("exported"), 0);
  }

  void* handle_ = nullptr;
  void (*set_)(const char*, long long) = nullptr;
  long long (*get_)(const char*) = nullptr;
};

TEST_F(RocmBufferTest, NoRocmHere) {
  // None of the default names loads on the build hosts: the message lists what was tried.
  absl::StatusOr<std::unique_ptr<RocmApi>> rocm = LoadRocm();
  ASSERT_FALSE(rocm.ok());
  EXPECT_EQ(rocm.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(rocm.status().message()),
              StartsWith("no ROCm here: none of libamdhip64.so.6, libamdhip64.so.5, "
                         "libamdhip64.so loads ("));
}

TEST_F(RocmBufferTest, NamedLibraryMissing) {
  absl::StatusOr<std::unique_ptr<RocmApi>> rocm = LoadRocm("/nonexistent/libamdhip64.so.6");
  ASSERT_FALSE(rocm.ok());
  EXPECT_THAT(std::string(rocm.status().message()),
              StartsWith("/nonexistent/libamdhip64.so.6 not found: no ROCm here ("));
}

TEST_F(RocmBufferTest, NotHip) {
  absl::StatusOr<std::unique_ptr<RocmApi>> rocm = LoadRocm("libc.so.6");
  ASSERT_FALSE(rocm.ok());
  EXPECT_EQ(rocm.status().message(), "libc.so.6 has no hipInit");
}

TEST_F(RocmBufferTest, HsaRuntimeMissingOrWithoutExport) {
  absl::StatusOr<std::unique_ptr<RocmApi>> rocm =
      LoadRocm(FAKE_ROCM, "/nonexistent/libhsa-runtime64.so.1");
  ASSERT_FALSE(rocm.ok());
  EXPECT_THAT(std::string(rocm.status().message()),
              StartsWith("/nonexistent/libhsa-runtime64.so.1 not found: the HSA runtime, whose "
                         "dma-buf export ROCm needs ("));
  rocm = LoadRocm(FAKE_ROCM, "libc.so.6");
  ASSERT_FALSE(rocm.ok());
  EXPECT_EQ(rocm.status().message(),
            "libc.so.6 has no hsa_amd_portable_export_dmabuf: a ROCm without dma-buf export (use "
            "the peer-memory path)");
  // The peer-memory path does not need the HSA runtime at all.
  EXPECT_TRUE(LoadRocm(FAKE_ROCM, "/nonexistent/libhsa-runtime64.so.1", false).ok());
}

TEST_F(RocmBufferTest, ExportAndFree) {
  set_("misalign", 0x100);
  auto rocm = Load();
  ASSERT_NE(rocm, nullptr);
  int fd = -1;
  {
    // Bus ids are matched without regard to case; the fake's bus id is its second GPU.
    auto b = RocmBuffer::Allocate(*rocm, "0000:C1:00.0", 100000);
    ASSERT_TRUE(b.ok()) << b.status();
    const RocmBuffer& buf = **b;
    EXPECT_EQ(get_("current_device"), 1);
    EXPECT_EQ(buf.size(), 2 * kGpuAllocGranularity);  // rounded as perftest's ACCEL_PAGE_SIZE
    EXPECT_EQ(get_("malloc_size"), static_cast<long long>(2 * kGpuAllocGranularity));
    EXPECT_EQ(buf.device_ptr(), 0x7e0000000000ULL + 0x100);
    EXPECT_EQ(buf.offset(), 0x100u);  // what the runtime said
    EXPECT_EQ(get_("export_size"), static_cast<long long>(buf.size()));
    fd = buf.dmabuf_fd();
    ASSERT_GE(fd, 0);
    EXPECT_EQ(fd, get_("export_fd"));
    EXPECT_EQ(get_("allocated"), 1);
    EXPECT_EQ(get_("exported"), 1);
  }
  // Closed through the runtime (the fake closes the fd), then freed.
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  ExpectNothingHeld();
}

TEST_F(RocmBufferTest, WithoutExport) {
  auto rocm = Load(false);
  ASSERT_NE(rocm, nullptr);
  auto b = RocmBuffer::Allocate(*rocm, "1", 1, false);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->dmabuf_fd(), -1);
  EXPECT_EQ(get_("exported"), 0);
  EXPECT_EQ(get_("current_device"), 1);
  // ExportDmabuf needs the HSA runtime, which this load skipped.
  absl::Status s = (*b)->ExportDmabuf();
  EXPECT_THAT(s.message(), HasSubstr("hsa_amd_portable_export_dmabuf of 65536 bytes failed: "
                                     "HSA status 0x100b"));
  EXPECT_TRUE((*b)->Free().ok());
  EXPECT_TRUE((*b)->Free().ok());  // once: nothing is freed twice
  ExpectNothingHeld();
}

TEST_F(RocmBufferTest, FailuresSayWhyAndGiveBackWhatTheyTook) {
  struct Case {
    const char* knob;  // fake_rocm_set(knob, value), or null
    const char* gpu;
    absl::StatusCode code;
    const char* why;
  };
  const Case cases[] = {
      {"init_fails", "0", absl::StatusCode::kInternal,
       "hipInit failed: hipErrorInvalidDevice (HIP error 101)"},
      {nullptr, "0000:af:00.0", absl::StatusCode::kNotFound,
       "no GPU at PCI bus id 0000:af:00.0 (2 HIP devices here; hipErrorInvalidDevice"},
      {nullptr, "2", absl::StatusCode::kNotFound, "no GPU with HIP index 2 (2 HIP devices here)"},
      {"alloc_fails", "0", absl::StatusCode::kInternal,
       "GPU 0: hipMalloc of 65536 bytes failed: hipErrorOutOfMemory (HIP error 2)"},
      // Export fails after hipMalloc: the allocation is freed.
      {"export_fails", "0", absl::StatusCode::kInternal,
       "GPU 0: hsa_amd_portable_export_dmabuf of 65536 bytes failed: HSA status 0x1003"},
  };
  for (const Case& c : cases) {
    set_("reset", 0);
    if (c.knob != nullptr) set_(c.knob, 1);
    auto rocm = Load();
    ASSERT_NE(rocm, nullptr);
    auto b = RocmBuffer::Allocate(*rocm, c.gpu, 4096);
    ASSERT_FALSE(b.ok()) << c.why;
    EXPECT_EQ(b.status().code(), c.code) << b.status();
    EXPECT_THAT(b.status().message(), HasSubstr(c.why));
    ExpectNothingHeld();
  }
}

TEST_F(RocmBufferTest, HsaStatusTextFromTheRuntime) {
  auto rocm = Load();
  ASSERT_NE(rocm, nullptr);
  EXPECT_THAT(HsaStatusText(*rocm, 0x1001),
              StartsWith("HSA_STATUS_ERROR_INVALID_ARGUMENT: One of the actual arguments"));
  EXPECT_THAT(HsaStatusText(*rocm, 0x1001), HasSubstr("(HSA status 0x1001)"));
}

TEST_F(RocmBufferTest, FreeReturnsEveryFailure) {
  auto rocm = Load();
  ASSERT_NE(rocm, nullptr);
  auto b = RocmBuffer::Allocate(*rocm, "0", 1);
  ASSERT_TRUE(b.ok()) << b.status();
  set_("close_fails", 1);
  set_("free_fails", 1);
  absl::Status s = (*b)->Free();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("GPU 0: hsa_amd_portable_close_dmabuf failed: "
                                     "HSA_STATUS_ERROR_INVALID_ARGUMENT"));
  EXPECT_THAT(s.message(), HasSubstr("; GPU 0: hipFree failed: hipErrorInvalidValue"));
  EXPECT_TRUE((*b)->Free().ok());  // both were tried once and are not tried again
  ExpectNothingHeld();
}

TEST_F(RocmBufferTest, UnloadOnce) {
  auto rocm = Load();
  ASSERT_NE(rocm, nullptr);
  EXPECT_TRUE(rocm->Unload().ok());
  EXPECT_TRUE(rocm->Unload().ok());
}

}  // namespace
}  // namespace fabric::gpumem
