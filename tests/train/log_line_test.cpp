// The throughput a log line reports is the training's: the head analyses
// run between two log lines (--analyze-every) are said beside it, not
// counted in it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "train/run_folder.h"
#include "train/session.h"
#include "train/trainer.h"

namespace headlab::train {
namespace {

using Clock = std::chrono::steady_clock;

// The log lines, and the wall time from the start of the run to each.
struct LogLines : TrainerEvents {
  Clock::time_point start = Clock::now();
  std::vector<LogLine> lines;
  std::vector<double> seconds;
  void logged(const LogLine& line) override {
    lines.push_back(line);
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
};

struct Window {
  LogLine line;
  double wall_seconds = 0;  // from the start of the run to the line
  double tokens = 0;        // the target positions the window trained on
};

// One log line after 20 steps; `analyze_every` 2 puts analyses at steps 2,
// 4, ..., 18 inside its window. An analysis scores 256 sequences against 1600
// classes dozens of times: far longer than a step of 8 sequences.
Window window_of(int64_t analyze_every) {
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
  // Every sequence of the task has as many targets as the evaluation batch's.
  const std::vector<int32_t>& targets = session.eval_batch().targets;
  const auto per_row = static_cast<double>(std::count_if(targets.begin(), targets.end(), [](int32_t t) { return t >= 0; })) /
                       static_cast<double>(session.eval_batch().batch);
  LogLines events;
  Trainer trainer(session, create_run_folder(dir.string(), false), events, {.target_steps = c.steps, .analysis = {}});
  events.start = Clock::now();
  EXPECT_EQ(trainer.run(), 0);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(events.lines.size(), 1u);
  if (events.lines.empty()) return {};
  return {events.lines[0], events.seconds[0], per_row * static_cast<double>(c.batch * c.steps)};
}

TEST(LogLine, TokensPerSecondLeaveTheHeadAnalysesOut) {
  EXPECT_EQ(window_of(0).line.analysis_seconds, 0);
  const Window w = window_of(2);
  ASSERT_GT(w.line.tokens_per_s, 0);
  ASSERT_GT(w.line.analysis_seconds, 0);
  // The steps' time and the analyses' are two parts of the window's.
  const double step_seconds = w.tokens / w.line.tokens_per_s;
  EXPECT_LE(step_seconds + w.line.analysis_seconds, w.wall_seconds);
  // Nine analyses take far longer than twenty small steps: the rate over the
  // whole window, the analyses counted in, is several times lower. (Timed
  // against each other in one run, so that a loaded machine slows both.)
  EXPECT_GT(w.line.tokens_per_s, 2 * w.tokens / w.wall_seconds)
      << w.line.tokens_per_s << " tok/s over " << step_seconds << " s of steps; the window took " << w.wall_seconds
      << " s, " << w.line.analysis_seconds << " s of them in analyses";
}

}  // namespace
}  // namespace headlab::train
