// Optimizer state export and import: a run resumed from exported state
// continues bit for bit as the uninterrupted run, and a state that does not
// fit is rejected with a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/safetensors.h"
#include "optim/adam.h"
#include "optim/factory.h"
#include "optim/sgd.h"
#include "optim_test_util.h"

namespace headlab::optim {
namespace {

using testing::param;
using testing::set_grad;
using testing::values;

using Factory = std::function<std::unique_ptr<Optimizer>(const NamedParameters&)>;

// Two parameters; "w.bias" gets no gradient at odd steps, so its own step
// count falls behind the optimizer's.
struct Model {
  NamedParameters params{{"w.weight", param({0.5, -1.0, 2.0, 0.25})}, {"w.bias", param({0.1, -0.3})}};

  void set_grads(int step) const {
    const std::vector<double> w = values(params[0].second);
    std::vector<double> g(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) g[i] = 2.0 * w[i] - 0.3 * static_cast<double>(i) + 0.01 * step;
    set_grad(params[0].second, g);
    if (step % 2 == 0) {
      const std::vector<double> b = values(params[1].second);
      set_grad(params[1].second, {b[0] - 1.0, 3.0 * b[1]});
    } else {
      params[1].second.zero_grad();
    }
  }
  void copy_values_from(const Model& other) const {
    for (std::size_t k = 0; k < params.size(); ++k)
      params[k].second.mutable_value().copy_(other.params[k].second.value());
  }
};

void train(Optimizer& opt, const Model& model, int from, int to) {
  for (int step = from; step < to; ++step) {
    model.set_grads(step);
    opt.step();
  }
}

// The state goes through safetensors bytes, as in a checkpoint.
OptimizerState through_file(const OptimizerState& state) {
  const core::SafetensorsFile file = core::parse_safetensors(core::to_safetensors_bytes(state.tensors, state.metadata));
  return {file.tensors, file.metadata};
}

void expect_resume_is_exact(const Factory& make) {
  const Model uninterrupted;
  auto opt = make(uninterrupted.params);
  train(*opt, uninterrupted, 0, 3);
  const OptimizerState saved = through_file(opt->export_state());
  const Model resumed;
  resumed.copy_values_from(uninterrupted);
  train(*opt, uninterrupted, 3, 6);

  auto fresh = make(resumed.params);
  fresh->import_state(saved);
  EXPECT_EQ(fresh->step_count(), 3);
  train(*fresh, resumed, 3, 6);
  for (std::size_t k = 0; k < resumed.params.size(); ++k) {
    EXPECT_EQ(values(resumed.params[k].second), values(uninterrupted.params[k].second)) << resumed.params[k].first;
    EXPECT_EQ(fresh->param_step_count(resumed.params[k].first), opt->param_step_count(resumed.params[k].first));
  }
  EXPECT_EQ(fresh->step_count(), 6);
}

TEST(OptimizerState, AdamResumesBitForBit) {
  expect_resume_is_exact(
      [](const NamedParameters& p) { return std::make_unique<Adam>(p, AdamOptions(0.05).weight_decay(0.01)); });
}

TEST(OptimizerState, AdamWResumesBitForBit) {
  expect_resume_is_exact([](const NamedParameters& p) { return std::make_unique<AdamW>(p, AdamWOptions(0.05)); });
}

TEST(OptimizerState, SGDWithNesterovResumesBitForBit) {
  expect_resume_is_exact(
      [](const NamedParameters& p) { return std::make_unique<SGD>(p, SGDOptions(0.05).momentum(0.9).nesterov(true)); });
}

TEST(OptimizerState, PlainSGDResumesBitForBit) {
  expect_resume_is_exact([](const NamedParameters& p) { return std::make_unique<SGD>(p, SGDOptions(0.05)); });
}

TEST(OptimizerState, ExportNamesTensorsByParameterAndSlot) {
  const Model model;
  Adam adam(model.params, AdamOptions(0.01));
  train(adam, model, 0, 1);
  adam.set_lr(0.125);
  const OptimizerState state = adam.export_state();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : state.tensors) names.push_back(name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"optimizer.w.bias.exp_avg", "optimizer.w.bias.exp_avg_sq",
                                             "optimizer.w.weight.exp_avg", "optimizer.w.weight.exp_avg_sq"}));
  EXPECT_EQ(state.metadata.at("optimizer.kind"), "adam");
  EXPECT_EQ(state.metadata.at("optimizer.step"), "1");
  EXPECT_EQ(state.metadata.at("optimizer.w.weight.step"), "1");
  EXPECT_EQ(std::stod(state.metadata.at("optimizer.lr")), 0.125);
}

TEST(OptimizerState, ExportIsASnapshot) {
  const Model model;
  Adam adam(model.params);
  train(adam, model, 0, 1);
  const OptimizerState state = adam.export_state();
  const std::vector<double> before = state.tensors[0].second.to_vector();
  train(adam, model, 1, 2);
  EXPECT_EQ(state.tensors[0].second.to_vector(), before);
}

TEST(OptimizerState, ImportRestoresLearningRateAndIgnoresOtherCheckpointEntries) {
  const Model model;
  Adam adam(model.params, AdamOptions(0.01));
  train(adam, model, 0, 2);
  adam.set_lr(0.25);
  OptimizerState state = adam.export_state();
  state.tensors.emplace_back("w.weight", model.params[0].second.value());  // the model's own entries
  state.metadata["step"] = "2";
  Adam fresh(model.params, AdamOptions(0.01));
  fresh.import_state(state);
  EXPECT_EQ(fresh.lr(), 0.25);
  EXPECT_EQ(fresh.step_count(), 2);
}

std::string import_error(Optimizer& opt, const OptimizerState& state) {
  try {
    opt.import_state(state);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

OptimizerState adam_state_after_two_steps(const Model& model) {
  Adam adam(model.params, AdamOptions(0.01));
  train(adam, model, 0, 2);
  return adam.export_state();
}

void expect_untouched(const Optimizer& opt) {
  EXPECT_EQ(opt.step_count(), 0);
  EXPECT_EQ(opt.param_step_count("w.weight"), 0);
}

TEST(OptimizerState, ImportRejectsStateOfAnotherOptimizerKind) {
  const Model model;
  AdamW adamw(model.params);
  const std::string what = import_error(adamw, adam_state_after_two_steps(model));
  EXPECT_NE(what.find("'adam'"), std::string::npos) << what;
  EXPECT_NE(what.find("'adamw'"), std::string::npos) << what;
  expect_untouched(adamw);
}

TEST(OptimizerState, ImportRejectsMissingTensor) {
  const Model model;
  OptimizerState state = adam_state_after_two_steps(model);
  std::erase_if(state.tensors, [](const auto& t) { return t.first == "optimizer.w.weight.exp_avg_sq"; });
  Adam adam(model.params);
  const std::string what = import_error(adam, state);
  EXPECT_NE(what.find("'optimizer.w.weight.exp_avg_sq' is missing"), std::string::npos) << what;
  expect_untouched(adam);
}

// A mean of squares is never negative: such a state is a damaged file,
// refused at load rather than met later as a NaN "divergence" (issue 29.16).
TEST(OptimizerState, ImportRejectsANegativeSecondMoment) {
  const Model model;
  for (const bool adamw : {false, true}) {
    OptimizerState state;
    if (adamw) {
      AdamW writer(model.params);
      train(writer, model, 0, 2);
      state = writer.export_state();
    } else {
      state = adam_state_after_two_steps(model);
    }
    for (auto& [name, tensor] : state.tensors)
      if (name == "optimizer.w.weight.exp_avg_sq") tensor.set({2}, -0.5);
    std::unique_ptr<Optimizer> opt = adamw ? std::unique_ptr<Optimizer>(std::make_unique<AdamW>(model.params))
                                           : std::make_unique<Adam>(model.params);
    const std::string what = import_error(*opt, state);
    EXPECT_NE(what.find("'optimizer.w.weight.exp_avg_sq' holds -0.5 at element 2"), std::string::npos) << what;
    expect_untouched(*opt);
  }
}

TEST(OptimizerState, ImportRejectsTensorOfWrongShape) {
  const Model model;
  OptimizerState state = adam_state_after_two_steps(model);
  for (auto& [name, tensor] : state.tensors) {
    if (name == "optimizer.w.bias.exp_avg") tensor = core::Tensor::zeros({3}, core::DType::f64);
  }
  Adam adam(model.params);
  const std::string what = import_error(adam, state);
  EXPECT_NE(what.find("'optimizer.w.bias.exp_avg'"), std::string::npos) << what;
  EXPECT_NE(what.find("[3]"), std::string::npos) << what;
  EXPECT_NE(what.find("[2]"), std::string::npos) << what;
  expect_untouched(adam);
}

TEST(OptimizerState, ImportRejectsTensorOfWrongDtype) {
  const Model model;
  OptimizerState state = adam_state_after_two_steps(model);
  for (auto& [name, tensor] : state.tensors) {
    if (name == "optimizer.w.bias.exp_avg") tensor = tensor.to(core::DType::f32);
  }
  Adam adam(model.params);
  EXPECT_NE(import_error(adam, state).find("f32"), std::string::npos);
  expect_untouched(adam);
}

TEST(OptimizerState, ImportRejectsStateOfOtherParameters) {
  const Model model;
  const OptimizerState state = adam_state_after_two_steps(model);
  const NamedParameters other{{"w.weight", param({0.0, 0.0, 0.0, 0.0})}, {"v.bias", param({0.0, 0.0})}};
  Adam adam(other);
  const std::string what = import_error(adam, state);
  EXPECT_NE(what.find("v.bias"), std::string::npos) << what;
  EXPECT_EQ(adam.step_count(), 0);
}

TEST(OptimizerState, ImportRejectsStateWithExtraParameters) {
  const Model model;
  const OptimizerState state = adam_state_after_two_steps(model);
  Adam adam(NamedParameters{model.params[0]});
  const std::string what = import_error(adam, state);
  EXPECT_NE(what.find("optimizer.w.bias.exp_avg"), std::string::npos) << what;
  EXPECT_EQ(adam.step_count(), 0);
}

TEST(OptimizerState, ImportRejectsStateWithoutOptimizerMetadata) {
  const Model model;
  Adam adam(model.params);
  const std::string what = import_error(adam, OptimizerState{});
  EXPECT_NE(what.find("optimizer.kind"), std::string::npos) << what;
}

TEST(OptimizerState, MomentumlessSGDStateDoesNotFitSGDWithMomentum) {
  const Model model;
  SGD plain(model.params, SGDOptions(0.1));
  train(plain, model, 0, 2);
  SGD with_momentum(model.params, SGDOptions(0.1).momentum(0.9));
  const std::string what = import_error(with_momentum, plain.export_state());
  EXPECT_NE(what.find("momentum_buffer"), std::string::npos) << what;
}

TEST(MakeOptimizer, BuildsEachKindByNameAndRejectsUnknownNames) {
  const Model model;
  const std::vector<ParamGroup> groups{ParamGroup{.params = model.params, .weight_decay = {}, .lr_scale = 1.0}};
  EXPECT_EQ(make_optimizer("sgd", groups, 0.1)->kind(), "sgd");
  EXPECT_EQ(make_optimizer("adam", groups, 0.1)->kind(), "adam");
  const auto adamw = make_optimizer("adamw", groups, 0.1);
  EXPECT_EQ(adamw->kind(), "adamw");
  EXPECT_EQ(adamw->lr(), 0.1);
  EXPECT_EQ(adamw->param_groups()[0].weight_decay.value(), 0.01);
  try {
    make_optimizer("adagrad", groups, 0.1);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sgd, adam, adamw"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace headlab::optim
