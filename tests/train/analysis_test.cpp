// The head analysis of a model trained by a Session: the default demo's
// heads specialize; the trainer estimates its final analysis's cost.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/analyze_model.h"
#include "train/run_folder.h"
#include "train/session.h"
#include "train/trainer.h"

namespace headlab::train {
namespace {

using analysis::Label;

TEST(AnalyzeModel, DefaultDemoSpecializesIntoPreviousAndFirstTokenHeads) {
  TrainConfig c;  // the default demo, as `headlab train` runs it
  c.seed = 0;
  c.steps = 300;
  Session s(c);
  for (int64_t i = 0; i < c.steps; ++i) s.step();
  const analysis::RunAnalysis run = analysis::analyze_model(s.model(), examples_of(s.eval_batch()));
  EXPECT_GE(*run.accuracy, 0.99);
  std::vector<Label> labels = {run.at(0, 0).label, run.at(0, 1).label};
  std::sort(labels.begin(), labels.end());
  EXPECT_EQ(labels, (std::vector<Label>{Label::pattern("previous-token"), Label::pattern("first-token")}))
      << analysis::label_name(labels[0]) << ", " << analysis::label_name(labels[1]);
  EXPECT_TRUE(run.verdict.specialized);
}

// Records the events the estimate is about, in order.
struct EstimateEvents : TrainerEvents {
  std::vector<std::string> seen;
  std::vector<AnalysisEstimate> estimates;
  void logged(const LogLine& line) override { seen.push_back("log " + std::to_string(line.step)); }
  void final_analysis_estimated(const AnalysisEstimate& e) override {
    seen.push_back("estimate");
    estimates.push_back(e);
  }
};

TEST(Trainer, EstimatesTheFinalAnalysisOnceRightAfterTheFirstLogLine) {
  const auto dir = std::filesystem::temp_directory_path() / ("headlab-estimate-" + std::to_string(::getpid()));
  TrainConfig c;  // a model of 2 layers of 2 heads
  c.model.layers = 2;
  c.model.d_model = 16;
  c.batch = 8;
  c.eval_batch = 24;
  c.steps = 6;
  c.log_every = 2;
  c.analyze_every = 0;
  Session session(c);
  EstimateEvents events;
  analysis::AnalysisOptions final_analysis;
  final_analysis.pruning_random_orders = 3;
  Trainer trainer(session, create_run_folder(dir.string(), false), events,
                  {.target_steps = c.steps, .analysis = final_analysis});
  EXPECT_EQ(trainer.run(), 0);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(events.seen, (std::vector<std::string>{"log 2", "estimate", "log 4", "log 6"}));
  ASSERT_EQ(events.estimates.size(), 1u);
  const AnalysisEstimate& e = events.estimates[0];
  // The final analysis's own options count its passes: 1 + 3 + 4 * 3 of the eval batch.
  EXPECT_EQ(e.passes, analysis::analysis_passes(2, 2, final_analysis));
  EXPECT_EQ(e.passes, 16);
  EXPECT_EQ(e.rows, session.eval_batch().batch);
  EXPECT_GT(e.pass_seconds, 0);
  EXPECT_DOUBLE_EQ(e.seconds, e.passes * e.pass_seconds);
}

}  // namespace
}  // namespace headlab::train
