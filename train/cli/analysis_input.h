// What `headlab analyze` analyzes: the run's own session (its task and
// evaluation batch), with --task the checkpoint's model on another task's
// batch, or with --data on the sequences of a data file of the user's own,
// read a chunk of rows at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "layers/transformer.h"
#include "train/checkpoint.h"
#include "train/session.h"
#include "train/tasks.h"

namespace headlab::cli {

class AnalysisInput {
 public:
  // The run's session, as the checkpoint's config describes it: one chunk,
  // its evaluation batch.
  static AnalysisInput of_run(const train::Checkpoint& ck);
  // The checkpoint's model on every sequence of `data`, the file read with
  // the model's own sizes and classes, as eval --data reads it, and analyzed
  // `chunk_rows` sequences at a time (0: as many as fit the memory budget of
  // one chunk, train/analysis_chunk.h).
  // UsageError when the file does not fit the model, or a chunk its memory.
  static AnalysisInput of_file(const train::Checkpoint& ck, const std::string& ck_path, const std::string& data,
                               int64_t chunk_rows);

  // The checkpoint's model on another task than the run's (the config's
  // task, `analyze --task`), as eval --task evaluates it: the task at its own
  // sizes (a shorter one than the model's positions fits too), none of the
  // run's training or held-out sets, one chunk of the config's eval-batch.
  // UsageError when the task does not fit the model.
  static AnalysisInput of_task(const train::Checkpoint& ck, const std::string& ck_path, bool batch_given);

  int64_t rows() const { return rows_; }              // sequences analyzed
  int64_t chunk_rows() const { return chunk_rows_; }  // at a time
  // Sequences [first, first + count) of them, with the task's patterns and
  // expected roles (Task::describe).
  train::Batch read(int64_t first, int64_t count) const;
  // Every sequence's length ([rows]), or empty: every one is full.
  const std::vector<int32_t>& lengths() const { return lengths_; }
  // The batch analyzed in one chunk (of_run and of_task).
  const train::Batch& batch() const { return session_ ? session_->eval_batch() : batch_; }
  train::Task& task() { return session_ ? session_->task() : *task_; }
  layers::Transformer& model() { return session_ ? session_->model() : *model_; }
  const train::TrainConfig& config() const { return session_ ? session_->config() : config_; }
  // of_file's record of what it read, heads.json's "data_file": the file's
  // absolute path, its size and FNV-1a hash (as a run's checkpoint records
  // its --data), its sequences and target positions, and whether it was a
  // pipe (nothing else identifies one later); null for the other inputs.
  const nlohmann::json& data_record() const { return data_record_; }
  // "data:FILE" or the task's name, and how messages name the rows ("the batch", "--data FILE").
  std::string source() const { return source_; }

 private:
  std::unique_ptr<train::Session> session_;
  train::TrainConfig config_;
  std::unique_ptr<train::Task> task_;
  std::unique_ptr<layers::Transformer> model_;
  train::Batch batch_;  // of_task's
  int64_t rows_ = 0, chunk_rows_ = 0;
  std::vector<int32_t> lengths_;
  std::string source_;
  nlohmann::json data_record_;
};

// When the --data file `data` (eval's or analyze's task) has lines without
// "targets", scored on the next token, and the checkpoint's run learned other
// targets (some of its own analysis batch's are not the next token, or it
// leaves positions the default scores without one): the warning that says
// so, as headlab.analyze warns in that case (docs/python.md); else "". No
// warning when the run's own batch cannot be made (its data file is gone).
std::string next_token_warning(const train::Checkpoint& ck, const std::string& ck_path, const train::Task& data);

// With --data the analysis must not land on the run's own heads.json by
// default: --out is required, and must be a folder (the run's own folder
// replaces its files on purpose). UsageError otherwise.
void check_data_out(const std::string& data, const std::string& out);

}  // namespace headlab::cli
