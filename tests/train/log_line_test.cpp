// The throughput a log line reports is the training's: the head analyses
// run between two log lines (--analyze-every) are said beside it, not
// counted in it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "train/run_folder.h"
#include "train/session.h"
#include "train/trainer.h"

namespace headlab::train {
namespace {

struct LogLines : TrainerEvents {
  std::vector<LogLine> lines;
  void logged(const LogLine& line) override { lines.push_back(line); }
};

// One log line after 20 steps; `analyze_every` 2 puts analyses at steps 2,
// 4, ..., 18 inside its window. An analysis scores 256 sequences against 1600
// classes dozens of times: far longer than a step of 8 sequences.
LogLine log_line_of(int64_t analyze_every) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("headlab-log-line-" + std::to_string(::getpid()) + "-" + std::to_string(analyze_every));
  TrainConfig c;
  c.model.vocab = 40;  // first-prev-pair: 40^2 classes
  c.model.d_model = 16;
  c.batch = 8;
  c.eval_batch = 256;
  c.steps = 20;
  c.log_every = 20;
  c.analyze_every = analyze_every;
  Session session(c);
  LogLines events;
  Trainer trainer(session, create_run_folder(dir.string(), false), events, {.target_steps = c.steps, .analysis = {}});
  EXPECT_EQ(trainer.run(), 0);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(events.lines.size(), 1u);
  return events.lines.empty() ? LogLine{} : events.lines[0];
}

TEST(LogLine, TokensPerSecondLeaveTheHeadAnalysesOut) {
  const LogLine plain = log_line_of(0), analyzed = log_line_of(2);
  EXPECT_EQ(plain.analysis_seconds, 0);
  EXPECT_GT(analyzed.analysis_seconds, 0);
  ASSERT_GT(plain.tokens_per_s, 0);
  // Counted in, the analyses' time would cut the rate several-fold; left
  // out, it stays the plain run's, within the timing noise of a loaded machine.
  EXPECT_GT(analyzed.tokens_per_s, plain.tokens_per_s / 3)
      << "tok/s " << analyzed.tokens_per_s << " with analyses taking " << analyzed.analysis_seconds << " s, "
      << plain.tokens_per_s << " without";
}

}  // namespace
}  // namespace headlab::train
