// Model.head_circuits: one head's QK and OV circuits over tokens and
// positions and its copying score, as the head analysis computes them
// (analysis/circuits.h: LayerNorm folded as centering and scale, biases and
// MLPs left out; docs/head-metrics.md, "Circuits from the weights"), so that
// a notebook reads the matrices behind heads.json's scores.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "analysis/circuit_weights.h"
#include "analysis/circuits.h"
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

}  // namespace

void bind_circuits(py::class_<Model>& model) {
  model.def("head_circuits", &head_circuits, py::arg("layer"), py::arg("head"));
}

}  // namespace headlab::python
