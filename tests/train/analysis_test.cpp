// The head analysis of a model trained by a Session: the default demo's
// heads specialize.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "analysis/analyze_model.h"
#include "train/session.h"

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

}  // namespace
}  // namespace headlab::train
