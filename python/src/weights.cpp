// Model.with_params: a new Model whose parameters are this one's with some
// replaced by the caller's arrays, each checked (name, dtype, shape,
// finiteness) and copied, so that no array of the caller's shares memory
// with the new weights and the model it came from is left as it was.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "arrays.h"
#include "core/nearest_name.h"
#include "core/shortest.h"
#include "model.h"

namespace headlab::python {

namespace {

// "[2, 5]": the element at flat index `flat` of an array of `shape`.
std::string index_text(int64_t flat, const core::Shape& shape) { return shape_text(core::unravel_index(flat, shape)); }

// A KeyError naming the nearest parameter names; a TransformerLens name
// (W_O, b_Q, W_E ...) is told where its values live here.
[[noreturn]] void unknown_name(const std::string& name, const std::vector<std::string>& names) {
  std::string near;
  for (const std::string& n : core::nearest_names(name, names, 3)) near += (near.empty() ? "" : ", ") + n;
  std::string what = "with_params: the model has no parameter \"" + name + "\" (nearest: " + near +
                     "; model.params lists them all)";
  const std::string last = name.substr(name.rfind('.') + 1);
  if (last.starts_with("W_") || last.starts_with("b_"))
    what += ". TransformerLens's names go through model.with_tl_params({\"W_O\": w, ...}) (full stacked arrays, "
            "as model.W_O gives them). headlab's parameters have the checkpoint's names and PyTorch layouts: "
            "TransformerLens's W_Q[h], "
            "W_K[h], W_V[h] are rows h*d_k..(h+1)*d_k of attn.q/k/v.weight, transposed; W_O[h] is columns "
            "h*d_k..(h+1)*d_k of attn.o.weight, transposed; W_E is tok_emb.weight, W_pos pos_emb.weight, "
            "W_U head.weight transposed (docs/python.md)";
  raise(PyExc_KeyError, what);
}

// `array` as a Tensor of the model's dtype and `like`'s shape, or the error
// that names the parameter and the fix. Float arrays only: an integer or a
// boolean array of weights is more likely a mistake than a choice.
core::Tensor checked_value(const std::string& name, const py::handle& value, const core::Tensor& like) {
  if (!py::isinstance<py::array>(value))
    raise(PyExc_TypeError, "with_params: \"" + name + "\" must be a numpy array (or a torch tensor), got " +
                               std::string(py::str(py::type::of(value).attr("__name__"))));
  // A masked array's mask says which values not to use, and a parameter has
  // no such place: what those entries hold is the caller's choice to make.
  if (py::isinstance(value, py::module_::import("numpy.ma").attr("MaskedArray")))
    raise(PyExc_TypeError, "with_params: \"" + name + "\" is a numpy masked array, whose mask a parameter cannot "
                           "keep: pass .filled(x) to give its masked entries the value x, or .data to take them as "
                           "they are");
  const auto array = py::reinterpret_borrow<py::array>(value);
  const std::string dtype = py::str(array.dtype());
  if (array.dtype().kind() != 'f')
    raise(PyExc_TypeError, "with_params: \"" + name + "\" has dtype " + dtype +
                               "; a parameter takes float32 or float64 values (convert with .astype(np.float32))");
  // float16, float32 and float64 convert to double exactly; a wider float
  // (longdouble) would be rounded, silently.
  if (array.dtype().itemsize() > 8)
    raise(PyExc_TypeError, "with_params: \"" + name + "\" has dtype " + dtype +
                               ", wider than float64, whose values would be rounded; a parameter takes float16, "
                               "float32 or float64 values (convert with .astype(np.float64))");
  const std::vector<int64_t> got(array.shape(), array.shape() + array.ndim());
  if (got != like.shape())
    raise(PyExc_ValueError, "with_params: \"" + name + "\" has shape " + shape_text(got) + ", the model's is " +
                                shape_text(like.shape()) + " (model.params[\"" + name + "\"].shape)");
  // Then to the model's dtype, rounding to nearest.
  const auto src = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(array);
  const double* p = src.data();
  const int64_t n = static_cast<int64_t>(src.size());
  core::Tensor out = core::Tensor::empty(like.shape(), like.dtype());
  const bool f32 = like.dtype() == core::DType::f32;
  for (int64_t i = 0; i < n; ++i) {
    const double v = f32 ? static_cast<double>(static_cast<float>(p[i])) : p[i];
    if (std::isfinite(v)) continue;
    raise(PyExc_ValueError,
          "with_params: \"" + name + "\" holds " +
              (std::isfinite(p[i]) ? core::shortest(p[i]) + ", beyond float32's range (the model computes in float32),"
               : std::isnan(p[i])  ? std::string("NaN")
                                   : std::string(p[i] > 0 ? "+inf" : "-inf")) +
              " at " + index_text(i, like.shape()) + "; a parameter must be finite");
  }
  if (f32)
    std::transform(p, p + n, out.data<float>(), [](double v) { return static_cast<float>(v); });
  else
    std::copy(p, p + n, out.data<double>());
  return out;
}

bool same_bits(const core::Tensor& a, const core::Tensor& b) {
  const core::Tensor c = a.contiguous(), d = b.contiguous();
  return std::memcmp(c.raw_data(), d.raw_data(), static_cast<std::size_t>(c.numel()) * core::dtype_size(c.dtype())) == 0;
}

Model with_params(const Model& model, const py::dict& values) {
  const auto params = model.transformer->named_parameters();
  std::vector<std::string> names;
  for (const auto& [name, p] : params) names.push_back(name);
  // Every value checked before anything is built.
  std::map<std::string, core::Tensor> given;
  for (const auto& [key, value] : values) {
    if (!py::isinstance<py::str>(key))
      raise(PyExc_TypeError, "with_params: parameter names are strings, got " + std::string(py::repr(key)));
    const std::string name = key.cast<std::string>();
    const auto it = std::find(names.begin(), names.end(), name);
    if (it == names.end()) unknown_name(name, names);
    given[name] = checked_value(name, value, params[static_cast<std::size_t>(it - names.begin())].second.value());
  }
  Model out = model;
  {
    py::gil_scoped_release release;
    core::Generator unused(0);  // every weight is then overwritten
    auto transformer = std::make_shared<layers::Transformer>(model.transformer->spec(), unused, model.transformer->dtype());
    // Built from one spec, all three list their parameters in the same order.
    const auto fresh = transformer->named_parameters();
    const auto source = model.source->weights->named_parameters();
    std::vector<std::string> differ;
    for (std::size_t i = 0; i < fresh.size(); ++i) {
      const auto& [name, p] = fresh[i];
      const core::Tensor& old = params[i].second.value();
      const auto it = given.find(name);
      p.mutable_value().copy_(it == given.end() ? old : it->second);
      if (it != given.end() && !same_bits(source[i].second.value(), it->second)) differ.push_back(name);
    }
    // What differs from the source: those replaced before in their order (less
    // any given back its source value), then the new ones.
    const auto differs = [&](const std::string& name) {
      return std::find(differ.begin(), differ.end(), name) != differ.end() || !given.contains(name);
    };
    std::erase_if(out.replaced, [&](const std::string& name) { return !differs(name); });
    for (const std::string& name : differ)
      if (std::find(out.replaced.begin(), out.replaced.end(), name) == out.replaced.end()) out.replaced.push_back(name);
    out.transformer = std::move(transformer);
  }
  out.edited = true;
  return out;
}

}  // namespace

nlohmann::json edited_record(const Model& model) {
  const Source& s = *model.source;
  nlohmann::json source{{"path", s.path}, {"size", s.size}, {"hash", s.hash}, {"step", s.info.step}, {"task", s.info.task}};
  // A chain of edits keeps every link, as --init's record does.
  if (!s.info.edited.is_null()) source["edited"] = s.info.edited;
  return {{"by", "headlab Python (Model.with_params, Model.save)"}, {"source", source}, {"replaced", model.replaced}};
}

void bind_save(py::class_<Model>& model);

void bind_weights(py::class_<Model>& model) {
  model.def("with_params", &with_params, py::arg("values"))
      .def_property_readonly("edited", [](const Model& m) { return m.edited; })
      .def_property_readonly("edited_json", [](const Model& m) {
        // An edit in memory: what save would record; a checkpoint an edit
        // was saved to: its record; else none.
        return m.edited ? edited_record(m).dump() : m.source->info.edited.is_null() ? "" : m.source->info.edited.dump();
      });
  bind_save(model);
}

}  // namespace headlab::python
