#include "train/nearest_name.h"

#include <gtest/gtest.h>

namespace headlab::train {
namespace {

const std::vector<std::string> flags = {"d-model", "d-ff", "steps", "seq-len", "lr", "min-lr"};

TEST(NearestName, UnderscoreMatchesDash) { EXPECT_EQ(nearest_name("d_model", flags), "d-model"); }

TEST(NearestName, SuggestsTheClosestTypo) {
  EXPECT_EQ(nearest_name("stesp", flags), "steps");
  EXPECT_EQ(nearest_name("seqlen", flags), "seq-len");
  EXPECT_EQ(nearest_name("min_lr", flags), "min-lr");
}

TEST(NearestName, AnAbbreviationOfOneCandidateNamesIt) {
  EXPECT_EQ(nearest_name("vers", {"help", "version"}), "version");
  EXPECT_EQ(nearest_name("seq_", flags), "seq-len");  // '_' still counts as '-'
  EXPECT_EQ(nearest_name("se", flags), "");          // too short to tell
  EXPECT_EQ(nearest_name("sched", {"schedule", "schedule-steps"}), "");  // the beginning of two
}

TEST(NearestName, NothingWhenFarOrShort) {
  EXPECT_EQ(nearest_name("bogus", flags), "");
  EXPECT_EQ(nearest_name("xy", flags), "");  // 2 edits from "lr" is half the name
  EXPECT_EQ(nearest_name("anything", {}), "");
}

}  // namespace
}  // namespace headlab::train
