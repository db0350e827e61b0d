// The processes of an MPI job compare what they are about to train: the
// fingerprint of a session, and the message naming what differs between
// ranks. The exchange itself runs under mpirun in tests/cli/mpi_test.sh.
#include <gtest/gtest.h>

#include "train/errors.h"
#include "train/rank_agreement.h"
#include "train/session.h"

namespace headlab::train {
namespace {

TrainConfig tiny() {
  TrainConfig c;
  c.model.d_model = 16;
  c.batch = 8;
  c.eval_batch = 16;
  c.steps = 4;
  c.threads = 1;
  return c;
}

TEST(RankAgreement, SameRunAgrees) {
  Session a(tiny()), b(tiny());
  EXPECT_EQ(disagreement({run_fingerprint(a), run_fingerprint(b)}), "");
}

TEST(RankAgreement, ThreadsMayDifferPerHost) {
  TrainConfig other = tiny();
  other.threads = 2;
  Session a(tiny()), b(other);
  EXPECT_EQ(disagreement({run_fingerprint(a), run_fingerprint(b)}), "");
}

TEST(RankAgreement, NamesTheFlagAndEachRanksValue) {
  TrainConfig other = tiny();
  other.model.d_model = 32;
  Session a(tiny()), b(other);
  const std::string message = disagreement({run_fingerprint(a), run_fingerprint(b)});
  EXPECT_NE(message.find("the 2 processes of this job would train different runs"), std::string::npos) << message;
  EXPECT_NE(message.find("--d-model is 16 on process 0, 32 on process 1"), std::string::npos) << message;
  // The model and the state follow from the flag: not named beside it.
  EXPECT_EQ(message.find("the model's"), std::string::npos) << message;
  EXPECT_EQ(message.find("hash"), std::string::npos) << message;
}

TEST(RankAgreement, NamesEveryDifferingSettingOnce) {
  TrainConfig other = tiny();
  other.lr = 0.5;
  other.seed = 9;
  Session a(tiny()), b(tiny()), c(other);
  const std::string message = disagreement({run_fingerprint(a), run_fingerprint(b), run_fingerprint(c)});
  EXPECT_NE(message.find("--lr is 0.001 on processes 0, 1, 0.5 on process 2"), std::string::npos) << message;
  EXPECT_NE(message.find("--seed is 0 on processes 0, 1, 9 on process 2"), std::string::npos) << message;
}

TEST(RankAgreement, ResumingAtAnotherStepDisagrees) {
  Session a(tiny()), b(tiny());
  b.step();
  const std::string message = disagreement({run_fingerprint(a), run_fingerprint(b)});
  EXPECT_NE(message.find("the step it starts from is 0 on process 0, 1 on process 1"), std::string::npos) << message;
}

TEST(RankAgreement, TheStateHashAloneIsNamedWhenNothingElseDiffers) {
  Session a(tiny()), b(tiny());
  // Another checkpoint at the same step and with the same settings.
  core::Tensor weight = b.model().named_parameters().front().second.value();  // shares the storage
  weight.fill_(0.25);
  const std::string message = disagreement({run_fingerprint(a), run_fingerprint(b)});
  EXPECT_NE(message.find("the hash of its weights, optimizer state and data stream is "), std::string::npos) << message;
}

TEST(RankAgreement, AMissingKeyIsADifference) {
  const RunFingerprint full = {{"--lr", "0.1", false}, {"--seed", "1", false}};
  const RunFingerprint partial = {{"--lr", "0.1", false}};
  EXPECT_NE(disagreement({full, partial}).find("--seed is 1 on process 0, (none) on process 1"), std::string::npos);
}

TEST(RankAgreement, ManyRanksAndKeysStayOneReadableLine) {
  std::vector<RunFingerprint> ranks(9, RunFingerprint{});
  for (int r = 0; r < 9; ++r)
    for (int k = 0; k < 8; ++k) ranks[static_cast<std::size_t>(r)].push_back({"--k" + std::to_string(k), r ? "b" : "a", false});
  const std::string message = disagreement(ranks);
  EXPECT_NE(message.find("--k0 is a on process 0, b on processes 1, 2, 3, 4 and 4 more"), std::string::npos) << message;
  EXPECT_NE(message.find("; and 3 more"), std::string::npos) << message;
  EXPECT_EQ(message.find("--k5"), std::string::npos) << message;
}

TEST(RankAgreement, OneProcessHasNothingToCompare) {
  Session a(tiny());
  EXPECT_NO_THROW(check_ranks_agree(dist::World::single(), run_fingerprint(a)));
}

}  // namespace
}  // namespace headlab::train
