#include "train/run_builder.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/shortest.h"
#include "train/data_file.h"
#include "train/errors.h"
#include "train/fixed_sets.h"
#include "train/input_file.h"

namespace headlab::train {

namespace {

std::unique_ptr<Task> make_base_task(const TrainConfig& config) {
  const layers::ModelSpec& m = config.model;
  if (!config.data.empty()) {
    // --vocab, --classes and --seq-len left at 0: what the file needs, read
    // in its one pass (its largest token or, as targets are tokens unless
    // --classes says otherwise, target; its longest sequence, at least what
    // the head analysis reads).
    return std::make_unique<DataFile>(config.data, DataFile::Sizes{m.vocab, m.classes, m.max_seq_len, kMinSeqLen},
                                      config.shuffle, m.causal);
  }
  const TaskInfo& info = task_info(config.task);
  return make_task(config.task, m.vocab > 0 ? m.vocab : info.default_vocab,
                   m.max_seq_len > 0 ? m.max_seq_len : info.default_seq_len);
}

// Why a model of one output class is refused: where the count came from
// (--classes, --vocab, the data file's ids) and the fix.
std::string one_class_refusal(const TrainConfig& config, const Task& task) {
  const std::string vocab = std::to_string(task.vocab());
  std::string source, fix = "give --classes 2 or more";
  if (config.model.classes > 0) {
    source = "--classes " + std::to_string(config.model.classes);
  } else if (config.data.empty()) {
    source = "task " + task.name() + " at --vocab " + vocab;
    fix = "give a larger --vocab";
  } else if (config.model.vocab > 0) {
    source = "--vocab " + vocab + " (the classes of --data " + config.data + " unless --classes says otherwise)";
  } else {
    source = "--data " + config.data + " (" + task.inferred_sizes() + ": every token and target in it is 0)";
    fix = "give the file targets of 2 or more classes, or --classes 2 or more";
  }
  return source + " gives the model " + std::to_string(task.num_classes()) +
         " output class: every prediction would be right, so there is nothing to learn, and the head analysis "
         "(which compares the correct class's logit with the others') cannot run; " + fix;
}

// Whether some position of `rows` has a target (>= 0).
bool has_target(const Batch& rows) {
  return std::any_of(rows.targets.begin(), rows.targets.end(), [](int32_t t) { return t >= 0; });
}

// "line 4", "lines 4, 9 and 12", "lines 4, 9, 12, 15, 20 and 3 more": the
// first five of `lines` (1-based, at least one).
std::string line_list(const std::vector<int64_t>& lines) {
  constexpr std::size_t kShown = 5;
  const std::size_t n = lines.size();
  std::string named = n == 1 ? "line " : "lines ";
  for (std::size_t i = 0; i < std::min(n, kShown); ++i)
    named += (i == 0 ? "" : i + 1 == n ? " and " : ", ") + std::to_string(lines[i]);
  if (n > kShown) named += " and " + std::to_string(n - kShown) + " more";
  return named;
}

// The refusal of a --data file's `lines` (1-based, at least one) that have no target.
std::string no_target_refusal(const TrainConfig& config, const Task& file, const std::vector<int64_t>& lines) {
  const std::size_t n = lines.size();
  const std::string named = line_list(lines);
  return "--data " + config.data + ": " + std::to_string(n) + " of its " + std::to_string(file.size()) +
         " sequences " + (n == 1 ? "has" : "have") + " no target (" + named +
         ": every target -1, or a single token without \"targets\"), so no training step would learn from " +
         (n == 1 ? "it" : "them") + " (a batch of only such lines would learn nothing); give " +
         (n == 1 ? "it" : "them") + " targets, or remove " + (n == 1 ? "it" : "them") + " from the file";
}

}  // namespace

std::unique_ptr<Task> make_task_for(const TrainConfig& config) {
  return with_fixed_sets(make_base_task(config), config);
}

std::unique_ptr<Task> make_task_to_train(const TrainConfig& config) {
  std::unique_ptr<Task> base = make_base_task(config);
  if (const auto* file = dynamic_cast<const DataFile*>(base.get()))
    if (const std::vector<int64_t> lines = file->lines_with_no_target(); !lines.empty())
      throw UsageError(no_target_refusal(config, *file, lines));
  return with_fixed_sets(std::move(base), config);
}

layers::ModelSpec model_spec_for(const TrainConfig& config, const Task& task) {
  if (config.model.classes > 0 && config.model.classes != task.num_classes())
    throw UsageError("--classes " + std::to_string(config.model.classes) + " does not fit task " + task.name() +
                     ", whose targets are one of " + std::to_string(task.num_classes()) +
                     " classes (leave --classes at 0 for the task's own)");
  // Checked before anything runs (and before train --force removes an old
  // run): one class leaves nothing to learn, every prediction being right,
  // and nothing for the head analysis to measure (importance compares the
  // correct class's logit with the others'), which failed at its first step.
  if (task.num_classes() < 2) throw UsageError(one_class_refusal(config, task));
  // The head analysis during and after training scores positions q >= 2.
  if (task.seq_len() < kMinSeqLen)
    throw UsageError("--seq-len " + std::to_string(task.seq_len()) + " is too short: the head analysis needs at least " +
                     std::to_string(kMinSeqLen) + " positions per sequence");
  layers::ModelSpec spec = config.model;
  spec.vocab = task.vocab();
  spec.max_seq_len = task.seq_len();
  spec.classes = task.num_classes();
  spec = spec.resolved();
  validate_model(spec);
  return spec;
}

double memory_limit_bytes() {
  double limit = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  if (limit <= 0) limit = std::numeric_limits<double>::infinity();
  for (const int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit r{};
    if (::getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY) limit = std::min(limit, static_cast<double>(r.rlim_cur));
  }
  // cgroup v2: "0::/PATH" in /proc/self/cgroup; PATH's memory.max is a number or "max".
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    if (!line.starts_with("0::")) continue;
    std::ifstream max("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
    double bytes = 0;
    if (max >> bytes && bytes > 0) limit = std::min(limit, bytes);
  }
  return limit;
}

void check_token_count(const std::string& flag, int64_t rows, int64_t seq_len) {
  const int64_t max_rows = std::numeric_limits<int32_t>::max() / seq_len;
  if (rows > max_rows)
    throw UsageError(flag + " " + std::to_string(rows) + ": that many sequences of " + std::to_string(seq_len) +
                     " tokens exceed 2^31-1 tokens (at most " + std::to_string(max_rows) + ")");
}

void check_sizes(const layers::ModelSpec& m, const std::vector<std::pair<std::string, int64_t>>& batches,
                 const std::string& inferred) {
  const int64_t t = m.max_seq_len;
  int64_t most_rows = 0;
  std::string flags;
  for (const auto& [flag, rows] : batches) {
    check_token_count(flag, rows, t);
    most_rows = std::max(most_rows, rows);
    flags += flag + ", ";
  }
  // A lower bound: parameters and gradients, and per token position the
  // logits, every layer's attention row per head and its residual stream.
  const double d = static_cast<double>(m.d_model), layers = static_cast<double>(m.layers);
  const double d_ff = m.attn_only ? 0.0 : static_cast<double>(m.d_ff);
  const double params = static_cast<double>(m.vocab + t + m.classes) * d + layers * (4 * d * d + 2 * d * d_ff);
  const double per_position =
      static_cast<double>(m.classes) + layers * (static_cast<double>(m.heads * t) + 2 * d + d_ff);
  const double positions = static_cast<double>(most_rows * t);
  const double bytes = 4 * (2 * params + positions * per_position);
  const double ram = memory_limit_bytes();
  if (bytes > ram) {
    // %g: the estimate can exceed any integer type.
    char need[32], have[32];
    std::snprintf(need, sizeof need, "%.3g", bytes / 1e9);
    std::snprintf(have, sizeof have, "%.3g", ram / 1e9);
    // Sizes no flag gave come from one line of the file: name it, and the flags that bound it.
    const std::string from_file =
        inferred.empty() ? ""
                         : "; the " + inferred + ": fix the line if it is a stray, or give --vocab and --seq-len " +
                               "(a line beyond them is then refused by its number)";
    throw UsageError(std::string("this model and batch need at least ") + need + " GB of memory, more than the " + have +
                     " GB this process may use (reduce " + flags + "--seq-len, --vocab, --layers or --d-model)" +
                     from_file);
  }
}

std::string slow_analysis_warning(const layers::ModelSpec& m, int64_t rows, int64_t seq_len,
                                  const std::string& inferred) {
  const int64_t positions = rows * seq_len;  // both bounded by check_sizes: no overflow
  const double logits = static_cast<double>(positions) * static_cast<double>(m.classes);
  if (logits < kSlowAnalysisLogits) return "";
  // The flag the classes follow from: a task's --vocab (squared for a pair
  // of tokens), or --classes; or a data file's largest id, which no smaller
  // --vocab can read.
  const std::string v = std::to_string(m.vocab);
  const bool from_file = m.classes == m.vocab && inferred.starts_with("vocab ");
  const std::string from = from_file                     ? inferred
                           : m.classes == m.vocab * m.vocab ? "--vocab " + v + " squared"
                           : m.classes == m.vocab        ? "--vocab " + v
                                                          : "--classes";
  char bytes[32];  // float32 logits
  if (4 * logits < 1e9)
    std::snprintf(bytes, sizeof bytes, "%.0f MB", 4 * logits / 1e6);
  else
    std::snprintf(bytes, sizeof bytes, "%.3g GB", 4 * logits / 1e9);
  return "every head analysis (at the end, and at --analyze-every) runs dozens of forward passes over " +
         std::to_string(rows) + " x " + std::to_string(seq_len) + " positions x " + std::to_string(m.classes) +
         " output classes (" + from + "): " + bytes + " of logits each, slow and memory-hungry; " +
         (from_file ? "a smaller --eval-batch shrinks it (the file's ids need that many classes)"
                    : "a smaller " + std::string(from == "--classes" ? "--classes" : "--vocab") +
                          ", --eval-batch or --seq-len shrinks it");
}

namespace {

// Row `row` of `rows` as a message names it: "data.jsonl:7" for a row of
// the data file `file`, else "sequence 2 of 10".
std::string row_name(const Batch& rows, int64_t row, const std::string& file) {
  if (!file.empty() && static_cast<int64_t>(rows.lines.size()) == rows.batch)
    return file + ":" + std::to_string(rows.lines[static_cast<std::size_t>(row)]);
  return "sequence " + std::to_string(row + 1) + " of " + std::to_string(rows.batch);
}

// " (lines 4, 9 and 12 of data.jsonl)" for rows of the data file `file`
// (the first five, in the rows' order), else "".
std::string lines_of(const Batch& rows, const std::string& file) {
  if (file.empty() || static_cast<int64_t>(rows.lines.size()) != rows.batch || rows.batch == 0) return "";
  return " (" + line_list(rows.lines) + " of " + file + ")";
}

}  // namespace

void check_analysable(const Batch& rows, const std::string& source, const std::string& file) {
  // The set's own patterns: one without a key in these rows would score null
  // for every head and its role could never be found (a data file whose
  // keyed lines all lie beyond the run's first --eval-batch).
  for (const analysis::AttendPattern& p : rows.attend)
    if (!p.keyed())
      throw UsageError(source + ": the pattern \"" + p.name + "\" gives no query a key in the " +
                       std::to_string(rows.batch) +
                       " sequences the head analysis reads, so no head could be scored on it: have the analysis read "
                       "lines with its keys (a larger --eval-batch, such lines first, or --eval-data FILE), or leave "
                       "the pattern out");
  // Without a target the held-out loss and accuracy, and every ablation, read
  // 0 as if measured. A batch of lengths alone (analyze --data's whole file,
  // which DataFile refuses without a target) carries none to count.
  if (!rows.targets.empty() && !has_target(rows))
    throw UsageError(source + ": none of the " + std::to_string(rows.batch) +
                     " sequences the held-out metrics and the head analysis read has a target (each is -1, or a line "
                     "without \"targets\" has a single token), so their loss and accuracy would read 0 as if measured: "
                     "give those lines" + lines_of(rows, file) +
                     " targets, or have them read others (a larger --eval-batch, another --eval-data)");
  if (rows.lengths.empty()) return;  // full rows of seq-len >= kMinSeqLen (model_spec_for)
  const auto longest = std::max_element(rows.lengths.begin(), rows.lengths.end());
  if (*longest >= kMinSeqLen) return;
  const std::string at_least = std::to_string(kMinSeqLen);
  throw UsageError(source + ": every sequence the head analysis reads is shorter than " + at_least +
                   " tokens (the longest, " + row_name(rows, longest - rows.lengths.begin(), file) + ", has " +
                   std::to_string(*longest) + "); it needs one of at least " + at_least +
                   ", as its positional scores read queries q >= 2: " +
                   (file.empty() ? "add longer sequences" : "add lines of " + at_least + " tokens or more to " + file) +
                   " (shorter ones count in the scores they can show)");
}

void check_task_fits(const Task& task, const layers::ModelSpec& model) {
  if (task.vocab() > model.vocab || task.num_classes() != model.classes || task.seq_len() > model.max_seq_len)
    throw UsageError("task " + task.name() + " (vocab " + std::to_string(task.vocab()) + ", classes " +
                     std::to_string(task.num_classes()) + ", seq-len " + std::to_string(task.seq_len()) +
                     ") does not fit the checkpoint's model (vocab " + std::to_string(model.vocab) + ", classes " +
                     std::to_string(model.classes) + ", max seq-len " + std::to_string(model.max_seq_len) + ")");
}

namespace {

// The slice counts nearest to `k` that split `rows` sequences evenly over
// `processes`: divisors of `rows` that are multiples of `processes`, the
// nearest below `k` and above it, as "4 or 8" ("" if there is none, or if
// `rows` is too large to search quickly).
std::string slice_counts_near(int64_t rows, int64_t k, int64_t processes) {
  if (rows < 1 || rows > (int64_t{1} << 40)) return "";
  int64_t below = 0, above = 0;
  const auto consider = [&](int64_t d) {
    if (d % processes != 0 || d == k) return;
    if (d < k) below = std::max(below, d);
    if (d > k && (above == 0 || d < above)) above = d;
  };
  for (int64_t i = 1; i <= rows / i; ++i)
    if (rows % i == 0) {
      consider(i);
      consider(rows / i);
    }
  if (below > 0 && above > 0) return std::to_string(below) + " or " + std::to_string(above);
  return below > 0 ? std::to_string(below) : above > 0 ? std::to_string(above) : "";
}

// The advice for `rows` sequences that `k` slices do not split: the slice
// counts nearest to k that split them evenly over the processes, or, where
// none does (an odd number over 2 processes), `resize`: how to change the
// number of sequences ("" for none but --batch).
std::string split_advice(int64_t rows, int64_t k, int64_t processes, const std::string& resize) {
  const std::string n = std::to_string(rows), near = slice_counts_near(rows, k, processes);
  if (!near.empty()) return "give --micro-batches " + near + (resize.empty() ? "" : ", or " + resize);
  if (processes == 1) return "give --micro-batches a divisor of " + n + (resize.empty() ? "" : ", or " + resize);
  const std::string p = std::to_string(processes);
  return "no number of slices splits " + n + " sequences evenly over " + p + " processes: give " +
         (resize.empty() ? "a --batch that is a multiple of " + p : resize);
}

}  // namespace

void make_data_paths_absolute(TrainConfig& config) {
  for (std::string* path : {&config.data, &config.eval_data})
    if (!path->empty()) *path = std::filesystem::absolute(*path).lexically_normal().string();
}

void derive_run_settings(TrainConfig& config, int processes) {
  make_data_paths_absolute(config);
  config.micro_batches = micro_batches_for(config, processes);
  // A constant schedule has no horizon: its runs stay the same whatever their --steps.
  if (config.schedule_steps == 0 && config.schedule != "constant") config.schedule_steps = config.steps;
}

int64_t micro_batches_for(const TrainConfig& config, int processes) {
  const int64_t n = processes;
  const int64_t k = config.micro_batches > 0 ? config.micro_batches : n;
  const std::string b = std::to_string(config.batch);
  if (k % n != 0)
    throw UsageError("--micro-batches " + std::to_string(k) + " does not spread over " + std::to_string(n) +
                     " processes: give a multiple of " + std::to_string(n) + " (or 0, one slice per process)");
  // More slices than sequences: no multiple of k is the batch that was meant.
  if (config.micro_batches > 0 && config.batch > 0 && k > config.batch)
    throw UsageError("--micro-batches " + std::to_string(k) + " is more slices than the " + b +
                     " sequences of --batch " + b + ", and each slice needs at least one: " +
                     split_advice(config.batch, k, n, ""));
  if (config.batch % k != 0) {
    const int64_t lower = config.batch / k * k, higher = lower + k;
    const std::string fix = "use a multiple of " + std::to_string(k) + ", such as " +
                            (lower > 0 ? std::to_string(lower) + " or " : std::string()) + std::to_string(higher);
    if (config.micro_batches == 0)
      throw UsageError("--batch " + b + " does not divide among the " + std::to_string(n) +
                       " processes (mpirun -np " + std::to_string(n) + "): " + fix);
    throw UsageError("--batch " + b + " does not split into --micro-batches " + std::to_string(k) + " slices" +
                     (n > 1 ? " over " + std::to_string(n) + " processes" : std::string()) + ": " + fix);
  }
  return k;
}

void check_full_batch_splits(const TrainConfig& config, int64_t rows, int processes) {
  const int64_t k = config.micro_batches;
  if (rows % k == 0) return;
  const std::string n = std::to_string(rows), slices = std::to_string(k);
  // Where the rows come from, and the flag that sets their number.
  std::string source, resize;
  if (config.train_size > 0) {
    source = "--train-size " + n;
    const int64_t lower = rows / k * k;
    resize = "--train-size a multiple of " + slices + ", such as " +
             (lower > 0 ? std::to_string(lower) + " or " : std::string()) + std::to_string(lower + k);
  } else if (config.train_fraction > 0) {
    source = "the examples --train-fraction " + core::shortest(config.train_fraction) + " keeps";
    resize = "in place of --train-fraction a --train-size that is a multiple of " + slices;
  } else {
    source = "the sequences of --data " + config.data +
             (config.eval_fraction > 0 ? " less --eval-fraction " + core::shortest(config.eval_fraction) : "");
  }
  if (k > rows) resize.clear();  // no training set of more sequences is the one meant
  throw UsageError("--batch full (" + n + " sequences: " + source + ") does not split into " + slices +
                   " slices (--micro-batches, or one per process): " + split_advice(rows, k, processes, resize));
}

std::unique_ptr<layers::Transformer> load_model(const Checkpoint& checkpoint, const std::string& source) {
  core::Generator init(0);  // every weight is then overwritten
  auto model = std::make_unique<layers::Transformer>(checkpoint.model, init);
  load_weights(*model, checkpoint.file, source);
  return model;
}

}  // namespace headlab::train
