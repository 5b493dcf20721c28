#include "agent/fabric/probes/verbs_handles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

namespace fabric::probes {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A stand-in for a verbs object: its destroy records its id and returns `rc` with errno `err`.
struct Fake {
  int id;
  int rc = 0;
  int err = 0;
};

std::vector<int> destroyed;

int DestroyFake(Fake* f) {
  destroyed.push_back(f->id);
  if (f->err != 0) errno = f->err;
  return f->rc;
}

void DestroyFakeVoid(Fake* f) { destroyed.push_back(f->id); }

using FakeHandle = Owned<Fake, DestroyFake>;
using FakeVoidHandle = Owned<Fake, DestroyFakeVoid>;

class OwnedTest : public ::testing::Test {
 protected:
  void SetUp() override { destroyed.clear(); }
};

TEST_F(OwnedTest, ReleasesOnceAndReportsNothingOnSuccess) {
  ReleaseErrors errors;
  Fake f{1};
  {
    FakeHandle h(&f, "destroy_fake", errors);
    h.reset();
    h.reset();
  }
  EXPECT_THAT(destroyed, ElementsAre(1));
  EXPECT_TRUE(errors.Take().ok());
}

TEST_F(OwnedTest, ReportsAnErrnoReturn) {
  ReleaseErrors errors;
  Fake f{1, EIO};
  { FakeHandle h(&f, "ibv_destroy_qp", errors); }
  absl::Status s = errors.Take();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "ibv_destroy_qp: Input/output error");
  EXPECT_TRUE(errors.Take().ok()) << "taken once";
}

TEST_F(OwnedTest, NegativeReturnMeansErrno) {
  ReleaseErrors errors;
  Fake busy{1, -1, EBUSY};
  Fake silent{2, -1, 0};  // -1 without errno: EIO
  {
    FakeHandle a(&busy, "rdma_destroy_id", errors);
    FakeHandle b(&silent, "rdma_disconnect", errors);
  }
  EXPECT_EQ(errors.Take().message(),
            "rdma_disconnect: Input/output error; rdma_destroy_id: Device or resource busy");
}

TEST_F(OwnedTest, VoidDestroyCannotFail) {
  ReleaseErrors errors;
  Fake f{1, -1, EIO};
  { FakeVoidHandle h(&f, "rdma_destroy_qp", errors); }
  EXPECT_THAT(destroyed, ElementsAre(1));
  EXPECT_TRUE(errors.Take().ok());
}

// Members declared in creation order are destroyed in reverse; a failure does not stop the
// rest, and every failure is reported, in the order the destroys ran.
TEST_F(OwnedTest, StructReleasesInReverseAndKeepsGoingPastFailures) {
  struct Objects {
    FakeHandle first;
    FakeHandle second;
    FakeHandle third;
  };
  ReleaseErrors errors;
  Fake a{1, EIO}, b{2}, c{3, -1, ENODEV};
  {
    Objects o;
    o.first = FakeHandle(&a, "ibv_dealloc_pd", errors);
    o.second = FakeHandle(&b, "ibv_dereg_mr", errors);
    o.third = FakeHandle(&c, "ibv_destroy_cq (send)", errors);
  }
  EXPECT_THAT(destroyed, ElementsAre(3, 2, 1));
  EXPECT_EQ(errors.Take().message(),
            "ibv_destroy_cq (send): No such device; ibv_dealloc_pd: Input/output error");
}

TEST_F(OwnedTest, PopBackToFrontReleasesTheNewestFirst) {
  ReleaseErrors errors;
  Fake a{1}, b{2}, c{3};
  std::vector<FakeHandle> v;
  v.emplace_back(&a, "x", errors);
  v.emplace_back(&b, "x", errors);
  v.emplace_back(&c, "x", errors);
  PopBackToFront(v);
  EXPECT_THAT(destroyed, ElementsAre(3, 2, 1));
}

TEST_F(OwnedTest, MovedFromReleasesNothingAndMoveAssignReleasesTheOld) {
  ReleaseErrors errors;
  Fake a{1}, b{2};
  {
    FakeHandle h(&a, "x", errors);
    FakeHandle moved(std::move(h));
    EXPECT_EQ(h.get(), nullptr);  // NOLINT(bugprone-use-after-move): the point of the test
    EXPECT_EQ(moved.get(), &a);
    moved = FakeHandle(&b, "x", errors);
    EXPECT_THAT(destroyed, ElementsAre(1));
  }
  EXPECT_THAT(destroyed, ElementsAre(1, 2));
}

TEST_F(OwnedTest, FailuresNotTakenAreLogged) {
  Fake f{1, EIO};
  ::testing::internal::CaptureStderr();
  {
    ReleaseErrors errors;
    FakeHandle h(&f, "ibv_close_device", errors);
    h.reset();
  }
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("releasing RDMA resources: ibv_close_device: Input/output error"));
}

TEST_F(OwnedTest, TakenFailuresAreNotLoggedAgain) {
  Fake f{1, EIO};
  ::testing::internal::CaptureStderr();
  {
    ReleaseErrors errors;
    FakeHandle h(&f, "ibv_close_device", errors);
    h.reset();
    EXPECT_FALSE(errors.Take().ok());
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace fabric::probes
