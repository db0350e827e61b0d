#include "optim/factory.h"

#include <stdexcept>
#include <string>

#include "optim/adam.h"
#include "optim/sgd.h"

namespace headlab::optim {

std::unique_ptr<Optimizer> make_optimizer(std::string_view name, std::vector<ParamGroup> groups, double lr,
                                          const AdamSettings& adam) {
  if (name == "sgd") return std::make_unique<SGD>(std::move(groups), SGDOptions(lr));
  if (name == "adam")
    return std::make_unique<Adam>(std::move(groups), AdamOptions(lr).betas(adam.beta1, adam.beta2).eps(adam.eps));
  if (name == "adamw")
    return std::make_unique<AdamW>(std::move(groups), AdamWOptions(lr).betas(adam.beta1, adam.beta2).eps(adam.eps));
  throw std::invalid_argument("optim::make_optimizer: unknown optimizer '" + std::string(name) +
                              "' (valid: sgd, adam, adamw)");
}

}  // namespace headlab::optim
