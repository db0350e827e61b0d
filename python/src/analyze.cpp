// headlab._core.analyze: the C++ head analysis (analysis/analyze_model.h) of a
// model on the caller's sequences, returned as the JSON heads.json holds.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "analysis/analyze_model.h"
#include "analysis/heads_json.h"
#include "arrays.h"
#include "model.h"

namespace headlab::python {

namespace py = pybind11;

namespace {

using IntArray = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;

std::string analyze(const Model& model, const IntArray& tokens, const IntArray& targets, int64_t example, bool pruning,
                    int64_t importance_examples, const std::optional<IntArray>& corrupted, const std::string& corruption_text) {
  const Tokens t = tokens_from(tokens);
  const Tokens y = tokens_from(targets);
  if (y.batch != t.batch || y.seq_len != t.seq_len)
    throw std::invalid_argument("targets: expected shape " + shape_text({t.batch, t.seq_len}) + " (the tokens'), got " +
                                shape_text({y.batch, y.seq_len}));
  if (example < 0 || example >= t.batch)
    throw std::invalid_argument("example " + std::to_string(example) + " is not one of the " + std::to_string(t.batch) +
                                " sequences");
  if (importance_examples < 1)
    throw std::invalid_argument("importance_examples must be >= 1 (got " + std::to_string(importance_examples) + ")");
  std::optional<Tokens> c;
  if (corrupted) {
    c = tokens_from(*corrupted);
    if (c->batch != t.batch || c->seq_len != t.seq_len)
      throw std::invalid_argument("corrupted: expected shape " + shape_text({t.batch, t.seq_len}) + " (the tokens'), got " +
                                  shape_text({c->batch, c->seq_len}));
  }
  py::gil_scoped_release release;
  analysis::AnalysisOptions options;
  options.example = example;
  options.pruning = pruning;
  options.importance_examples = importance_examples;
  if (c) {
    options.interventions = true;
    options.corruption.tokens = c->ids;
    options.corruption_text = corruption_text;
  }
  const analysis::Examples examples{t.batch, t.seq_len, t.ids, y.ids};
  const analysis::RunAnalysis run = analysis::analyze_model(*model.transformer, examples, options);
  nlohmann::json j;
  analysis::to_json(j, run);
  return j.dump();
}

}  // namespace

void bind_analyze(py::module_& m) {
  m.def("analyze", &analyze, py::arg("model"), py::arg("tokens"), py::arg("targets"), py::arg("example"),
        py::arg("pruning"), py::arg("importance_examples"), py::arg("corrupted"), py::arg("corruption_text"));
}

}  // namespace headlab::python
