// The optimizer table (optim/factory.h): every name builds the optimizer it names, with the recipe's
// hyperparameters, and the state slots it declares for the memory plan are the slots it really keeps
// after a step.
#include "optim/factory.h"

#include <gtest/gtest.h>

#include "framework/error.h"
#include "optim/grads.h"

namespace tf::optim {
namespace {

TEST(OptimizerTable, EveryNameBuildsItsOptimizerWithTheDeclaredSlots) {
  const std::vector<std::string> names = optimizer_names();
  ASSERT_EQ(names, (std::vector<std::string>{"sgd", "adam", "adamw", "muon"}));
  for (const std::string& name : names)
    for (double momentum : {0.0, 0.9}) {
      OptimConfig c;
      c.name = name;
      c.momentum = momentum;
      c.lr = 0.25;
      const ParamRef w = testing::param("w", {1.0, -2.0, 3.0});
      const auto opt = make_optimizer({w}, c);
      EXPECT_STREQ(opt->kind(), name.c_str());
      EXPECT_EQ(opt->lr(), 0.25);
      testing::set_grad(w, {1.0, 1.0, 1.0});
      opt->step();
      EXPECT_NE(w.param.at(0), 1.0) << name << ": the step moved nothing";
      const OptimizerState s = opt->state();
      ASSERT_EQ(s.params.count("w"), 1u) << name;
      EXPECT_EQ(static_cast<int>(s.params.at("w").slots.size()), state_slots(c)) << name << " momentum " << momentum;
    }
  OptimConfig unknown;
  unknown.name = "lion";
  EXPECT_THROW(make_optimizer({}, unknown), Error);
}

}  // namespace
}  // namespace tf::optim
