// NANOVLLM_KNOCK_OUT's list (layers/knock_out.h): each name sets its op's bit, a bad entry is
// refused naming itself, and the process reads the variable once.
#include "layers/knock_out.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace nanovllm {
namespace {

uint32_t bit(LayerOp op) {
  return static_cast<uint32_t>(op);
}

TEST(KnockOut, EachNameSetsItsOpAndAListSetsTheirUnion) {
  EXPECT_EQ(parse_knock_out(""), 0u);
  EXPECT_EQ(parse_knock_out("qkv_proj"), bit(LayerOp::kQkvProj));
  EXPECT_EQ(parse_knock_out("rope"), bit(LayerOp::kRope));
  EXPECT_EQ(parse_knock_out("attention"), bit(LayerOp::kAttention));
  EXPECT_EQ(parse_knock_out("o_proj"), bit(LayerOp::kOProj));
  EXPECT_EQ(parse_knock_out("norm"), bit(LayerOp::kNorm));
  EXPECT_EQ(parse_knock_out("gate_up"), bit(LayerOp::kGateUp));
  EXPECT_EQ(parse_knock_out("down"), bit(LayerOp::kDown));
  EXPECT_EQ(parse_knock_out("down,o_proj,down"), bit(LayerOp::kDown) | bit(LayerOp::kOProj));
}

TEST(KnockOut, AnUnknownOrEmptyEntryIsRefusedByName) {
  for (const std::string bad : {"mlp", "o_proj,", ",down", "o_proj,,down", "O_PROJ", " down"}) {
    try {
      parse_knock_out(bad);
      ADD_FAILURE() << "'" << bad << "' was taken";
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("unknown operation"), std::string::npos) << what;
      EXPECT_NE(what.find("qkv_proj"), std::string::npos) << "names the ops taken: " << what;
    }
  }
}

// The only test of this binary that reads the environment: the process parses it at its first
// question and keeps the answer.
TEST(KnockOut, TheProcessTakesItsListFromTheEnvironmentOnce) {
  ASSERT_EQ(setenv("NANOVLLM_KNOCK_OUT", "attention,down", 1), 0);
  EXPECT_TRUE(knocked_out(LayerOp::kAttention));
  EXPECT_TRUE(knocked_out(LayerOp::kDown));
  EXPECT_FALSE(knocked_out(LayerOp::kOProj));
  EXPECT_FALSE(knocked_out(LayerOp::kQkvProj));
  ASSERT_EQ(setenv("NANOVLLM_KNOCK_OUT", "o_proj", 1), 0);
  EXPECT_TRUE(knocked_out(LayerOp::kAttention)) << "read once";
  EXPECT_FALSE(knocked_out(LayerOp::kOProj)) << "read once";
  unsetenv("NANOVLLM_KNOCK_OUT");
}

}  // namespace
}  // namespace nanovllm
