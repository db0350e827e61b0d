// Model.head_circuits: one head's QK and OV circuits over tokens and
// positions and its copying score, as the head analysis computes them
// (analysis/circuits.h: LayerNorm folded as centering and scale, biases and
// MLPs left out; docs/head-metrics.md, "Circuits from the weights"), so that
// a notebook reads the matrices behind heads.json's scores; and every pair's
// Q, K and V composition scores (analysis/composition.h), heads.json's
// `circuits.composition` laid out as TransformerLens's all_composition_scores.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/circuit_weights.h"
#include "analysis/circuits.h"
#include "analysis/composition.h"
#include "arrays.h"
#include "model.h"

namespace headlab::python {

namespace {

py::dict head_circuits(const Model& model, int64_t layer, int64_t head) {
  const layers::ModelSpec& spec = model.transformer->spec();
  if (layer < 0 || layer >= spec.layers || head < 0 || head >= spec.heads)
    throw std::invalid_argument("head_circuits: head (" + std::to_string(layer) + ", " + std::to_string(head) +
                                ") is not in this model's " + std::to_string(spec.layers) + " layers x " +
                                std::to_string(spec.heads) + " heads");
  analysis::CircuitWeights w;
  core::Tensor qk, qk_pos, ov;
  std::optional<double> copying;
  {
    py::gil_scoped_release release;
    w = analysis::circuit_weights(*model.transformer);
    qk = analysis::qk_token_circuit(w, layer, head);
    qk_pos = analysis::qk_position_circuit(w, layer, head);
    ov = analysis::ov_circuit(w, layer, head);
    copying = analysis::ov_copying_score(w, layer, head);
  }
  py::dict out;
  out["qk"] = to_numpy(qk);
  out["qk_pos"] = to_numpy(qk_pos);
  out["ov"] = to_numpy(ov);
  out["copying"] = copying ? py::object(py::float_(*copying)) : py::object(py::none());
  out["layernorm_folded"] = w.layernorm_folded;
  out["mlp_ignored"] = w.mlp_ignored;
  return out;
}

// {"q", "k", "v"}: [L, h, L, h] float64, [writer layer, head, reader layer,
// head], 0 where the writer's layer is not before the reader's (as
// TransformerLens masks them); "baseline": the mean score of random matrices
// of these shapes (None with one layer); the approximations, as head_circuits.
py::dict composition(const Model& model) {
  const layers::ModelSpec& spec = model.transformer->spec();
  analysis::CircuitWeights w;
  std::vector<analysis::Composition> scores;
  std::optional<double> baseline;
  {
    py::gil_scoped_release release;
    w = analysis::circuit_weights(*model.transformer);
    scores = analysis::composition_scores(w);
    if (spec.layers > 1) baseline = analysis::composition_baseline(w.d_model, w.d_k);
  }
  const std::vector<py::ssize_t> shape = {spec.layers, spec.heads, spec.layers, spec.heads};
  py::array_t<double> q(shape), k(shape), v(shape);
  for (py::array_t<double>* a : {&q, &k, &v}) std::fill_n(a->mutable_data(), a->size(), 0.0);
  for (const analysis::Composition& c : scores) {
    const py::ssize_t at =
        ((c.writer_layer * spec.heads + c.writer_head) * spec.layers + c.reader_layer) * spec.heads + c.reader_head;
    q.mutable_data()[at] = c.q;
    k.mutable_data()[at] = c.k;
    v.mutable_data()[at] = c.v;
  }
  py::dict out;
  out["q"] = q;
  out["k"] = k;
  out["v"] = v;
  out["baseline"] = baseline ? py::object(py::float_(*baseline)) : py::object(py::none());
  out["layernorm_folded"] = w.layernorm_folded;
  out["mlp_ignored"] = w.mlp_ignored;
  return out;
}

}  // namespace

void bind_circuits(py::class_<Model>& model) {
  model.def("head_circuits", &head_circuits, py::arg("layer"), py::arg("head"));
  model.def("composition", &composition);
}

}  // namespace headlab::python
