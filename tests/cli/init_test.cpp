// `train --init CHECKPOINT` starts from the checkpoint's model and weights:
// the model flags default to the checkpoint's, so a run from a 4-head
// bidirectional model stays one even though the defaults say 2 causal heads
// (tensors of the same shapes, which were once silently reinterpreted).
#include <gtest/gtest.h>

#include <string>

#include "tests/cli/fixtures.h"

namespace headlab::cli_test {
namespace {

TEST(Init, TakesTheModelFromTheCheckpoint) {
  TempDir cwd;
  const RunResult source =
      run_headlab(train_command(cwd / "source", {{"--heads", "4"}, {"--bidirectional", ""}}), cwd.path());
  ASSERT_EQ(source.exit_code, 0) << source.describe();
  const std::string ck = cwd / "source/checkpoint.safetensors";

  // No training steps: the new checkpoint holds the source's weights as they were.
  const RunResult r = run_headlab(train_command(cwd / "init", {{"--steps", "0"}, {"--init", ck}}), cwd.path());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const RawSafetensors from = RawSafetensors::read(ck);
  const RawSafetensors to = RawSafetensors::read(cwd / "init/checkpoint.safetensors");
  EXPECT_EQ(to.meta_json("model"), from.meta_json("model"));
  EXPECT_EQ(to.meta_json("model").at("heads"), 4);
  EXPECT_EQ(to.meta_json("model").at("causal"), false);
  for (const char* name : {"blocks.0.attn.q.weight", "head.weight"})
    EXPECT_EQ(to.tensor_bytes(name), from.tensor_bytes(name)) << name;
  const nlohmann::json config = nlohmann::json::parse(read_bytes(cwd / "init/config.json"));
  EXPECT_EQ(config.at("heads"), 4);
  EXPECT_EQ(config.at("bidirectional"), true);

  // A flag that agrees with the checkpoint is fine.
  const RunResult agreeing =
      run_headlab(train_command(cwd / "agree", {{"--steps", "0"}, {"--heads", "4"}, {"--init", ck}}), cwd.path());
  EXPECT_EQ(agreeing.exit_code, 0) << agreeing.describe();
}

}  // namespace
}  // namespace headlab::cli_test
