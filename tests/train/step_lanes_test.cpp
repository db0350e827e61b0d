// A step's slices side by side on the threads (train/step_lanes.h): at N
// threads a lone slice is split into N pieces that train exactly as N
// slices run in turn on one thread (--micro-batches N --threads 1), bit for
// bit; more slices than threads run in rounds, in slice order; a replica
// shares the model's weights and keeps its own gradients; a lane's error
// reaches the caller after every lane has run.
#include <gtest/gtest.h>

#include <omp.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "core/threads.h"
#include "tests/threads_scope.h"
#include "test_util.h"
#include "train/session.h"
#include "train/step_lanes.h"

namespace headlab::train {
namespace {

using test::flat_weights;

using Threads = headlab::test::ThreadsScope;

std::vector<std::pair<int64_t, int64_t>> pairs(const std::vector<Piece>& pieces) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Piece& p : pieces) out.emplace_back(p.first, p.rows);
  return out;
}

using Pairs = std::vector<std::pair<int64_t, int64_t>>;

TEST(StepPieces, ALoneSliceIsSplitAmongTheThreadsTheFirstOnesLonger) {
  EXPECT_EQ(pairs(step_pieces(0, 1, 10, 2)), (Pairs{{0, 5}, {5, 5}}));
  EXPECT_EQ(pairs(step_pieces(0, 1, 7, 3)), (Pairs{{0, 3}, {3, 2}, {5, 2}}));
  EXPECT_EQ(pairs(step_pieces(6, 1, 3, 4)), (Pairs{{6, 1}, {7, 1}, {8, 1}}));  // a rank's slice from row 6
  EXPECT_EQ(pairs(step_pieces(0, 1, 1, 2)), (Pairs{{0, 1}}));
  EXPECT_EQ(pairs(step_pieces(0, 1, 10, 1)), (Pairs{{0, 10}}));
  // Several slices stay the slices: their sums are --micro-batches' own.
  EXPECT_EQ(pairs(step_pieces(8, 2, 4, 2)), (Pairs{{8, 4}, {12, 4}}));
  EXPECT_EQ(pairs(step_pieces(0, 3, 2, 2)), (Pairs{{0, 2}, {2, 2}, {4, 2}}));
}

TrainConfig small_config() {
  TrainConfig c;
  c.model.d_model = 32;
  c.batch = 16;
  c.eval_batch = 32;
  c.seed = 5;
  return c;  // AdamW with clipping: the update reads every gradient's bits
}

struct Trained {
  std::vector<double> losses, grad_norms, weights;
};

Trained train(TrainConfig c, int threads, int64_t micro_batches, int steps) {
  const Threads scope(threads);
  c.micro_batches = micro_batches;
  Session s(c);
  Trained t;
  for (int i = 0; i < steps; ++i) {
    const StepResult r = s.step();
    t.losses.push_back(r.loss);
    t.grad_norms.push_back(r.grad_norm);
  }
  t.weights = flat_weights(s.model());
  return t;
}

void expect_same_bits(const Trained& a, const Trained& b) {
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.grad_norms, b.grad_norms);
  EXPECT_EQ(a.weights, b.weights);
}

TEST(StepLanes, TwoThreadsTrainTheBitsOfTwoSlicesInTurnOnOne) {
  const Trained lanes = train(small_config(), 2, 1, 4), in_turn = train(small_config(), 1, 2, 4);
  expect_same_bits(lanes, in_turn);
  // And not the plain one-slice step's (whose sums run in another order), so
  // the lanes did split the batch.
  EXPECT_NE(lanes.weights, train(small_config(), 1, 1, 4).weights);
}

TEST(StepLanes, MoreSlicesThanThreadsRunInRoundsInSliceOrder) {
  expect_same_bits(train(small_config(), 2, 4, 3), train(small_config(), 1, 4, 3));
}

// 7 rows on 2 threads: pieces of 4 and 3, each loss its share of the batch's
// targets, so the step is the whole batch's up to the rounding of the sums.
TEST(StepLanes, AnUnevenSplitStillStepsOnTheWholeBatch) {
  TrainConfig c = small_config();
  c.batch = 7;
  c.optimizer = "sgd";  // the update is -lr * gradient
  c.clip = 0;
  const Trained lanes = train(c, 2, 1, 3), whole = train(c, 1, 1, 3);
  ASSERT_EQ(lanes.losses.size(), whole.losses.size());
  for (std::size_t i = 0; i < whole.losses.size(); ++i) {
    EXPECT_NEAR(lanes.losses[i], whole.losses[i], 1e-5 * whole.losses[i]) << "step " << i;
    EXPECT_NEAR(lanes.grad_norms[i], whole.grad_norms[i], 1e-4 * whole.grad_norms[i]) << "step " << i;
  }
  double worst = 0;
  for (std::size_t i = 0; i < whole.weights.size(); ++i)
    worst = std::max(worst, std::abs(lanes.weights[i] - whole.weights[i]));
  EXPECT_LT(worst, 1e-4);
}

TEST(ModelLanes, AReplicaSharesTheWeightsAndKeepsItsOwnGradients) {
  core::Generator gen(1);
  layers::ModelSpec spec;
  spec.d_model = 16;
  layers::Transformer main(spec, gen);
  ModelLanes lanes;
  EXPECT_EQ(&lanes.model(main, main.parameters(), 0), &main);
  const layers::Transformer& replica = lanes.model(main, main.parameters(), 1);
  ASSERT_NE(&replica, &main);
  const auto mine = replica.parameters(), theirs = main.parameters();
  ASSERT_EQ(lanes.parameters(theirs, 1).size(), mine.size());
  EXPECT_EQ(lanes.parameters(theirs, 1)[0].node(), mine[0].node());
  ASSERT_EQ(mine.size(), theirs.size());
  for (std::size_t i = 0; i < mine.size(); ++i) {
    EXPECT_TRUE(mine[i].value().shares_storage(theirs[i].value())) << i;
    EXPECT_NE(mine[i].node(), theirs[i].node()) << i;
  }
  // An in-place update (the optimizer's) reaches the replica.
  main.parameters()[0].mutable_value().fill_(0.25);
  EXPECT_EQ(replica.parameters()[0].value().to_vector()[0], 0.25);
  // A backward through the replica leaves the model's gradients alone.
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  replica.forward(tokens, 1, 4).backward(core::Tensor::ones({1, 4, spec.resolved().classes}));
  EXPECT_TRUE(replica.parameters()[2].has_grad());
  for (const autograd::Variable& p : main.parameters()) EXPECT_FALSE(p.has_grad());
  // A parameter replaced in the model: the replica is built again over it.
  const auto [name, first] = main.named_parameters()[0];
  main.replace_parameter(name, autograd::Variable(first.value().clone(), true));
  EXPECT_TRUE(lanes.model(main, main.parameters(), 1).parameters()[0].value().shares_storage(
      main.parameters()[0].value()));
}

TEST(RunLanes, EachLaneRunsOnAThreadOfItsOwnWithOneThreadInside) {
  const Threads scope(2);
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<int> inner_max{0};
  run_lanes(2, [&](int) {
    inner_max = std::max(inner_max.load(), omp_get_max_threads());
    const std::lock_guard<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(inner_max.load(), 1);
  EXPECT_EQ(core::num_threads(), 2);  // the process's count is the same after
}

TEST(RunLanes, ALanesErrorReachesTheCallerAfterEveryLaneRan) {
  const Threads scope(2);
  std::atomic<int> ran{0};
  try {
    run_lanes(3, [&](int lane) {
      ++ran;
      if (lane == 1) throw std::invalid_argument("lane 1 failed");
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "lane 1 failed");
  }
  EXPECT_EQ(ran.load(), 3);  // 3 lanes on a team of 2: the third runs after one of them
}

}  // namespace
}  // namespace headlab::train
