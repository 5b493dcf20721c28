#include "agent/policy/health/health_section.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace fabric {
namespace {

using namespace ::fabric::v1;  // NOLINT

TEST(HealthSection, ChecksEveryField) {
  EXPECT_TRUE(ValidateHealthConfig({}).ok());
  auto bad = [](const std::function<void(HealthConfig&)>& edit, const std::string& says) {
    HealthConfig c;
    edit(c);
    absl::Status s = ValidateHealthConfig(c);
    EXPECT_FALSE(s.ok()) << says;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(says));
  };
  bad([](HealthConfig& c) { c.set_poll_interval_s(0.01); }, "pollIntervalS");
  bad([](HealthConfig& c) { c.set_sticky_s(-1); }, "stickyS");
  bad([](HealthConfig& c) { c.set_flap_window_s(1e300); }, "flapWindowS");
  bad([](HealthConfig& c) { c.add_counter_exclude("mlx5_0:x"); }, "counterExclude");
  bad([](HealthConfig& c) { c.add_counter_exclude(""); }, "counterExclude");
  bad([](HealthConfig& c) { c.add_dry_run_codes("Counter"); }, "dryRunCodes");
  bad([](HealthConfig& c) { c.add_host_classes()->set_name("x"); }, "gpuModels");
  bad(
      [](HealthConfig& c) {
        HostClass* k = c.add_host_classes();
        k->set_name("x");
        k->add_gpu_models("H100");
        k->set_gpus(8);
        k->set_ports(8);
      },
      "rateGbps");
  HealthConfig good;
  good.set_poll_interval_s(1);
  good.add_counter_exclude("mlx5_0");
  good.add_counter_exclude("mlx5_1:1");
  good.add_dry_run_codes("counter.symbol_error.1h");
  EXPECT_TRUE(ValidateHealthConfig(good).ok()) << ValidateHealthConfig(good);
}

}  // namespace
}  // namespace fabric
