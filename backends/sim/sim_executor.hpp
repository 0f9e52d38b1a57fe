// The simulator: runs a Program on the cost model in a deterministic discrete-event simulation (one
// SimRun per run) (docs/cost-model.md). Contention is resolved for GPU streams (FIFO per stream),
// links (flows sharing bandwidth by max-min fairness), CPU cores per node and the GIL per Python
// process.
#pragma once

#include "core/cost/collective_cost.hpp"
#include "core/program/executor.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::sim {

class SimExecutor : public core::Executor {
 public:
  explicit SimExecutor(const core::Scenario& scenario);
  std::string name() const override { return "sim"; }
  core::ExecutionResult run(const core::Program& program, const core::RunControl& control) override;

 private:
  const core::Scenario& scenario_;
  core::CommParams comm_;
};

}  // namespace csim::sim
