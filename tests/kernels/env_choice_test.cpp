// kernels/env_choice.h: the one rule of the kernels' comparison switches in the environment.
#include "kernels/env_choice.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "kernels/check.h"

namespace nanovllm::test {
namespace {

constexpr const char* kVar = "NANOVLLM_ENV_CHOICE_TEST";

TEST(EnvChoice, UnsetIsAutoAndAnAllowedValueIsReturned) {
  unsetenv(kVar);
  EXPECT_EQ(kernels::env_choice(kVar, {"pieces", "stream", "auto"}), "auto");
  setenv(kVar, "stream", 1);
  EXPECT_EQ(kernels::env_choice(kVar, {"pieces", "stream", "auto"}), "stream");
  setenv(kVar, "auto", 1);
  EXPECT_EQ(kernels::env_choice(kVar, {"pieces", "stream", "auto"}), "auto");
  unsetenv(kVar);
}

TEST(EnvChoice, AnyOtherValueFailsNamingTheVariableTheValueAndWhatItTakes) {
  setenv(kVar, "Stream", 1);  // case matters
  try {
    kernels::env_choice(kVar, {"pieces", "stream", "auto"});
    ADD_FAILURE() << "no error for 'Stream'";
  } catch (const CheckError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(kVar), std::string::npos) << m;
    EXPECT_NE(m.find("pieces, stream, auto"), std::string::npos) << m;
    EXPECT_NE(m.find("'Stream'"), std::string::npos) << m;
  }
  unsetenv(kVar);
}

enum class Walk { kAuto, kPieces, kStream };

Walk walk_from_env() {
  return kernels::env_enum(
      kVar, {std::pair{"pieces", Walk::kPieces}, {"stream", Walk::kStream}, {"auto", Walk::kAuto}});
}

TEST(EnvChoice, AnEnumSwitchGivesTheValuePairedWithItsName) {
  unsetenv(kVar);
  EXPECT_EQ(walk_from_env(), Walk::kAuto);
  setenv(kVar, "pieces", 1);
  EXPECT_EQ(walk_from_env(), Walk::kPieces);
  setenv(kVar, "stream", 1);
  EXPECT_EQ(walk_from_env(), Walk::kStream);
  setenv(kVar, "streams", 1);
  EXPECT_THROW(walk_from_env(), CheckError);
  unsetenv(kVar);
}

TEST(EnvChoice, AnEnumSwitchWithoutAutoFailsUnset) {
  unsetenv(kVar);
  EXPECT_THROW(kernels::env_enum(kVar, {std::pair{"pieces", Walk::kPieces}}), CheckError);
}

}  // namespace
}  // namespace nanovllm::test
