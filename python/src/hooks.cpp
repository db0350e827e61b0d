// Model.run and Model.gradients: a forward pass through the probe's named hook
// points (layers/hooks.h), whose Python hooks one PythonHooks calls in both.
// The cache shares the pass's own values, except a value that is a
// parameter's memory, which it copies; a Python hook is called with the GIL
// held and grad mode as the caller had it, on a writable copy, and what it
// returns replaces the activation downstream (a constant: the weights never
// change; in gradients() only its changed entries are: layers::patch) unless
// it has the activation's own bits.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "arrays.h"
#include "interrupt.h"
#include "threads.h"
#include "autograd/variable.h"
#include "layers/hook_set.h"
#include "layers/hooks.h"
#include "layers/padding_mask.h"
#include "model.h"

namespace headlab::python {

namespace {


// Thrown through the forward pass when a Python hook raised; the Python
// exception itself waits in PythonHooks::failure until the GIL is back.
struct HookFailed {};

class PythonHooks final : public layers::Hooks {
 public:
  // grad_enabled: the caller's grad mode, which the hooks run under (the pass
  // itself runs without a graph): model.gradients() in a hook is what it is outside.
  PythonHooks(const layers::Transformer& model, const std::vector<std::string>& kept,
              const std::vector<std::string>& hooked, py::object call, bool grad_enabled)
      : cache_names_(kept.begin(), kept.end()), hooked_(hooked.begin(), hooked.end()), call_(std::move(call)),
        grad_enabled_(grad_enabled) {
    for (const auto& [name, p] : model.named_parameters()) parameters_.insert(p.value().storage().get());
  }

  bool wants(const std::string& name) const override { return cache_names_.count(name) || hooked_.count(name); }
  // A Python hook is handed a copy: what it edits in place comes back as a
  // replacement, which is checked; the activation itself is never written.
  bool may_edit_in_place(const std::string&) const override { return false; }

  autograd::Variable visit(const std::string& name, const autograd::Variable& activation) override {
    autograd::Variable out = activation;
    if (hooked_.count(name)) {
      // In a pass that records a graph (gradients), the entries the hook
      // left pass the gradient on and those it changed are constants.
      const core::Tensor replacement = call_hook(name, activation);
      if (replacement.defined())
        out = autograd::grad_enabled() && activation.requires_grad() ? layers::patch(activation, replacement)
                                                                     : autograd::Variable(replacement);
    }
    // The cache holds what flows downstream, as TransformerLens's does; a
    // value of the pass, never written after it (shared, not copied), unless
    // it is a parameter's own memory (hook_pos_embed of one sequence is a view
    // of pos_emb.weight): numpy's read-only flag does not bind torch.from_numpy.
    if (cache_names_.count(name)) {
      const core::Tensor value = out.value().contiguous();
      cache[name] = parameters_.count(value.storage().get()) ? value.clone() : value;
    }
    return out;
  }

  std::map<std::string, core::Tensor> cache;
  std::exception_ptr failure;

 private:
  // What the hook at `name` hands back in place of the activation; undefined when it keeps it.
  core::Tensor call_hook(const std::string& name, const autograd::Variable& activation) {
    const core::Tensor& value = activation.value();
    py::gil_scoped_acquire gil;
    const autograd::GradModeGuard grad_mode(grad_enabled_);
    try {
      py::array given = to_numpy_copy(value);
      py::object result = call_(name, given);
      // Only a change replaces the activation: None, the array edited in place
      // or a copy with the same bits keeps it, so that the pass goes on as
      // without the hook even where a replacement takes another path
      // (hook_result, hook_scale: layers/hooks.h).
      const core::Tensor original = value.contiguous();
      const std::size_t bytes = static_cast<std::size_t>(original.numel()) * core::dtype_size(original.dtype());
      if (result.is(given) && std::memcmp(given.data(), original.raw_data(), bytes) == 0) return {};
      if (!py::isinstance<py::array>(result))
        throw std::invalid_argument("the hook at " + name + " returned " + std::string(py::str(py::type::of(result).attr("__name__"))) +
                                    ", expected None or an array of shape " + shape_text(value.shape()));
      const core::Tensor replacement = tensor_from(result.cast<py::array>(), value.shape(), value.dtype(),
                                                   "the hook at " + name + " returned an array that does not fit");
      if (std::memcmp(replacement.raw_data(), original.raw_data(), bytes) == 0) return {};
      return replacement;
    } catch (...) {
      failure = std::current_exception();
      throw HookFailed{};
    }
  }

  std::set<std::string> cache_names_, hooked_;
  py::object call_;
  bool grad_enabled_;
  std::set<const core::Storage*> parameters_;
};

// (logits, cache): `cache` lists the hook points to keep, `hooked` those at
// which call(name, activation) runs.
py::tuple run(const Model& model, const IntArray& tokens, const std::vector<std::string>& cache,
              const std::vector<std::string>& hooked, py::object call, const std::optional<IntArray>& lengths) {
  const Tokens t = tokens_from(tokens);
  const core::Tensor mask = padding_mask_of(lengths, t);
  PythonHooks hooks(*model.transformer, cache, hooked, std::move(call), autograd::grad_enabled());
  core::Tensor logits;
  bool failed = false;
  {
    const Interruptible interruptible;  // Ctrl-C stops the pass between two blocks
    const CallThreads threads(model);
    py::gil_scoped_release release;
    autograd::NoGradGuard no_grad;
    layers::Probe probe;
    probe.hooks = &hooks;
    try {
      logits = model.transformer->forward(t.ids, t.batch, t.seq_len, &mask, &probe).value();
    } catch (const HookFailed&) {
      failed = true;
    }
  }
  if (failed) std::rethrow_exception(hooks.failure);
  py::dict out;
  for (const std::string& name : cache) {
    const auto it = hooks.cache.find(name);
    if (it == hooks.cache.end()) continue;
    // Read-only: the pass's own buffers, which entries may share with each other.
    py::array a = to_numpy(it->second);
    a.attr("setflags")(py::arg("write") = false);
    out[py::str(name)] = a;
  }
  return py::make_tuple(to_numpy(logits), out);
}

// name -> gradient at each of `names`: of the loss against `targets`, or,
// when `seed` is a callable, of the caller's metric, whose gradient at the
// logits seed(logits) returns (called once, with the GIL, on a copy). The pass
// runs `call` at the `hooked` points as run() does: the gradients are the
// hooked pass's, at what flows on from each point.
py::dict gradients(const Model& model, const IntArray& tokens, const std::optional<IntArray>& targets,
                   const std::vector<std::string>& names, const std::optional<IntArray>& lengths, py::object seed,
                   const std::vector<std::string>& hooked, py::object call) {
  const Tokens t = tokens_from(tokens);
  const core::Tensor mask = padding_mask_of(lengths, t);
  PythonHooks hooks(*model.transformer, {}, hooked, std::move(call), autograd::grad_enabled());
  layers::Hooks* caller = hooked.empty() ? nullptr : &hooks;
  std::map<std::string, core::Tensor> grads;
  std::exception_ptr failure;
  const auto seed_at = [&](const core::Tensor& logits) {
    py::gil_scoped_acquire gil;
    try {
      return tensor_from(seed(to_numpy_copy(logits)).cast<py::array>(), logits.shape(), logits.dtype(),
                         "the gradient at the logits");
    } catch (...) {
      failure = std::current_exception();
      throw HookFailed{};
    }
  };
  bool failed = false;
  {
    const Interruptible interruptible;
    const CallThreads threads(model);
    py::gil_scoped_release release;
    try {
      if (!seed.is_none()) {
        grads = layers::activation_gradients(*model.transformer, t.ids, t.batch, t.seq_len,
                                             layers::LogitsGradient(seed_at), names, &mask, caller);
      } else {
        const Tokens y = tokens_from(targets.value());
        grads = layers::activation_gradients(*model.transformer, t.ids, t.batch, t.seq_len, y.ids, names, &mask,
                                             nullptr, nullptr, caller);
      }
    } catch (const HookFailed&) {
      failed = true;
    }
  }
  if (failed) std::rethrow_exception(failure ? failure : hooks.failure);
  py::dict out;
  for (const auto& [name, grad] : grads) out[py::str(name)] = to_numpy(grad);
  return out;
}

}  // namespace

void bind_hooks(py::class_<Model>& model) {
  model
      .def("run", &run, py::arg("tokens"), py::arg("cache"), py::arg("hooked"), py::arg("call"),
           py::arg("lengths") = py::none())
      .def("gradients", &gradients, py::arg("tokens"), py::arg("targets"), py::arg("names"),
           py::arg("lengths") = py::none(), py::arg("seed") = py::none(),
           py::arg("hooked") = std::vector<std::string>(), py::arg("call") = py::none())
      .def("hook_names", [](const Model& m) { return layers::hook_names(m.transformer->spec()); })
      .def("check_hook_name", [](const Model& m, const std::string& name) {
        layers::check_hook_name(m.transformer->spec(), name);
      });
}

}  // namespace headlab::python
