// An OptimizerState <-> an HDF5 group, for checkpoints. Layout under `group` (e.g. "/optimizer"):
//   <group>                      attributes kind ("adamw"), step (int64)
//   <group>/<param name>         a group per updated parameter, attribute step (int64)
//   <group>/<param name>/<slot>  one dataset per slot, e.g. /optimizer/blocks.0.attn.qkv.weight/exp_avg
// which mirrors PyTorch's optimizer state_dict ({"state": {i: {"step", "exp_avg", ...}}}) keyed by
// parameter name instead of position.
//
//   save_optimizer_state(writer, "optimizer", opt.state());
//   opt.load_state(load_optimizer_state(reader, "optimizer"));   // load_state checks names and shapes
#pragma once
#include <string>

#include "framework/io/hdf5_io.h"
#include "optim/optimizer.h"

namespace tf::optim {

void save_optimizer_state(H5Writer& out, const std::string& group, const OptimizerState& state);
OptimizerState load_optimizer_state(const H5Reader& in, const std::string& group);

}  // namespace tf::optim
