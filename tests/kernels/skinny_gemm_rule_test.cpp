// The skinny GEMM's launch-order rule (kernels/skinny_gemm.h): on more than one rank it lets the
// next kernel launch only after its own wait, on one GPU at its start, and the comparison switch
// overrides either way; the config's name and equality carry the choice.
#include <gtest/gtest.h>

#include "kernels/skinny_gemm.h"

namespace nanovllm {
namespace {

using kernels::skinny_next_launch_after_wait;
using kernels::SkinnyGemmConfig;
using kernels::SkinnyNextLaunch;

// tp 2 and 4 were measured; one GPU lost with it.
TEST(SkinnyNextLaunch, SeveralRanksLetTheNextKernelLaunchAfterTheWait) {
  for (const int tp : {2, 4, 8})
    EXPECT_TRUE(skinny_next_launch_after_wait(tp, SkinnyNextLaunch::kAuto)) << tp;
  EXPECT_FALSE(skinny_next_launch_after_wait(1, SkinnyNextLaunch::kAuto));
}

TEST(SkinnyNextLaunch, TheSwitchOverridesTheRuleBothWays) {
  EXPECT_FALSE(skinny_next_launch_after_wait(4, SkinnyNextLaunch::kStart));
  EXPECT_TRUE(skinny_next_launch_after_wait(1, SkinnyNextLaunch::kAfterWait));
}

TEST(SkinnyNextLaunch, TheConfigNamesAndComparesTheChoice) {
  SkinnyGemmConfig c{32, 8, 2, true};
  EXPECT_EQ(c.name(), "r32w8c2+pdl");
  SkinnyGemmConfig after = c;
  after.next_after_wait = true;
  EXPECT_EQ(after.name(), "r32w8c2+pdl+after");
  EXPECT_FALSE(after == c);
}

}  // namespace
}  // namespace nanovllm
