#include "core/progress.h"

#include <gtest/gtest.h>

namespace berth {
namespace {

TEST(HumanSize, DecimalUnitsLikeDocker) {
  EXPECT_EQ(human_size(0), "0 B");
  EXPECT_EQ(human_size(999), "999 B");
  EXPECT_EQ(human_size(1000), "1 kB");
  EXPECT_EQ(human_size(1500000), "1.5 MB");
  EXPECT_EQ(human_size(231000000), "231 MB");
  EXPECT_EQ(human_size(4200000000LL), "4.2 GB");
}

TEST(ProgressMeter, DisabledMeterIsSilentAndSafe) {
  testing::internal::CaptureStderr();
  {
    ProgressMeter m(false);
    int id = m.add("layer", 100);
    m.advance(id, 50);
    m.advance(id + 7, 1);  // a disabled meter does not look at the id
    m.set_status(id, "Done");
    m.finish();
  }
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace berth
