// FP8 training in the lowering (docs/fp8.md, "Kernels"): for every layer that runs in FP8
// (core/model/fp8_recipe.hpp, runs_in_fp8) the casts and amax reductions around its GEMM as
// elementwise kernels on the GEMM's stream, the GEMM itself in Dtype::kFp8, the FP8 weight copies
// and the scaling state allocated where the first cast writes them, and delayed scaling's amax
// history update once per step. The one layer loop (layer_loop.hpp) calls it around every layer
// kernel; with any precision but "fp8" it emits nothing and changes nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/program/program.hpp"
#include "core/scenario/scenario.hpp"

namespace csim::core {

class ProgramBuilder;
struct Lane;

class Fp8Lowering {
 public:
  explicit Fp8Lowering(const Scenario& s);

  // Whether layer `layer` (index into model.layers) runs its GEMM in FP8.
  bool fp8_layer(int layer) const;

  // Before layer `layer`'s forward (or recompute) kernel on `l`, for `batch` samples: the weight
  // cast (the step's first forward of the layer on this GPU; every forward for torchao), the amax
  // pass of current / NVFP4 scaling and the input cast. `params` and the per-sample bytes are
  // what this rank runs (sharded under tensor parallelism); `saved_act_bytes_per_sample` is the
  // layer's saved activation, already in FP8 bytes (apply_fp8_saved_activations). `label`:
  // "mb1 h.0.attn.qkv". Returns the deps the GEMM takes: `deps` itself when nothing was emitted,
  // else none (the first cast took them; stream order does the rest).
  std::vector<Dep> before_forward(ProgramBuilder& b, const Lane& l, int layer, std::int64_t params,
                                  double saved_act_bytes_per_sample, std::int64_t batch,
                                  const std::string& label, bool python, std::vector<Dep> deps);
  // Before layer `layer`'s backward kernel: the amax pass (current / NVFP4) and the cast of the
  // incoming gradient (the layer's output, output_bytes_per_sample in bf16), and torchao's
  // recast of the weight. Same deps convention.
  std::vector<Dep> before_backward(ProgramBuilder& b, const Lane& l, int layer, std::int64_t params,
                                   double output_bytes_per_sample, std::int64_t batch,
                                   const std::string& label, bool python, std::vector<Dep> deps);
  // The layer's GEMM runs in FP8: sets its dtype.
  void mark(ProgramBuilder& b, OpId gemm, int layer) const;
  // Delayed scaling, before the step's optimizer.step() on `l`: the amax history and scale
  // update of every FP8 GEMM this GPU ran (one multi-tensor kernel). Same deps convention.
  std::vector<Dep> before_optimizer(ProgramBuilder& b, const Lane& l, std::vector<Dep> deps);

 private:
  // The layer's GEMM input per sample in bf16 elements (torchao saves it), scaled like
  // `output_bytes_per_sample` (the caller's slice of the layer).
  double input_elems_per_sample(int layer, double output_bytes_per_sample) const;
  // A bf16 tensor of `elems` elements quantized to FP8: an amax pass first when the recipe scales
  // from the current tensor, then the cast(+transpose) writing the recipe's copies.
  void quantize(ProgramBuilder& b, const Lane& l, const std::string& label, const char* what,
                double elems, bool python, std::vector<Dep>& deps, Phase phase);
  OpId cast_op(ProgramBuilder& b, const Lane& l, const NameRef& name, double elems, Bytes bytes,
               bool python, std::vector<Dep>& deps, Phase phase);

  const Scenario& s_;
  std::vector<char> fp8_layer_;                   // per model layer
  std::map<std::pair<int, int>, int> cast_step_;  // (gpu, layer) -> step of its last weight cast
  std::map<int, std::int64_t> gemms_on_gpu_;      // gpu -> FP8 GEMMs that keep scaling state
};

}  // namespace csim::core
