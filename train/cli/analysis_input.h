// What `headlab analyze` analyzes: the run's own session (its task and
// evaluation batch), or with --data the checkpoint's model on the sequences
// of a data file of the user's own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "layers/transformer.h"
#include "train/checkpoint.h"
#include "train/session.h"
#include "train/tasks.h"

namespace headlab::cli {

class AnalysisInput {
 public:
  // The run's session, as the checkpoint's config describes it.
  static AnalysisInput of_run(const train::Checkpoint& ck);
  // The checkpoint's model on the first `rows` sequences of `data` (0: all),
  // the file read with the model's own sizes and classes, as eval --data
  // reads it. UsageError when the file does not fit the model.
  static AnalysisInput of_file(const train::Checkpoint& ck, const std::string& ck_path, const std::string& data,
                               int64_t rows);

  const train::Batch& batch() const { return session_ ? session_->eval_batch() : batch_; }
  train::Task& task() { return session_ ? session_->task() : *task_; }
  layers::Transformer& model() { return session_ ? session_->model() : *model_; }
  const train::TrainConfig& config() const { return session_ ? session_->config() : config_; }

 private:
  std::unique_ptr<train::Session> session_;
  train::TrainConfig config_;
  std::unique_ptr<train::Task> task_;
  std::unique_ptr<layers::Transformer> model_;
  train::Batch batch_;
};

// With --data the analysis must not land on the run's own heads.json by
// default: --out is required, and must be a folder (the run's own folder
// replaces its files on purpose). UsageError otherwise.
void check_data_out(const std::string& data, const std::string& out);

}  // namespace headlab::cli
