// What headlab prints when all goes well, as a user reads it: tables that
// stay in line, help that tells the truth.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "analysis/labels.h"
#include "core/gemm.h"
#include "core/safetensors.h"
#include "core/shortest.h"
#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The checks' names differ in length (the longest ones are over 60
// characters); every row's error columns start where the header's do.
TEST(Gradcheck, ColumnsStayInLineForLongNames) {
  TempDir cwd;
  const RunResult r = run_headlab({"gradcheck", "--filter", "MultiHeadAttention"}, cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_GE(lines.size(), 3u) << r.out;
  const std::size_t result_column = lines[0].find("result");
  ASSERT_NE(result_column, std::string::npos) << r.out;
  std::size_t longest = 0, rows = 0;
  for (std::size_t i = 1; i < lines.size() && !lines[i].empty(); ++i, ++rows) {
    EXPECT_EQ(lines[i].find("pass"), result_column) << lines[i];
    longest = std::max(longest, lines[i].find("  "));
  }
  EXPECT_GE(rows, 3u) << r.out;
  EXPECT_GT(longest, 44u) << "no long name in the table to test:\n" << r.out;
}

// The presets train the `previous` task; the help must not claim otherwise,
// nor show the train command's model shape as the presets' own.
TEST(Bench, HelpShowsThePresetsDefaults) {
  TempDir cwd;
  const RunResult r = run_headlab({"bench", "--help"}, cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("--task TEXT=previous"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("first-prev-pair"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--vocab INT=0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(default: the preset's)"), std::string::npos) << r.out;
}

// --gemm-alone reports one step's GEMM time inside the step and replayed
// alone, in the text and in the JSON, and the same by shape (in the text the
// shapes that lose the most; in the JSON all, adding up to the totals).
TEST(Bench, GemmAloneReportsBothTimes) {
  TempDir cwd;
  const std::vector<std::string> command{"bench",        "--preset", "tiny", "--bench-steps", "1", "--runs", "1",
                                         "--warmup-steps", "1",      "--threads", "1", "--gemm-alone"};
  const RunResult text = run_headlab(command, cwd.path());
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_NE(text.out.find("inside the step"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("replayed alone"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("the shapes that lose the most inside the step"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\n  f32 "), std::string::npos) << text.out;  // a shape's line
  std::vector<std::string> with_json = command;
  with_json.push_back("--json");
  const RunResult r = run_headlab(with_json, cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("gemm_calls").get<long>(), 0) << r.out;  // tiny's step: every Linear and the attention
  EXPECT_GT(j.at("gemm_inside_ms").get<double>(), 0.0) << r.out;
  EXPECT_GT(j.at("gemm_alone_ms").get<double>(), 0.0) << r.out;
  long calls = 0;
  double inside = 0, alone = 0, lost = 1e300;
  bool forward = false;  // a Linear's forward (or a block of it): x W^T
  for (const nlohmann::json& g : j.at("gemm_shapes")) {
    forward = forward || g.at("shape").get<std::string>().starts_with("f32 1 x NT ");
    calls += g.at("calls").get<long>();
    inside += g.at("inside_ms").get<double>(), alone += g.at("alone_ms").get<double>();
    const double this_lost = g.at("inside_ms").get<double>() - g.at("alone_ms").get<double>();
    EXPECT_LE(this_lost, lost) << "the largest loss first: " << r.out;
    lost = this_lost;
  }
  EXPECT_TRUE(forward) << r.out;
  EXPECT_EQ(calls, j.at("gemm_calls").get<long>()) << r.out;
  EXPECT_NEAR(inside, j.at("gemm_inside_ms").get<double>(), 1e-6) << r.out;
  EXPECT_NEAR(alone, j.at("gemm_alone_ms").get<double>(), 1e-6) << r.out;
}

// An environment variable set for the children a test starts, put back as it was after.
class EnvFor {
 public:
  EnvFor(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    ::setenv(name, value, 1);
  }
  ~EnvFor() {
    if (saved_) ::setenv(name_, saved_->c_str(), 1);
    else ::unsetenv(name_);
  }
  EnvFor(const EnvFor&) = delete;
  EnvFor& operator=(const EnvFor&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

// Under --precision bf16 a backend without a bf16 kernel here multiplies the
// rounded operands widened back to float on its f32 kernels, which name them
// src_f32 (core::bf16_products_widened): --kernels marks each such product
// emulated, in the JSON and the text, and none where a bf16 kernel ran.
// HEADLAB_EMULATE_BF16=1 lets any CPU run bf16; ONEDNN_MAX_CPU_ISA=AVX2
// takes oneDNN's bf16 matmul away; Debian's OpenBLAS has no cblas_sbgemm.
TEST(Bench, KernelsOfBf16ProductsOnF32KernelsAreMarkedEmulated) {
  TempDir cwd;
  const EnvFor emulate("HEADLAB_EMULATE_BF16", "1");
  // Asked here before any cap is set: this process's oneDNN sees what an uncapped child's does.
  const bool onednn_widens = core::bf16_products_widened(core::GemmBackend::onednn);
  struct Case {
    std::string gemm;
    bool cap;  // ONEDNN_MAX_CPU_ISA=AVX2
    bool widened;
  };
  std::vector<Case> cases = {{"onednn", false, onednn_widens}, {"onednn", true, true}};
  // OpenBLAS's sbgemm calls are not listed (one cblas call per product, timed only on the f32 path).
  if (core::bf16_products_widened(core::GemmBackend::openblas)) cases.push_back({"openblas", false, true});
  for (const Case& c : cases) {
    const std::string name = c.gemm + (c.cap ? " under ONEDNN_MAX_CPU_ISA=AVX2" : "");
    std::optional<EnvFor> cap;
    if (c.cap) cap.emplace("ONEDNN_MAX_CPU_ISA", "AVX2");
    std::vector<std::string> command{"bench",     "--preset", "tiny", "--precision", "bf16",   "--gemm",
                                     c.gemm,      "--kernels", "--bench-steps", "1",  "--runs", "1",
                                     "--warmup-steps", "0", "--threads", "1"};
    const RunResult text = run_headlab(command, cwd.path());
    ASSERT_EQ(text.exit_code, 0) << name << "\n" << text.describe();
    EXPECT_EQ(text.out.find("bf16 emulated") != std::string::npos, c.widened) << name << "\n" << text.out;
    EXPECT_EQ(text.out.find("bf16 operands emulated on f32 kernels") != std::string::npos, c.widened)
        << name << "\n" << text.out;
    command.push_back("--json");
    const RunResult r = run_headlab(command, cwd.path());
    ASSERT_EQ(r.exit_code, 0) << name << "\n" << r.describe();
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("emulated_bf16").get<bool>(), c.widened) << name << "\n" << r.out;
    ASSERT_FALSE(j.at("kernels").empty()) << name << "\n" << r.out;
    // Every product of a bf16 step is a bf16 one: all emulated, or none.
    for (const nlohmann::json& k : j.at("kernels")) {
      EXPECT_EQ(k.at("emulated_bf16").get<bool>(), c.widened) << name << "\n" << k.dump();
      EXPECT_TRUE(k.at("layouts").get<std::string>().starts_with(c.widened ? "src_f32" : "src_bf16"))
          << name << "\n" << k.dump();
    }
  }
}

// On OpenBLAS, bench names the kernels OpenBLAS chose (in its JSON) and,
// where they are its generic ones on a CPU that allows faster (an OpenBLAS
// older than the CPU, OPENBLAS_CORETYPE unset), the OPENBLAS_CORETYPE that
// selects them, as train.log does under --gemm openblas. A value the user
// set stands and draws no advice: OPENBLAS_CORETYPE=Prescott forces the
// generic kernels on any CPU.
TEST(Bench, NamesOpenBlasKernelsAndTheCoretypeACpuItDoesNotKnowNeeds) {
  TempDir cwd;
  const std::vector<std::string> command{"bench", "--preset", "tiny", "--d-model", "16", "--gemm", "openblas",
                                         "--bench-steps", "1", "--runs", "1", "--warmup-steps", "0", "--threads", "1"};
  std::vector<std::string> with_json = command;
  with_json.push_back("--json");
  const std::vector<std::string> train{"train", "--d-model", "16", "--steps", "2", "--analyze-every", "0",
                                       "--eval-batch", "8", "--gemm", "openblas", "--threads", "1", "--out", "run"};
  const auto expect_runs = [&](const std::string& kernels, const std::string& better, const std::string& name) {
    const RunResult j = run_headlab(with_json, cwd.path());
    ASSERT_EQ(j.exit_code, 0) << name << "\n" << j.describe();
    const nlohmann::json result = nlohmann::json::parse(j.out);
    EXPECT_EQ(result.at("openblas_kernels").get<std::string>(), kernels) << name;
    EXPECT_EQ(result.at("openblas_better_coretype").get<std::string>(), better) << name;
    const std::string advice = "OPENBLAS_CORETYPE=" + better + " in the environment";
    if (!better.empty()) {  // bench's text says it too (a second bench, only where there is advice)
      const RunResult text = run_headlab(command, cwd.path());
      ASSERT_EQ(text.exit_code, 0) << name << "\n" << text.describe();
      EXPECT_NE(text.out.find(advice), std::string::npos) << name << "\n" << text.out;
    }
    std::filesystem::remove_all(cwd / "run");
    const RunResult t = run_headlab(train, cwd.path());
    ASSERT_EQ(t.exit_code, 0) << name << "\n" << t.describe();
    EXPECT_EQ(read_bytes(cwd / "run/train.log").find(advice) != std::string::npos, !better.empty()) << name;
  };
  {
    const EnvFor generic("OPENBLAS_CORETYPE", "Prescott");
    expect_runs("Prescott", "", "OPENBLAS_CORETYPE=Prescott");
  }
  // This machine as it is: the child's OpenBLAS chooses as this process's did.
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr)
    expect_runs(core::openblas_kernels(), core::openblas_better_coretype(), "OPENBLAS_CORETYPE unset");
}

// Sizes left to the task are the run's own in the report: modular addition's
// 3 tokens (--seq-len 0) and, under --batch 0, its whole training set (61 of
// the 11 x 11 pairs at --train-fraction 0.5). Counted as 0 they read "batch
// 0" and 0.00 GFLOP/s.
TEST(Bench, SizesLeftToTheTaskAreTheRunsOwn) {
  TempDir cwd;
  const std::vector<std::string> command{
      "bench", "--task", "modular-addition", "--vocab", "12", "--seq-len", "0", "--train-fraction", "0.5", "--batch",
      "0", "--layers", "1", "--d-model", "16", "--heads", "2", "--bench-steps", "1", "--runs", "1", "--warmup-steps",
      "0", "--threads", "1"};
  const RunResult text = run_headlab(command, cwd.path());
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_NE(text.out.find("batch 61 x 3 tokens"), std::string::npos) << text.out;
  std::vector<std::string> with_json = command;
  with_json.push_back("--json");
  const RunResult r = run_headlab(with_json, cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j.at("gflops").get<double>(), 0.0) << r.out;
  EXPECT_GT(j.at("mfu").get<double>(), 0.0) << r.out;
}

// How the step ran on the threads is in the report: at 2 threads the batch as
// 2 slices side by side (train/step_lanes.h), at 1 thread one slice.
TEST(Bench, SaysHowTheStepsSlicesRanOnTheThreads) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "--threads 2 is capped at this machine's one core";
  TempDir cwd;
  for (const int threads : {1, 2}) {
    const std::vector<std::string> command{"bench", "--preset", "tiny", "--d-model", "16", "--bench-steps", "1",
                                           "--runs", "1", "--warmup-steps", "0", "--threads", std::to_string(threads)};
    const RunResult text = run_headlab(command, cwd.path());
    ASSERT_EQ(text.exit_code, 0) << text.describe();
    EXPECT_EQ(text.out.find("2 slices side by side, one per thread") != std::string::npos, threads == 2) << text.out;
    std::vector<std::string> with_json = command;
    with_json.push_back("--json");
    const RunResult r = run_headlab(with_json, cwd.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(nlohmann::json::parse(r.out).at("slices_side_by_side").get<int64_t>(), threads) << r.out;
  }
}

// A task with a length of its own refuses the preset's: the error says the
// 8 is the preset's (the user never typed it) and how to take the task's.
TEST(Bench, APresetsLengthATaskRefusesIsNamedAsThePresets) {
  TempDir cwd;
  const RunResult r = run_headlab({"bench", "--task", "modular-addition", "--bench-steps", "1", "--runs", "1"}, cwd.path());
  EXPECT_TRUE(clean_failure(r, 2, {"seq-len 8", "the tiny preset's", "--seq-len 0"})) << r.describe();
  const RunResult typed =
      run_headlab({"bench", "--task", "modular-addition", "--seq-len", "5", "--bench-steps", "1", "--runs", "1"},
                  cwd.path());
  EXPECT_TRUE(clean_failure(typed, 2, {"seq-len 5"})) << typed.describe();
  EXPECT_EQ(typed.err.find("preset's"), std::string::npos) << "a typed length is the user's: " << typed.err;
}

// analyze's label flags are analysis::kLabelFlags, each shown with its
// default (LabelOptions') and its help.
TEST(Analyze, HelpShowsEveryLabelFlagWithItsDefault) {
  TempDir cwd;
  const RunResult r = run_headlab({"analyze", "--help"}, cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const analysis::LabelOptions defaults;
  for (const analysis::LabelFlag& f : analysis::kLabelFlags) {
    const std::string shown = std::string(f.flag) + " FLOAT=" + core::shortest(defaults.*f.value);
    const std::size_t at = r.out.find(shown);
    ASSERT_NE(at, std::string::npos) << shown << "\n" << r.out;
    // On its line, or (after a long flag) the next.
    const std::size_t help = r.out.find(f.help, at);
    ASSERT_NE(help, std::string::npos) << f.help << "\n" << r.out;
    EXPECT_LE(std::count(r.out.begin() + static_cast<std::ptrdiff_t>(at), r.out.begin() + static_cast<std::ptrdiff_t>(help),
                         '\n'),
              1)
        << f.help << "\n" << r.out;
  }
}

// A folder given with a trailing slash (as shell completion writes it)
// gives paths with one slash.
TEST(Analyze, PathsOfAFolderWithATrailingSlashHaveOneSlash) {
  TempDir cwd;
  copy_dir(shared_run(), cwd / "run");
  const RunResult r = run_headlab({"analyze", cwd / "run/", "--no-color"}, cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find(cwd / "run/report.html"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("//"), std::string::npos) << r.out;
}

// Paths are bytes; JSON holds UTF-8 only. A run folder or data file named in
// Latin-1 (which train accepts) made analyze fail after its work with
// nlohmann's "invalid UTF-8 byte at index 21: 0xFF", having removed the run's
// heads.json; eval --json failed so after writing its dump. They now record
// the byte as U+FFFD, and an analysis folder so recorded is still its own.
TEST(Analyze, PathsThatAreNotUtf8AreRecordedNotAFailureAfterTheWork) {
  TempDir cwd;
  const std::string run = cwd / "run\xff";
  copy_dir(shared_run(), run);
  const RunResult own = run_headlab({"analyze", run, "--quiet"}, cwd.path());
  ASSERT_EQ(own.exit_code, 0) << own.describe();
  const nlohmann::json heads = nlohmann::json::parse(read_bytes(run + "/heads.json"));
  EXPECT_EQ(heads.at("checkpoint"), cwd / "run\xef\xbf\xbd/checkpoint.safetensors");  // U+FFFD

  write_bytes(cwd / "rows\xff.jsonl", "{\"tokens\": [3, 0, 7, 1, 2, 5]}\n{\"tokens\": [7, 0, 1]}\n");
  for (int twice = 0; twice < 2; ++twice) {  // the second replaces the first: the same analysis
    const RunResult file =
        run_headlab({"analyze", run, "--data", cwd / "rows\xff.jsonl", "--out", cwd / "x", "--quiet"}, cwd.path());
    ASSERT_EQ(file.exit_code, 0) << file.describe();
  }
  EXPECT_EQ(nlohmann::json::parse(read_bytes(cwd / "x/heads.json")).at("data_file").at("path"),
            cwd / "rows\xef\xbf\xbd.jsonl");
  // A run's --data is read again by name (config.json): refused, saying why and what to do.
  const RunResult trained = run_headlab(train_command(cwd / "new", {{"--data", cwd / "rows\xff.jsonl"}}), cwd.path());
  EXPECT_TRUE(clean_failure(trained, 2, {"--data \"" + cwd / "rows", "is not valid UTF-8 text", "a name in UTF-8"}));

  const RunResult eval = run_headlab({"eval", run, "--json", "--dump-logits", cwd / "logits\xff.st"}, cwd.path());
  ASSERT_EQ(eval.exit_code, 0) << eval.describe();
  EXPECT_EQ(nlohmann::json::parse(eval.out).at("logits_file"), cwd / "logits\xef\xbf\xbd.st");
}

// Analyzing on another task than the run's never overwrites the run's own
// files: it writes into RUN/analysis-TASK/, says so, and heads.json records
// what it analyzed (with the --pattern scores).
TEST(Analyze, AnotherTaskWritesBesideTheRunAndRecordsWhatItAnalyzed) {
  TempDir cwd;
  ASSERT_EQ(run_headlab(train_command(cwd / "run", {{"--task", "previous"}, {"--steps", "5"}}), cwd.path()).exit_code, 0);
  const auto read = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string heads = read(cwd / "run/heads.json"), report = read(cwd / "run/report.html");
  const RunResult r =
      run_headlab({"analyze", cwd / "run", "--task", "first", "--pattern", "offset:2", "--no-color", "--threads", "1"},
                  cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("its analysis on first goes to"), std::string::npos) << r.describe();
  EXPECT_EQ(read(cwd / "run/heads.json"), heads) << "the run's own heads.json is untouched";
  EXPECT_EQ(read(cwd / "run/report.html"), report);
  std::ifstream in(cwd / "run/analysis-first/heads.json");
  ASSERT_TRUE(in) << r.describe();
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["analyzed"], "first");
  EXPECT_TRUE(j["heads"][0]["scores"]["user"].contains("offset:2"));
  EXPECT_EQ(j["expected_roles"][0]["pattern"], "first-token");
}

// analyze RUN with another --batch than the run's eval batch is not the
// run's own analysis: it goes beside it (RUN/analysis-batch-N), and the run's
// heads.json and report.html stay as they were; --out RUN replaces them.
TEST(Analyze, AnotherBatchWritesBesideTheRunNeverOverItsOwnAnalysis) {
  TempDir tmp;
  const std::string run = tmp / "run";
  copy_dir(shared_run(), run);
  const std::string heads = read_bytes(run + "/heads.json"), report = read_bytes(run + "/report.html");
  const RunResult r = run_headlab({"analyze", run, "--batch", "4", "--no-color"}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("eval batch of 32 sequences; this one of 4 sequences goes to " + run + "/analysis-batch-4"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(read_bytes(run + "/heads.json"), heads) << "the run's own analysis was replaced by one of 4 sequences";
  EXPECT_EQ(read_bytes(run + "/report.html"), report);
  const nlohmann::json beside = nlohmann::json::parse(read_bytes(run + "/analysis-batch-4/heads.json"));
  EXPECT_EQ(beside.at("step"), 20) << "heads.json says which checkpoint it analyzed";
  const RunResult replaced = run_headlab({"analyze", run, "--batch", "4", "--out", run}, tmp.path());
  ASSERT_EQ(replaced.exit_code, 0) << replaced.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(run + "/heads.json")).at("loss"), beside.at("loss"));
}

// A held-out set smaller than the batches caps them: a --batch that reads the
// same sequences as the run's own analysis is that analysis (the run's
// folder), and another is named by the sequences it reads.
TEST(Analyze, ABatchIsCountedInTheSequencesItReads) {
  TempDir tmp;
  std::string rows;
  for (int i = 0; i < 40; ++i) {
    const int a = i % 8, b = (i * 3) % 8, c = (i * 5 + 1) % 8;
    rows += "{\"tokens\": [" + std::to_string(a) + ", " + std::to_string(b) + ", " + std::to_string(c) +
            ", 1], \"targets\": [-1, -1, " + std::to_string(a) + ", " + std::to_string(b) + "]}\n";
  }
  write_bytes(tmp / "rows.jsonl", rows);
  const std::string run = tmp / "run";  // 10 sequences held out; the run's own analysis reads them all
  ASSERT_EQ(run_headlab(train_command(run, {{"--data", tmp / "rows.jsonl"}, {"--eval-fraction", "0.25"},
                                            {"--vocab", "8"}, {"--steps", "5"}}),
                        tmp.path())
                .exit_code,
            0);
  const RunResult same = run_headlab({"analyze", run, "--batch", "1000", "--no-color"}, tmp.path());
  ASSERT_EQ(same.exit_code, 0) << same.describe();
  EXPECT_EQ(same.err.find("goes to"), std::string::npos) << same.err;
  EXPECT_FALSE(std::filesystem::exists(run + "/analysis-batch-1000"));
  const RunResult fewer = run_headlab({"analyze", run, "--batch", "4", "--no-color"}, tmp.path());
  ASSERT_EQ(fewer.exit_code, 0) << fewer.describe();
  EXPECT_NE(fewer.err.find("eval batch of 10 sequences; this one of 4 sequences goes to " + run + "/analysis-batch-4"),
            std::string::npos)
      << fewer.err;
}

// Checkpoint files saved side by side (edits/no-L1H0.safetensors,
// edits/no-L0H0.safetensors, as Model.save writes them) are each analyzed
// into a folder named after the file, never into one shared heads.json; each
// heads.json names its file, and so does its report's title.
TEST(Analyze, CheckpointFilesOfOneFolderGetAFolderEach) {
  TempDir tmp;
  const std::string edits = tmp / "edits";
  std::filesystem::create_directories(edits);
  for (const char* name : {"no-L1H0", "no-L0H0"})
    std::filesystem::copy_file(shared_run() + "/checkpoint.safetensors", edits + "/" + name + ".safetensors");
  for (const char* name : {"no-L1H0", "no-L0H0"}) {
    const std::string file = edits + "/" + name + ".safetensors", folder = edits + "/" + name;
    const RunResult r = run_headlab({"analyze", file, "--threads", "1", "--no-color"}, tmp.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_NE(r.out.find("report: " + folder + "/report.html"), std::string::npos) << r.out;
    const nlohmann::json heads = nlohmann::json::parse(read_bytes(folder + "/heads.json"));
    EXPECT_EQ(heads.at("checkpoint"), file);
    EXPECT_NE(read_bytes(folder + "/report.html").find(std::string("<title>edits/") + name + ".safetensors · "),
              std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(edits + "/heads.json"));
  EXPECT_FALSE(std::filesystem::exists(edits + "/report.html"));
  // Its own folder again (an analysis's), and another batch beside it there.
  const std::string again = read_bytes(edits + "/no-L0H0/heads.json");
  ASSERT_EQ(run_headlab({"analyze", edits + "/no-L1H0.safetensors", "--threads", "1"}, tmp.path()).exit_code, 0);
  const RunResult other =
      run_headlab({"analyze", "edits/no-L1H0.safetensors", "--batch", "4", "--threads", "1"}, tmp.path());
  ASSERT_EQ(other.exit_code, 0) << other.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(edits + "/no-L1H0/analysis-batch-4/heads.json")).at("checkpoint"),
            edits + "/no-L1H0.safetensors");
  EXPECT_EQ(read_bytes(edits + "/no-L0H0/heads.json"), again) << "one file's analysis replaced another's";
}

// The folder named after a checkpoint file is refused, as --out is, when it
// is another run's or holds the user's files; a run's own checkpoint file
// still writes the run's heads.json, with the file it analyzed.
TEST(Analyze, TheFolderNamedAfterAFileIsNeverARunsOrTheUsers) {
  TempDir tmp;
  const std::string run = tmp / "runs/x", notes = tmp / "edits/a";
  std::filesystem::create_directories(tmp / "runs");
  copy_dir(shared_run(), run);
  std::filesystem::copy_file(run + "/checkpoint.safetensors", tmp / "runs/x.safetensors");
  std::filesystem::create_directories(notes);
  write_bytes(notes + "/notes.txt", "mine\n");
  std::filesystem::copy_file(run + "/checkpoint.safetensors", tmp / "edits/a.safetensors");
  const auto before = snapshot(tmp.path());
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", tmp / "runs/x.safetensors"}, tmp.path()), 2,
                            {run + " (the folder named after " + tmp / "runs/x.safetensors",
                             "--out DIR puts it elsewhere) is another run's folder"}));
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", tmp / "edits/a.safetensors"}, tmp.path()), 2,
                            {notes + " (the folder named after", "holds files that are not a headlab analysis's"}));
  EXPECT_TRUE(clean_failure(run_headlab({"analyze", tmp / "edits/a.safetensors", "--out", notes}, tmp.path()), 2,
                            {"--out " + notes + " holds files that are not a headlab analysis's"}));
  EXPECT_EQ(snapshot(tmp.path()), before);
  const RunResult own = run_headlab({"analyze", run + "/checkpoint.safetensors", "--threads", "1"}, tmp.path());
  ASSERT_EQ(own.exit_code, 0) << own.describe();
  EXPECT_EQ(nlohmann::json::parse(read_bytes(run + "/heads.json")).at("checkpoint"), run + "/checkpoint.safetensors");
  EXPECT_FALSE(std::filesystem::exists(run + "/checkpoint"));
}

// --quiet: the verdict's first line and where the files are, nothing more.
TEST(Analyze, QuietPrintsTheVerdictAndTheFiles) {
  TempDir tmp;
  copy_dir(shared_run(), tmp / "run");
  const RunResult r = run_headlab({"analyze", tmp / "run", "--quiet", "--threads", "1"}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_TRUE(lines[0].starts_with("Verdict: ")) << r.out;
  EXPECT_EQ(lines[1], "report: " + tmp / "run/report.html");
  EXPECT_EQ(lines[2], "heads:  " + tmp / "run/heads.json");
}

// A run is complete when its heads.json is the analysis of its last step
// ("step"): one of an earlier step -- an extension killed between its last
// checkpoint and its final analysis keeps it -- or one without the step gets
// the final analysis on --resume, and metrics.jsonl keeps its last line.
TEST(Resume, AHeadsJsonOfAnEarlierStepIsNoFinalAnalysis) {
  TempDir tmp;
  const std::string run = tmp / "run";
  ASSERT_EQ(run_headlab(train_command(run, {{"--steps", "7"}, {"--log-every", "5"}}), tmp.path()).exit_code, 0);
  const std::string earlier = read_bytes(run + "/heads.json");
  ASSERT_EQ(run_headlab({"train", "--resume", run, "--steps", "9"}, tmp.path()).exit_code, 0);
  const std::vector<nlohmann::json> metrics = metrics_without_timing(run);
  const auto analyzed_step = [&] { return nlohmann::json::parse(read_bytes(run + "/heads.json")).value("step", -1); };
  ASSERT_EQ(analyzed_step(), 9);

  write_bytes(run + "/heads.json", earlier);  // of step 7
  const RunResult stale = run_headlab({"train", "--resume", run}, tmp.path());
  ASSERT_EQ(stale.exit_code, 0) << stale.describe();
  EXPECT_EQ(stale.out.find("is complete"), std::string::npos) << stale.out;
  EXPECT_EQ(analyzed_step(), 9);
  EXPECT_EQ(metrics_without_timing(run), metrics) << "the final analysis alone must not drop the last line";

  nlohmann::json unmarked = nlohmann::json::parse(read_bytes(run + "/heads.json"));
  unmarked.erase("step");  // as written before heads.json recorded it
  write_bytes(run + "/heads.json", unmarked.dump(2));
  const RunResult legacy = run_headlab({"train", "--resume", run}, tmp.path());
  ASSERT_EQ(legacy.exit_code, 0) << legacy.describe();
  EXPECT_EQ(legacy.out.find("is complete"), std::string::npos) << legacy.out;
  EXPECT_EQ(analyzed_step(), 9);

  const RunResult done = run_headlab({"train", "--resume", run}, tmp.path());
  EXPECT_NE(done.out.find(run + " is complete at step 9"), std::string::npos) << done.describe();
  EXPECT_EQ(metrics_without_timing(run), metrics);
}

// A finished run resumed without a higher --steps has nothing to train: it
// says so, and how to extend it, and leaves the folder as it was.
TEST(Resume, AFinishedRunSaysItIsCompleteAndHowToExtendIt) {
  TempDir tmp;
  const std::string run = tmp / "run";
  copy_dir(shared_run(), run);
  const auto before = snapshot(run);
  const RunResult r = run_headlab({"train", "--resume", run}, tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find(run + " is complete at step 20"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("headlab train --resume " + run + " --steps 40"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("trained 0 steps"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("Verdict"), std::string::npos) << r.out;
  EXPECT_EQ(snapshot(run), before);
}

// A final report that could not be written (here a folder in its place, as
// a full disk would fail it) leaves no heads.json, so the next --resume
// writes the report instead of calling the run complete (issue 29.16).
TEST(Resume, AReportThatFailedIsWrittenByTheNextResume) {
  TempDir tmp;
  const std::string run = tmp / "run";
  copy_dir(shared_run(), run);
  std::filesystem::remove(run + "/report.html");
  std::filesystem::create_directory(run + "/report.html");
  const RunResult failed = run_headlab({"train", "--resume", run, "--steps", "22"}, tmp.path());
  ASSERT_EQ(failed.exit_code, 1) << failed.describe();
  EXPECT_FALSE(std::filesystem::exists(run + "/heads.json")) << "heads.json says the final analysis is done";
  std::filesystem::remove(run + "/report.html");
  const RunResult again = run_headlab({"train", "--resume", run}, tmp.path());
  ASSERT_EQ(again.exit_code, 0) << again.describe();
  EXPECT_EQ(again.out.find("is complete"), std::string::npos) << again.out;
  EXPECT_TRUE(std::filesystem::is_regular_file(run + "/report.html"));
  EXPECT_TRUE(std::filesystem::is_regular_file(run + "/heads.json"));
}

// An --out too deep for the system's path length fails before step 1, in
// one line that keeps the system's reason (the path is shortened, not the
// message), and leaves no folder behind (issue 29.15).
TEST(Train, AnOutTooLongToWriteFailsAtOnceNamingTheReason) {
  TempDir tmp;
  // 4075 characters: the folder can be made, checkpoint.safetensors's
  // temporary name in it (over 4095) cannot.
  std::string out = tmp.path();
  while (out.size() + 201 < 4075) out += "/" + std::string(200, 'd');
  out += "/" + std::string(4075 - out.size() - 1, 'e');
  const RunResult r = run_headlab(train_command(out, {{"--steps", "100000"}}), tmp.path());
  EXPECT_TRUE(clean_failure(r, 2, {"File name too long", "give a shorter --out", "characters)"}));
  EXPECT_LT(r.err.size(), 600u) << r.err;
  EXPECT_TRUE(is_empty_dir(tmp.path())) << "the folders made for the run were left behind";
}

// --steps 0 keeps the model as initialized and says so, without a time per step.
// --quiet keeps stdout to a summary (the last log line, the verdict's first
// line, the files), for a notebook; train.log still has every line, and a
// usage error still goes to stderr.
TEST(Train, QuietPrintsASummaryAndTheLogKeepsEverything) {
  TempDir tmp;
  const RunResult r =
      run_headlab(train_command(tmp / "run", {{"--quiet", ""}, {"--log-every", "5"}, {"--analyze-every", "10"}}),
                  tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<std::string> lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 4u) << r.out;
  EXPECT_TRUE(lines[0].starts_with("trained 20 steps in ")) << r.out;
  EXPECT_TRUE(lines[0].ends_with("; checkpoint: " + tmp / "run/checkpoint.safetensors")) << r.out;
  EXPECT_TRUE(lines[1].starts_with("Verdict: ")) << r.out;
  EXPECT_EQ(lines[2], "report: " + tmp / "run/report.html");
  EXPECT_EQ(lines[3], "heads:  " + tmp / "run/heads.json");
  EXPECT_EQ(r.err, "");
  const std::string log = read_bytes(tmp / "run/train.log");
  for (const char* line : {"training first-prev-pair in ", "step      5  loss", "step     10  loss",
                           "step     20  loss", "  L0H0 ", "trained 20 steps in "})
    EXPECT_NE(log.find(line), std::string::npos) << line << " is not in train.log:\n" << log;
  EXPECT_TRUE(clean_failure(run_headlab(train_command(tmp / "bad", {{"--quiet", ""}, {"--steps", "abc"}}), tmp.path()),
                            2, {"--steps 'abc' is not a whole number"}));
}

// After training with analyses logged, the table's last column is the step
// each head's label emerged at: report.html's step for a labelled head, "-"
// for one without a pattern label. Without logged analyses, no such column.
TEST(Train, TheTableSaysWhenEachLabelEmergedAsTheReportDoes) {
  TempDir tmp;
  const RunResult r =
      run_headlab(train_command(tmp / "run", {{"--d-model", "-"}, {"--steps", "300"}, {"--analyze-every", "50"}}),
                  tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::vector<std::string> lines = lines_of(r.out);
  const auto header =
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("layer  head"); });
  ASSERT_NE(header, lines.end()) << r.out;
  EXPECT_TRUE(header->ends_with("  emerged")) << *header;
  const nlohmann::json data = page_data(read_bytes(tmp / "run/report.html"));
  const nlohmann::json& heads = data.at("run").at("heads");
  int labelled = 0;
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const std::string& row = *(header + 2 + static_cast<std::ptrdiff_t>(i));
    const std::string last = row.substr(row.find_last_of(' ') + 1);
    const nlohmann::json& emerged = data.at("heads_extra")[i].at("emerged");
    const bool pattern = analysis::label_from_name(heads[i].at("label").get<std::string>()).is_pattern();
    labelled += pattern;
    EXPECT_EQ(last, pattern && !emerged.is_null() ? std::to_string(emerged.get<int64_t>()) : "-") << row;
  }
  EXPECT_GT(labelled, 0) << r.out << "\nno head labelled: the test shows nothing";
  const RunResult plain = run_headlab(train_command(tmp / "plain"), tmp.path());
  ASSERT_EQ(plain.exit_code, 0) << plain.describe();
  EXPECT_EQ(plain.out.find("emerged"), std::string::npos) << plain.out;
}

// The table's "emerged" column of a train or analyze output: one entry per
// head, empty when the table has no such column.
std::vector<std::string> emerged_column(const std::string& out) {
  const std::vector<std::string> lines = lines_of(out);
  const auto header =
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.starts_with("layer  head"); });
  std::vector<std::string> column;
  if (header == lines.end() || !header->ends_with("  emerged")) return column;
  for (auto row = header + 2; row != lines.end() && !row->empty(); ++row)
    column.push_back(row->substr(row->find_last_of(' ') + 1));
  return column;
}

// report.html's emergence step of each head ("null" for none).
std::vector<std::string> report_emerged(const std::string& report) {
  std::vector<std::string> steps;
  const nlohmann::json data = page_data(read_bytes(report));
  for (const nlohmann::json& h : data.at("heads_extra")) steps.push_back(h.at("emerged").dump());
  return steps;
}

// `analyze RUN` reads the run's own history, as train does: its table's
// "emerged" column and report.html's steps are train's, into the run folder
// or into another --out. A checkpoint file alone has no history: no column,
// and no steps in its report.
TEST(Analyze, SaysWhenEachLabelEmergedFromTheRunsHistory) {
  TempDir tmp;
  const RunResult trained =
      run_headlab(train_command(tmp / "run", {{"--d-model", "-"}, {"--steps", "300"}, {"--analyze-every", "50"}}),
                  tmp.path());
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const std::vector<std::string> column = emerged_column(trained.out);
  const std::vector<std::string> steps = report_emerged(tmp / "run/report.html");
  ASSERT_EQ(column.size(), 2u) << trained.out;
  ASSERT_NE(std::count(steps.begin(), steps.end(), "null"), 2) << "nothing emerged: the test shows nothing";
  for (const std::vector<std::string>& out : {std::vector<std::string>{}, std::vector<std::string>{"--out", tmp / "elsewhere"}}) {
    std::vector<std::string> command{"analyze", tmp / "run"};
    command.insert(command.end(), out.begin(), out.end());
    const RunResult r = run_headlab(command, tmp.path());
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(emerged_column(r.out), column) << r.out;
    EXPECT_EQ(report_emerged((out.empty() ? tmp / "run" : out[1]) + "/report.html"), steps);
  }
  std::filesystem::copy_file(tmp / "run/checkpoint.safetensors", tmp / "alone.safetensors");
  const RunResult alone = run_headlab({"analyze", tmp / "alone.safetensors"}, tmp.path());
  ASSERT_EQ(alone.exit_code, 0) << alone.describe();
  EXPECT_EQ(alone.out.find("emerged"), std::string::npos) << alone.out;
  EXPECT_EQ(report_emerged(tmp / "alone/report.html"), std::vector<std::string>(2, "null"));
}

// The final analysis's cost is said at the first log line when it is long
// (minutes): its forward passes of the eval batch, the time of one (that
// line's evaluation) and the --eval-batch that would take about a minute.
// 16 layers of 16 heads make 953 passes of 512 sequences: over ten minutes
// here, more than a minute on a machine ten times as fast. The demo's
// analysis takes a fraction of a second and goes unsaid.
TEST(Train, ALongFinalAnalysisIsAnnouncedAtTheFirstLogLineAndTheDemosIsNot) {
  TempDir tmp;
  const std::string said = "the final head analysis will take about ";
  const RunResult demo = run_headlab({"train", "--out", tmp / "demo", "--steps", "50"}, tmp.path());
  ASSERT_EQ(demo.exit_code, 0) << demo.describe();
  EXPECT_NE(demo.out.find("step     50  loss"), std::string::npos) << demo.out;
  EXPECT_EQ(demo.out.find(said), std::string::npos) << demo.out;
  EXPECT_EQ(read_bytes(tmp / "demo/train.log").find(said), std::string::npos);

  Child child(headlab_path(),
              {"train", "--out", "long", "--task", "previous", "--vocab", "16", "--seq-len", "32", "--layers", "16",
               "--heads", "16", "--d-model", "16", "--batch", "2", "--eval-batch", "512", "--steps", "1",
               "--analyze-every", "0", "--threads", "1"},
              tmp.path(), tmp.path());
  // Said before the analysis starts: stopped there, the run ends as stopped during it.
  const std::string log_path = tmp / "long/train.log";
  ASSERT_TRUE(wait_until([&] {
    return child.finished() || (std::filesystem::exists(log_path) && read_bytes(log_path).find(said) != std::string::npos);
  }));
  child.signal(SIGTERM);
  const RunResult r = child.wait();
  EXPECT_EQ(r.exit_code, 143) << r.describe();
  const std::vector<std::string> lines = lines_of(r.out);
  const auto at = std::find_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(said) != std::string::npos; });
  ASSERT_NE(at, lines.end()) << r.out;
  ASSERT_NE(at, lines.begin());
  EXPECT_NE(std::prev(at)->find("step      1  loss"), std::string::npos) << "right after the first log line:\n" << r.out;
  EXPECT_NE(at->find("(953 forward passes' worth of the 512 --eval-batch sequences, "), std::string::npos) << *at;
  // The suggested batch, fewer sequences than the run's.
  const std::size_t flag = at->find("; --eval-batch ");
  ASSERT_NE(flag, std::string::npos) << *at;
  const int64_t suggested = std::stoll(at->substr(flag + 15));
  EXPECT_GE(suggested, 1);
  EXPECT_LT(suggested, 512);
  EXPECT_NE(read_bytes(log_path).find("[warning] " + said), std::string::npos) << "train.log keeps it as a warning";
}

// An attention-only model has no MLP: train.log's model line says so where
// an MLP model's gives d_ff, a --d-ff given with it is warned of, and
// config.json keeps the setting as given (older and newer readers need it).
TEST(Train, AnAttentionOnlyModelShowsNoMlpWidth) {
  TempDir tmp;
  const RunResult mlp = run_headlab(train_command(tmp / "mlp", {{"--steps", "0"}}), tmp.path());
  ASSERT_EQ(mlp.exit_code, 0) << mlp.describe();
  EXPECT_NE(read_bytes(tmp / "mlp/train.log").find("d_model 16, d_k 8, d_ff 64, "), std::string::npos)
      << read_bytes(tmp / "mlp/train.log");
  const RunResult attn =
      run_headlab(train_command(tmp / "attn", {{"--steps", "0"}, {"--attn-only", ""}, {"--d-ff", "32"}}), tmp.path());
  ASSERT_EQ(attn.exit_code, 0) << attn.describe();
  EXPECT_EQ(attn.err, "headlab train: warning: --d-ff 32 does nothing with --attn-only: the model has no MLP\n");
  const std::string log = read_bytes(tmp / "attn/train.log");
  EXPECT_NE(log.find("d_model 16, d_k 8, attention only, "), std::string::npos) << log;
  EXPECT_EQ(log.find("d_ff"), std::string::npos) << log;
  EXPECT_EQ(nlohmann::json::parse(read_bytes(tmp / "attn/config.json")).at("d-ff"), 32);
}

TEST(Train, ZeroStepsSaysTheModelIsAsInitialized) {
  TempDir tmp;
  const RunResult r = run_headlab(train_command(tmp / "run", {{"--steps", "0"}}), tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("trained no steps (--steps 0)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("ms/step"), std::string::npos) << r.out;
}

// More threads than cores only slow every parallel region down: capped, with a note.
TEST(Train, ThreadsBeyondTheCoresAreCappedWithANote) {
  TempDir tmp;
  const RunResult r = run_headlab(train_command(tmp / "run", {{"--threads", "1024"}}), tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores >= 1024) GTEST_SKIP() << "this machine has " << cores << " cores";
  EXPECT_NE(r.err.find("--threads 1024 is more than the " + std::to_string(cores) + " core"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find(", " + std::to_string(cores) + " thread(s)"), std::string::npos) << r.out;
}

// --threads 0 (the default) gives a toy model one thread, and config.json
// records the count picked rather than the 0.
TEST(Train, DefaultThreadsGiveAToyModelOneThreadAndRecordIt) {
  TempDir tmp;
  const RunResult r = run_headlab(train_command(tmp / "run", {{"--threads", "-"}, {"--steps", "2"}}), tmp.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find(", 1 thread(s)"), std::string::npos) << r.out;
  const nlohmann::json config = nlohmann::json::parse(read_bytes(tmp / "run/config.json"));
  EXPECT_EQ(config.at("threads"), 1) << config.dump();
}

// eval says where its dumps went, in text and in --json.
TEST(Eval, SaysWhereItWroteItsDumps) {
  TempDir tmp;
  const std::string ck = shared_run() + "/checkpoint.safetensors";
  const RunResult text = run_headlab({"eval", ck, "--dump-logits", "l.safetensors", "--dump-grads", "g.safetensors"},
                                     tmp.path());
  ASSERT_EQ(text.exit_code, 0) << text.describe();
  EXPECT_NE(text.out.find("logits: l.safetensors\n"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("gradients: g.safetensors\n"), std::string::npos) << text.out;
  // Tokens and targets are stored as integers, shaped like the logits' first two axes.
  const core::SafetensorsFile dump = core::load_safetensors(tmp / "l.safetensors");
  const int64_t vocab = 8, classes = 64;  // the fixture's first-prev-pair task
  const core::Shape& logits = dump.get("logits").shape();
  ASSERT_EQ(dump.integers.size(), 3u);
  for (const auto& [name, array] : dump.integers) {
    if (name == "lengths") {  // a task's rows are full
      EXPECT_EQ(array.values, std::vector<int64_t>(static_cast<std::size_t>(logits[0]), logits[1]));
      continue;
    }
    EXPECT_EQ(array.shape, (core::Shape{logits[0], logits[1]})) << name;
    const auto [low, high] = std::minmax_element(array.values.begin(), array.values.end());
    EXPECT_GE(*low, name == "targets" ? -1 : 0) << name;
    EXPECT_LT(*high, name == "targets" ? classes : vocab) << name;
  }
  const RunResult json = run_headlab({"eval", ck, "--json", "--dump-logits", "l.safetensors"}, tmp.path());
  ASSERT_EQ(json.exit_code, 0) << json.describe();
  EXPECT_EQ(nlohmann::json::parse(json.out).at("logits_file"), "l.safetensors") << json.out;
}

}  // namespace
}  // namespace headlab::cli_test
