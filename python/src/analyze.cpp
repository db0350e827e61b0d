// headlab._core.analyze: the C++ head analysis (analysis/analyze_model.h) of a
// model on the caller's sequences, returned as the JSON heads.json holds.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>

#include "analysis/analyze_model.h"
#include "analysis/heads_json.h"
#include "arrays.h"
#include "attend.h"
#include "interrupt.h"
#include "threads.h"
#include "model.h"
#include "train/analysis_chunk.h"

namespace headlab::python {

namespace py = pybind11;

namespace {

using OffsetArray = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;
// (name, definition, spec, offsets, keys): a pattern as headlab/_patterns.py passes it.
using PatternTuple = std::tuple<std::string, std::string, std::string, OffsetArray, IntArray>;

// The label rules' settings by heads.json's label_options keys (analysis::kLabelFlags), checked by the Python side.
using Labels = std::map<std::string, double>;

std::vector<PatternInput> pattern_inputs(const std::vector<PatternTuple>& patterns) {
  std::vector<PatternInput> out;
  for (const auto& [name, definition, spec, offsets, keys] : patterns)
    out.push_back({name, definition, spec, std::vector<int64_t>(offsets.data(), offsets.data() + offsets.size()),
                   std::vector<int32_t>(keys.data(), keys.data() + keys.size())});
  return out;
}

std::string analyze(const Model& model, const IntArray& tokens, const IntArray& targets,
                    const std::optional<IntArray>& lengths, const std::vector<PatternTuple>& patterns,
                    const std::vector<std::pair<std::string, std::string>>& roles, bool sources, const Labels& labels,
                    int64_t example, bool pruning, int64_t importance_examples,
                    const std::optional<IntArray>& corrupted, const std::string& corruption_text,
                    int64_t chunk_rows) {
  const Tokens t = tokens_from(tokens);
  const Tokens y = tokens_from(targets);
  if (y.batch != t.batch || y.seq_len != t.seq_len)
    throw std::invalid_argument("targets: expected shape " + shape_text({t.batch, t.seq_len}) + " (the tokens'), got " +
                                shape_text({y.batch, y.seq_len}));
  std::vector<int32_t> rows;  // the real lengths; empty: no row is padded
  if (lengths) {
    rows.assign(lengths->data(), lengths->data() + lengths->size());
    if (static_cast<int64_t>(rows.size()) != t.batch)
      throw std::invalid_argument("lengths: expected " + std::to_string(t.batch) + " (one per sequence), got " +
                                  std::to_string(rows.size()));
    for (std::size_t b = 0; b < rows.size(); ++b)
      if (rows[b] < 1 || rows[b] > t.seq_len)
        throw std::invalid_argument("lengths: " + std::to_string(rows[b]) + " for sequence " + std::to_string(b) +
                                    " is not in [1, " + std::to_string(t.seq_len) + "]");
  }
  const PatternBatch on{t.batch, t.seq_len, model.transformer->spec().causal, y.ids, rows};
  const std::vector<analysis::AttendPattern> attend = attend_patterns(pattern_inputs(patterns), on);
  const std::vector<analysis::ExpectedRole> expected = expected_roles(roles, attend);
  if (example < 0 || example >= t.batch)
    throw std::invalid_argument("example " + std::to_string(example) + " is not one of the " + std::to_string(t.batch) +
                                " sequences");
  if (chunk_rows < 0)
    throw std::invalid_argument("chunk_rows must be >= 1, or None for the CLI's default (got " +
                                std::to_string(chunk_rows) + ")");
  if (importance_examples < 1)
    throw std::invalid_argument("importance_examples must be >= 1 (got " + std::to_string(importance_examples) + ")");
  std::optional<Tokens> c;
  if (corrupted) {
    c = tokens_from(*corrupted);
    if (c->batch != t.batch || c->seq_len != t.seq_len)
      throw std::invalid_argument("corrupted: expected shape " + shape_text({t.batch, t.seq_len}) + " (the tokens'), got " +
                                  shape_text({c->batch, c->seq_len}));
  }
  const Interruptible interruptible;  // Ctrl-C stops the analysis between two forward passes
  const CallThreads threads(model);
  py::gil_scoped_release release;
  analysis::AnalysisOptions options;
  for (const analysis::LabelFlag& f : analysis::kLabelFlags)
    if (const auto v = labels.find(f.key); v != labels.end()) options.labels.*f.value = v->second;
  options.example = example;
  options.pruning = pruning;
  options.importance_examples = importance_examples;
  // As `headlab analyze` does: a chunk's activations, not the whole set's, are held at once.
  options.chunk_rows = chunk_rows > 0 ? chunk_rows : train::default_analysis_chunk(model.transformer->spec());
  if (c) {
    options.interventions = true;
    options.corruption.tokens = c->ids;
    options.corruption_text = corruption_text;
  }
  analysis::Examples examples{t.batch, t.seq_len, t.ids, y.ids};
  examples.lengths = rows;
  examples.attend = attend;
  examples.roles = expected;
  examples.sources = sources;
  const analysis::RunAnalysis run = analysis::analyze_model(*model.transformer, examples, options);
  nlohmann::json j;
  analysis::to_json(j, run);
  return j.dump();
}

}  // namespace

void bind_analyze(py::module_& m) {
  m.def("analyze", &analyze, py::arg("model"), py::arg("tokens"), py::arg("targets"), py::arg("lengths"),
        py::arg("patterns"), py::arg("roles"), py::arg("sources"), py::arg("labels"), py::arg("example"),
        py::arg("pruning"), py::arg("importance_examples"), py::arg("corrupted"), py::arg("corruption_text"),
        py::arg("chunk_rows"));
}

}  // namespace headlab::python
