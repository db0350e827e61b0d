// Finite training sets (--train-size, --train-fraction, --eval-data): the
// split is disjoint and a function of the seed, epochs visit every training
// example once in a fresh order, full batches, exact resume, the train and
// held-out metrics; and the optimizer options that the grokking setup needs
// (weight decay as a lever, betas, eps).
#include "train/fixed_sets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "analysis/progress_measures.h"
#include "optim/adam.h"
#include "tests/train/test_util.h"
#include "train/errors.h"
#include "train/run_builder.h"
#include "train/run_folder.h"
#include "train/session.h"
#include "train/trainer.h"

namespace headlab::train {
namespace {

namespace fs = std::filesystem;

// Modular addition mod p = 11: 121 pairs.
TrainConfig mod_config(double fraction = 0.3) {
  TrainConfig c;
  c.task = "modular-addition";
  c.model.vocab = 12;
  c.model.max_seq_len = 3;
  c.model.d_model = 16;
  c.train_fraction = fraction;
  c.batch = 7;
  c.eval_batch = 1000;
  c.seed = 3;
  return c;
}

// Each row as its (a, b) pair.
std::vector<std::pair<int, int>> pairs_of(const Batch& b) {
  std::vector<std::pair<int, int>> out;
  for (int64_t r = 0; r < b.batch; ++r) {
    const auto at = static_cast<std::size_t>(r * b.seq_len);
    out.emplace_back(b.tokens[at], b.tokens[at + 1]);
  }
  return out;
}

std::vector<std::vector<int32_t>> rows_of(const Batch& b) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t r = 0; r < b.batch; ++r) {
    const auto at = b.tokens.begin() + r * b.seq_len;
    out.emplace_back(at, at + b.seq_len);
  }
  return out;
}

using test::flat_weights;

TEST(FixedSets, ModularAdditionSplitIsDisjointCompleteAndSeeded) {
  const TrainConfig c = mod_config();
  const auto task = make_task_for(c);
  ASSERT_EQ(task->size(), 36);  // round(0.3 * 121)
  const auto train = pairs_of(task->rows(0, task->size()));
  const Batch held = task->eval_batch(c.eval_batch, c.seed);
  ASSERT_EQ(held.batch, 121 - 36);
  EXPECT_EQ(task->eval_rows(10), 10);
  std::set<std::pair<int, int>> all(train.begin(), train.end());
  EXPECT_EQ(all.size(), train.size()) << "a training pair appears twice";
  for (const auto& pair : pairs_of(held)) EXPECT_TRUE(all.insert(pair).second) << "held out and trained on";
  EXPECT_EQ(all.size(), 121u);  // together, every pair once
  // Targets are (a + b) mod p at '='.
  for (int64_t r = 0; r < held.batch; ++r)
    EXPECT_EQ(held.targets[static_cast<std::size_t>(3 * r + 2)],
              (held.tokens[static_cast<std::size_t>(3 * r)] + held.tokens[static_cast<std::size_t>(3 * r + 1)]) % 11);

  // The same seed gives the same split; another seed another one.
  EXPECT_EQ(pairs_of(make_task_for(c)->rows(0, 36)), train);
  TrainConfig other = c;
  other.seed = 4;
  EXPECT_NE(pairs_of(make_task_for(other)->rows(0, 36)), train);
  // --train-size N is the same split's first N.
  TrainConfig sized = c;
  sized.train_fraction = 0;
  sized.train_size = 36;
  EXPECT_EQ(pairs_of(make_task_for(sized)->rows(0, 36)), train);
}

TEST(FixedSets, SplitSeedFixesTheSplitWhateverTheSeed) {
  const TrainConfig c = mod_config();
  const auto split = [](const TrainConfig& config) { return pairs_of(make_task_for(config)->rows(0, 36)); };
  // By default the split is --seed's; --split-seed gives that same split
  // under any --seed, and another split seed another split.
  TrainConfig fixed = c;
  fixed.split_seed = static_cast<int64_t>(c.seed);
  fixed.seed = c.seed + 1;
  EXPECT_EQ(split(fixed), split(c));
  TrainConfig other = fixed;
  other.split_seed = 11;
  EXPECT_NE(split(other), split(c));
  // The seed still sets the weights: the same split, other first steps.
  Session a(c), b(fixed);
  EXPECT_NE(a.step().loss, b.step().loss);
}

TEST(FixedSets, AnyTaskHoldsOutWhatItTrainsOn) {
  TrainConfig c;  // first-prev-pair, V 8, T 6
  c.model.vocab = 3;
  c.model.max_seq_len = 4;  // 81 sequences
  c.train_size = 40;
  c.eval_batch = 30;
  const auto task = make_task_for(c);
  ASSERT_EQ(task->size(), 40);
  const auto train = rows_of(task->rows(0, 40));
  const std::set<std::vector<int32_t>> trained(train.begin(), train.end());
  const Batch held = task->eval_batch(c.eval_batch, c.seed);
  ASSERT_EQ(held.batch, 30);
  for (const auto& row : rows_of(held)) EXPECT_FALSE(trained.count(row)) << "a held-out sequence is trained on";
  EXPECT_EQ(rows_of(make_task_for(c)->eval_batch(c.eval_batch, c.seed)), rows_of(held));  // deterministic
  // Without a split the task evaluates on its own batch, which does overlap.
  TrainConfig plain = c;
  plain.train_size = 0;
  const auto own = rows_of(make_task_for(plain)->eval_batch(c.eval_batch, c.seed));
  EXPECT_TRUE(std::any_of(own.begin(), own.end(), [&](const auto& row) { return trained.count(row) > 0; }));

  // A training set that holds nearly every sequence leaves too few to hold out.
  c.model.vocab = 2;
  c.model.max_seq_len = 2;  // 4 sequences
  c.train_size = 400;
  c.eval_batch = 8;
  EXPECT_THROW(make_task_for(c)->eval_batch(c.eval_batch, c.seed), UsageError);
}

TEST(FixedSets, EachEpochVisitsEveryTrainingExampleOnceInAFreshOrder) {
  const TrainConfig c = mod_config();
  const auto task = make_task_for(c);
  const int64_t n = task->size();
  core::Generator gen(9);
  // 36 = 4 batches of 9: two epochs, batch by batch.
  std::vector<std::pair<int, int>> epochs[2];
  for (auto& epoch : epochs)
    for (int i = 0; i < 4; ++i) {
      const auto got = pairs_of(task->sample(9, gen));
      epoch.insert(epoch.end(), got.begin(), got.end());
    }
  auto set = pairs_of(task->rows(0, n));
  std::sort(set.begin(), set.end());
  for (auto& epoch : epochs) {
    auto sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, set) << "an epoch is not the training set";
  }
  EXPECT_NE(epochs[0], epochs[1]) << "the second epoch repeats the first's order";
  EXPECT_NE(epochs[0], pairs_of(task->rows(0, n))) << "the epoch is not shuffled";
  // A batch that straddles two epochs: 20 + 20 of 36.
  const auto straddle = make_task_for(c);
  core::Generator g2(9);
  std::map<std::pair<int, int>, int> seen;
  for (const auto& p : pairs_of(straddle->sample(20, g2))) ++seen[p];
  for (const auto& p : pairs_of(straddle->sample(20, g2))) ++seen[p];
  int twice = 0;
  for (const auto& [p, count] : seen) twice += count == 2;
  EXPECT_EQ(seen.size(), 36u);
  EXPECT_EQ(twice, 4);  // the second epoch's first 4
}

TEST(FixedSets, FullBatchTrainsOnTheWholeSetEveryStep) {
  TrainConfig c = mod_config();
  c.batch = 0;
  Session s(c);
  EXPECT_EQ(s.batch_rows(), 36);
  // Every step's batch is a permutation of the set: the mean loss is the same
  // function of the weights whatever the order, so a full-batch step from the
  // same weights gives the loss of the whole set.
  const double first = s.step().loss;
  Session again(c);
  const EvalResult whole = evaluate(again.model(), again.task().rows(0, 36));
  EXPECT_NEAR(first, whole.loss, 1e-5);
  // Without a finite set there is no whole.
  TrainConfig stream;
  stream.batch = 0;
  EXPECT_THROW(Session{stream}, UsageError);
}

TEST(FixedSets, ResumeEqualsUninterruptedRunBitForBit) {
  const auto path = (fs::temp_directory_path() / ("headlab-split-resume-" + std::to_string(::getpid()))).string();
  // Batches of 7 over 36 examples: the checkpoint falls mid-epoch.
  for (const bool listed : {true, false}) {
    // Not listed: first-prev-pair, its training set drawn from its stream.
    TrainConfig c = mod_config();
    if (!listed) {
      c.task = "first-prev-pair";
      c.model.vocab = 0;
      c.model.max_seq_len = 0;
      c.train_fraction = 0;
      c.train_size = 30;
    }
    Session straight(c);
    std::vector<double> losses;
    for (int i = 0; i < 12; ++i) losses.push_back(straight.step().loss);
    Session first(c);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(first.step().loss, losses[static_cast<std::size_t>(i)]);
    first.save(path);
    Session resumed(read_checkpoint(path));
    fs::remove(path);
    ASSERT_TRUE(resumed.task().position());
    EXPECT_EQ(resumed.task().position()->next, first.task().position()->next);
    for (int i = 5; i < 12; ++i)
      EXPECT_EQ(resumed.step().loss, losses[static_cast<std::size_t>(i)]) << "step " << i << " listed " << listed;
    EXPECT_EQ(flat_weights(resumed.model()), flat_weights(straight.model()));
    EXPECT_EQ(rows_of(resumed.eval_batch()), rows_of(straight.eval_batch()));
  }
}

TEST(FixedSets, TrainMetricsComeFromTheTrainingSetOnlyWhenThereIsOne) {
  Session split(mod_config());
  ASSERT_TRUE(split.train_eval_batch());
  EXPECT_EQ(pairs_of(*split.train_eval_batch()), pairs_of(split.task().rows(0, 36)));
  TrainConfig plain = mod_config();
  plain.train_fraction = 0;
  EXPECT_FALSE(Session(plain).train_eval_batch());
}

TEST(FixedSets, EvalDataReplacesTheHeldOutBatch) {
  const auto path = (fs::temp_directory_path() / ("headlab-eval-data-" + std::to_string(::getpid()) + ".jsonl")).string();
  {
    std::ofstream out(path);
    out << R"({"tokens": [1, 2, 11], "targets": [-1, -1, 3]})" << '\n'
        << R"({"tokens": [4, 9, 11], "targets": [-1, -1, 2]})" << '\n';
  }
  TrainConfig c = mod_config();
  c.eval_data = path;
  Session s(c);
  fs::remove(path);
  EXPECT_EQ(rows_of(s.eval_batch()), (std::vector<std::vector<int32_t>>{{1, 2, 11}, {4, 9, 11}}));
  EXPECT_EQ(s.task().size(), 36);  // the training set stays
  c.eval_data = path;              // now missing
  EXPECT_THROW(Session{c}, UsageError);
}

// Writes `text` to a fresh temporary file and returns its path.
std::string temp_file(const std::string& tag, const std::string& text) {
  const auto path = (fs::temp_directory_path() / ("headlab-" + tag + "-" + std::to_string(::getpid()) + ".jsonl")).string();
  std::ofstream(path) << text;
  return path;
}

// Eight rows whose first token is the row's number r and whose "back" pattern
// gives query 2 the key r % 2 and query 3 the keys {1, 2}.
std::string eight_rows_with_a_pattern() {
  std::string text;
  for (int r = 0; r < 8; ++r)
    text += "{\"tokens\": [" + std::to_string(r) + ", 9, 10, 11], \"attend\": {\"back\": [null, null, " +
            std::to_string(r % 2) + ", [1, 2]]}}\n";
  return text;
}

// A small model of the eight rows' sizes.
TrainConfig four_token_config() {
  TrainConfig c;
  c.model.vocab = 12;
  c.model.max_seq_len = 4;
  c.model.d_model = 16;
  return c;
}

// The patterns follow their rows into the held-out set: the run's analysis
// batch is held-out rows, and a data file's patterns (and so its roles) used
// to be dropped there, leaving a run without the roles it was trained for.
TEST(FixedSets, HeldOutRowsKeepTheirAttendPatternsAndRoles) {
  const std::string path = temp_file("held-attend", eight_rows_with_a_pattern());
  TrainConfig c = four_token_config();
  c.data = path;
  c.eval_fraction = 0.25;
  Session s(c);
  fs::remove(path);
  const Batch& held = s.eval_batch();
  ASSERT_EQ(held.batch, 2);
  ASSERT_EQ(held.attend.size(), 1u);
  const analysis::AttendPattern& back = held.attend[0];
  EXPECT_EQ(back.name, "back");
  EXPECT_EQ(back.batch, 2);
  for (int64_t row = 0; row < held.batch; ++row) {
    const int32_t r = held.tokens[static_cast<std::size_t>(row * 4)];
    EXPECT_TRUE(back.at(row, 0).empty() && back.at(row, 1).empty());
    EXPECT_EQ(back.at(row, 2), std::vector<int32_t>{r % 2}) << "row " << row << " (file row " << r << ")";
    EXPECT_EQ(back.at(row, 3), (std::vector<int32_t>{1, 2}));
  }
  EXPECT_EQ(held.roles, (std::vector<analysis::ExpectedRole>{{"back", "back"}}));
  // An analysis in chunks reads slices of the held-out set: they carry it too.
  const Batch one = s.task().eval_slice(1, 1, c.seed);
  ASSERT_EQ(one.attend.size(), 1u);
  EXPECT_EQ(one.attend[0].at(0, 2), std::vector<int32_t>{held.tokens[4] % 2});
}

// A task's run evaluated on a file of patterns (--eval-data) expects the
// file's roles besides the task's own.
TEST(FixedSets, EvalDataPatternsAreRolesBesideTheTasks) {
  const std::string path = temp_file("eval-attend", eight_rows_with_a_pattern());
  TrainConfig c = four_token_config();
  c.task = "previous";
  c.eval_data = path;
  Session s(c);
  fs::remove(path);
  const Batch& held = s.eval_batch();
  ASSERT_EQ(held.batch, 8);
  ASSERT_FALSE(held.attend.empty());
  EXPECT_EQ(held.attend[0].name, "back");
  const auto& roles = held.roles;
  EXPECT_NE(std::find(roles.begin(), roles.end(), analysis::ExpectedRole{"back", "back"}), roles.end());
  EXPECT_GE(roles.size(), 2u) << "the task's own role stays";
}

// AdamW's decay is decoupled: p <- p (1 - lr wd) - lr m_hat / (sqrt(v_hat) + eps).
// Two sessions that differ only in the weight decay take the same Adam step
// from the same weights and gradients, so after one step they differ by
// exactly -lr * wd * p0 in every element.
TEST(FixedSets, WeightDecayShrinksEveryWeightByLrTimesDecay) {
  TrainConfig c = mod_config();
  c.clip = 0;
  c.lr = 0.01;
  c.weight_decay = 0;
  Session plain(c);
  c.weight_decay = 1.0;
  Session decayed(c);
  const std::vector<double> before = flat_weights(plain.model());
  ASSERT_EQ(flat_weights(decayed.model()), before);
  EXPECT_EQ(plain.step().loss, decayed.step().loss);
  const auto a = flat_weights(plain.model()), b = flat_weights(decayed.model());
  for (std::size_t i = 0; i < before.size(); ++i)
    ASSERT_NEAR(b[i] - a[i], -c.lr * c.weight_decay * before[i], 1e-6 + 1e-5 * std::abs(before[i])) << "element " << i;
  // Over many steps it is a lever: the decayed weights end up smaller.
  for (int i = 0; i < 200; ++i) plain.step(), decayed.step();
  double norm_plain = 0, norm_decayed = 0;
  for (const double w : flat_weights(plain.model())) norm_plain += w * w;
  for (const double w : flat_weights(decayed.model())) norm_decayed += w * w;
  EXPECT_LT(norm_decayed, 0.8 * norm_plain);
}

TEST(FixedSets, BetasAndEpsReachTheOptimizer) {
  TrainConfig c = mod_config();
  c.betas = {0.8, 0.98};
  c.eps = 1e-6;
  Session s(c);
  const auto* adamw = dynamic_cast<const optim::AdamW*>(&s.optimizer());
  ASSERT_NE(adamw, nullptr);
  EXPECT_EQ(adamw->options().beta1(), 0.8);
  EXPECT_EQ(adamw->options().beta2(), 0.98);
  EXPECT_EQ(adamw->options().eps(), 1e-6);
  // And they change the run. Adam's first update is m_hat / sqrt(v_hat) =
  // g / |g| whatever beta1, so the loss of step 3 (after two updates) is the
  // first that depends on it.
  TrainConfig d = c;
  d.betas = {0.9, 0.98};
  Session t(d);
  EXPECT_EQ(s.step().loss, t.step().loss);
  EXPECT_EQ(s.step().loss, t.step().loss);
  EXPECT_NE(s.step().loss, t.step().loss);
}

TEST(FixedSets, GrokkingOptionsResumeExactly) {
  // --init-std, --loss-dtype f64 and --split-seed travel with the checkpoint:
  // the resumed run takes the same steps as the uninterrupted one.
  const auto path = (fs::temp_directory_path() / ("headlab-grok-resume-" + std::to_string(::getpid()))).string();
  TrainConfig c = mod_config();
  c.init_std = "nanda";
  c.loss_dtype = "f64";
  c.split_seed = 9;
  Session straight(c);
  std::vector<double> losses;
  for (int i = 0; i < 6; ++i) losses.push_back(straight.step().loss);
  Session first(c);
  for (int i = 0; i < 3; ++i) first.step();
  first.save(path);
  const Checkpoint ck = read_checkpoint(path);
  fs::remove(path);
  EXPECT_EQ(ck.info.config.init_std, "nanda");
  EXPECT_EQ(ck.info.config.loss_dtype, "f64");
  EXPECT_EQ(ck.info.config.split_seed, 9);
  Session resumed(ck);
  for (int i = 3; i < 6; ++i) EXPECT_EQ(resumed.step().loss, losses[static_cast<std::size_t>(i)]) << "step " << i;
  EXPECT_EQ(flat_weights(resumed.model()), flat_weights(straight.model()));
  // And each option changes the run it is in.
  TrainConfig f32 = c;
  f32.loss_dtype = "f32";
  Session g(f32), h(c);
  for (int i = 0; i < 5; ++i) g.step(), h.step();
  EXPECT_NE(flat_weights(g.model()), flat_weights(h.model()));
}

// Trains `session` to its --steps in the new run folder `dir`; its metrics.jsonl.
std::vector<nlohmann::json> train_into(Session& session, const fs::path& dir) {
  TrainerEvents quiet;
  Trainer trainer(session, create_run_folder(dir.string(), false), quiet,
                  {.target_steps = session.config().steps, .analysis = {}});
  EXPECT_EQ(trainer.run(), 0);
  return read_metrics((dir / "metrics.jsonl").string());
}

TEST(FixedSets, ModularAdditionRunsLogTheProgressMeasuresAtEachAnalysis) {
  const auto dir = fs::temp_directory_path() / ("headlab-progress-" + std::to_string(::getpid()));
  TrainConfig c = mod_config();
  c.steps = 4;
  c.log_every = 2;
  c.analyze_every = 2;
  Session session(c);
  int analyzed = 0;
  nlohmann::json last;
  for (const nlohmann::json& line : train_into(session, dir)) {
    if (!line.contains("heads")) continue;
    ++analyzed;
    ASSERT_TRUE(line.contains("progress")) << line.dump();
    const nlohmann::json& m = line["progress"];
    EXPECT_EQ(m["p"], 11);
    EXPECT_EQ(m["embedding_norms"].size(), 6u);  // the constant and 1 .. 5
    EXPECT_EQ(m["key_frequencies"].size(), 5u);
    EXPECT_EQ(m["attention_a"].size(), 2u);  // one per head
    EXPECT_GT(m["key_share"].get<double>(), 0);
    last = m;
  }
  EXPECT_EQ(analyzed, 2);
  // The last one is the final model's; its excluded loss is over the 36
  // training pairs, not all 121.
  std::vector<bool> train(121, false);
  for (const auto& [a, b] : pairs_of(session.task().rows(0, 36))) train[static_cast<std::size_t>(a * 11 + b)] = true;
  const analysis::ProgressMeasures now = analysis::progress_measures(session.model(), 11, train);
  EXPECT_EQ(last["excluded_loss"].get<double>(), now.excluded_loss);
  EXPECT_EQ(last["restricted_loss"].get<double>(), now.restricted_loss);
  EXPECT_NE(last["excluded_loss"].get<double>(), analysis::progress_measures(session.model(), 11, {}).excluded_loss);
  fs::remove_all(dir);
}

// Addition mod 2 (--vocab 3) has no Fourier spectrum the measures can take
// (they need p >= 3): its run analyzes without them, where it died at its
// first analysis.
TEST(FixedSets, AdditionModTwoIsAnalyzedWithoutProgressMeasures) {
  const auto dir = fs::temp_directory_path() / ("headlab-mod2-" + std::to_string(::getpid()));
  TrainConfig c = mod_config(0);
  c.model.vocab = 3;
  c.steps = 2;
  c.analyze_every = 1;
  Session session(c);
  int analyzed = 0;
  for (const nlohmann::json& line : train_into(session, dir)) {
    analyzed += line.contains("heads");
    EXPECT_FALSE(line.contains("progress")) << line.dump();
  }
  EXPECT_EQ(analyzed, 2);
  fs::remove_all(dir);
}

TEST(FixedSets, ReluModelTrainsAndResumesAsRelu) {
  const auto path = (fs::temp_directory_path() / ("headlab-relu-" + std::to_string(::getpid()))).string();
  TrainConfig c = mod_config();
  c.model.activation = "relu";
  c.model.layernorm = false;
  Session s(c);
  TrainConfig gelu = c;
  gelu.model.activation = "gelu";
  EXPECT_NE(s.step().loss, Session(gelu).step().loss);
  s.save(path);
  const Checkpoint ck = read_checkpoint(path);
  fs::remove(path);
  EXPECT_EQ(ck.model.activation, "relu");
  EXPECT_EQ(Session(ck).model().spec().activation, "relu");
}


// --train-size beyond what the task can make, or beyond memory, is refused
// before a sequence is drawn, naming the bound (issue 29.11).
TEST(FixedSets, ATrainingSetBeyondTheTasksSequencesIsRefusedAtOnce) {
  TrainConfig c;  // first-prev-pair, V 8, T 6: 8^6 = 262144 sequences
  c.train_size = 10'000'000;
  try {
    make_task_for(c);
    FAIL() << "--train-size 1e7 of 262144 sequences was accepted";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--train-size 10000000"), std::string::npos) << m;
    EXPECT_NE(m.find("at most 262144 different sequences"), std::string::npos) << m;
    EXPECT_NE(m.find("below 262144"), std::string::npos) << m;
  }
  c.model.vocab = 4;  // 4^6 = 4096
  c.train_size = 4096;
  EXPECT_THROW(make_task_for(c), UsageError);
  c.train_size = 4095;  // one left to hold out: accepted
  EXPECT_EQ(make_task_for(c)->size(), 4095);
  // sort's list decides the rest of the sequence: (V - 1)^((T - 1) / 2).
  TrainConfig sort;
  sort.task = "sort";
  sort.model.vocab = 5;
  sort.model.max_seq_len = 7;  // 4^3 = 64 lists
  sort.train_size = 64;
  EXPECT_THROW(make_task_for(sort), UsageError);
}

TEST(FixedSets, ATrainingSetBeyondMemoryIsRefusedNamingTheLargestThatFits) {
  EXPECT_NO_THROW(check_training_set("t", 1000, 6, 1e9, 1e9));
  try {
    check_training_set("t", 100'000'000, 6, 1e12, 4e9);  // ~19 GB against 4 GB
    FAIL() << "a 19 GB training set was accepted under 4 GB";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("needs about 19.2 GB, more than the 4 GB this process may use"), std::string::npos) << m;
    EXPECT_NE(m.find("at most 20833333"), std::string::npos) << m;
  }
  EXPECT_GT(memory_limit_bytes(), 0);
}

}  // namespace
}  // namespace headlab::train
