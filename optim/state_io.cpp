// Optimizer state in HDF5; the layout is in state_io.h.
#include "optim/state_io.h"

namespace tf::optim {

void save_optimizer_state(H5Writer& out, const std::string& group, const OptimizerState& state) {
  out.write_attr(group, "kind", state.kind);
  out.write_attr(group, "step", state.step);
  for (const auto& [name, ps] : state.params) {
    const std::string param_group = group + "/" + name;
    out.write_attr(param_group, "step", ps.step);
    for (const auto& [slot, t] : ps.slots) out.write_tensor(param_group, slot, t);
  }
}

OptimizerState load_optimizer_state(const H5Reader& in, const std::string& group) {
  TF_CHECK_INPUT(in.has(group), "HDF5 file '", in.path(), "': no optimizer state at '", group, "'");
  OptimizerState state;
  state.kind = in.read_attr_string(group, "kind");
  state.step = in.read_attr_int(group, "step");
  for (const std::string& name : in.list(group)) {
    const std::string param_group = group + "/" + name;
    ParamState& ps = state.params[name];
    ps.step = in.read_attr_int(param_group, "step");
    for (const std::string& slot : in.list(param_group)) ps.slots[slot] = in.read_tensor(param_group, slot);
  }
  return state;
}

}  // namespace tf::optim
