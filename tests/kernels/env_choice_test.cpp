// kernels/env_choice.h: the one rule of the kernels' comparison switches in the environment.
#include "kernels/env_choice.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

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

}  // namespace
}  // namespace nanovllm::test
