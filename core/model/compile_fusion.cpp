// torch.compile's fusion pass (core/model/compile_fusion.hpp). Every rule and formula:
// docs/compile.md. Sources: Ansel et al. 2024, "PyTorch 2: Faster Machine Learning Through Dynamic
// Python Bytecode Transformation and Graph Compilation" (ASPLOS '24), section 5 (TorchInductor:
// pointwise and reduction nodes fused into Triton kernels; matmuls and convolutions left to extern
// kernels, cuBLAS / cuDNN, templates only under max-autotune) and section 4 (AOTAutograd's min-cut
// rematerialization partitioner); the PyTorch docs, "torch.compiler: Getting Started" (fusion turns
// 2 reads and 2 writes of a pointwise chain into 1 read and 1 write); torchtitan
// (torchtitan/models/llama3/infra/parallelize.py, apply_compile: torch.compile on each
// TransformerBlock, fullgraph=True), hence fusion never crosses a block.
#include "core/model/compile_fusion.hpp"

#include <algorithm>
#include <cmath>

namespace csim::core {

namespace {

// Backward traffic of one layer per sample (docs/program.md, "A training step").
double bwd_bytes(const LayerSpec& l) {
  return l.bwd_bytes_per_sample >= 0 ? l.bwd_bytes_per_sample : 2.0 * l.fwd_bytes_per_sample;
}

double selective_bytes(const LayerSpec& l) {
  return l.selective_activation_bytes_per_sample >= 0 ? l.selective_activation_bytes_per_sample
                                                      : l.activation_bytes_per_sample;
}

// "h.0.attn.softmax", "h.0.attn.dropout" -> "h.0.attn.softmax+dropout": the members' names after
// their common dotted prefix, joined by '+'.
std::string fused_name(const std::vector<LayerSpec>& members) {
  const std::string& first = members.front().name;
  std::size_t common = first.size();
  for (const LayerSpec& l : members) {
    std::size_t k = 0;
    while (k < common && k < l.name.size() && l.name[k] == first[k]) ++k;
    common = k;
  }
  const std::size_t dot = first.rfind('.', common == 0 ? 0 : common - 1);
  const std::size_t cut = common == 0 || dot == std::string::npos ? 0 : dot + 1;
  std::string out = first;
  for (std::size_t i = 1; i < members.size(); ++i) out += "+" + members[i].name.substr(cut);
  return out;
}

// A member's figures as one fused kernel: an eager framework's sequence keeps them beside its own
// (LayerSpec::fused_*, core/model/eager_kernels.hpp); the others are one kernel's already.
double fused_fwd(const LayerSpec& l) {
  return l.fused_fwd_bytes_per_sample >= 0 ? l.fused_fwd_bytes_per_sample : l.fwd_bytes_per_sample;
}
double fused_bwd(const LayerSpec& l) {
  return l.fused_bwd_bytes_per_sample >= 0 ? l.fused_bwd_bytes_per_sample : bwd_bytes(l);
}
double fused_act(const LayerSpec& l) {
  return l.fused_activation_bytes_per_sample >= 0 ? l.fused_activation_bytes_per_sample
                                                  : l.activation_bytes_per_sample;
}

bool same_bytes(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(1.0, a);
}

}  // namespace

bool compile_fusible(const LayerSpec& l) {
  return l.block >= 0 && l.kind == ComputeKind::kElementwise &&
         (l.tp_role == TpRole::kReplicated || l.tp_role == TpRole::kSharded);
}

bool compile_fuses(const LayerSpec& prev, const LayerSpec& next) {
  return compile_fusible(prev) && compile_fusible(next) && prev.block == next.block &&
         prev.tp_role == next.tp_role && prev.selective_recompute == next.selective_recompute;
}

LayerSpec fuse_layers(const std::vector<LayerSpec>& members, const LayerSpec* before) {
  LayerSpec f = members.front();
  if (members.size() > 1) f.name = fused_name(members);
  f.kernels = 1;  // one Triton kernel forward (docs/compile.md, "A fused group")
  f.fused_fwd_bytes_per_sample = f.fused_bwd_bytes_per_sample = -1;  // it is the fused kernel
  f.fused_activation_bytes_per_sample = -1;
  f.params = 0;
  f.buffer_elems = 0;
  f.fwd_flops_per_sample = 0;
  f.fwd_bytes_per_sample = 0;
  f.activation_bytes_per_sample = 0;
  f.extra_python_us = 0;
  double bwd = 0, selective = 0;
  bool any_selective = false;
  // The group's input is saved when the first member saves exactly the tensor `before` wrote.
  const bool input_saved = before != nullptr && fused_act(members.front()) > 0 &&
                           same_bytes(fused_act(members.front()), before->output_bytes_per_sample);
  for (std::size_t i = 0; i < members.size(); ++i) {
    const LayerSpec& l = members[i];
    // A Megatron recompute module covers the fused kernel only when it covers every member.
    f.recompute_modules &= l.recompute_modules;
    f.params += l.params;
    f.buffer_elems += l.buffer_elems;
    f.fwd_flops_per_sample += l.fwd_flops_per_sample;
    f.fwd_bytes_per_sample += fused_fwd(l);
    f.extra_python_us += l.extra_python_us;
    bwd += fused_bwd(l);
    any_selective = any_selective || l.selective_activation_bytes_per_sample >= 0;
    double act = fused_act(l), sel = selective_bytes(l);
    if (i > 0) {
      // The intermediate between members i-1 and i: the forward no longer reads it (and no
      // longer writes it unless a later layer reads it: the residual stream); the backward no
      // longer writes and reads its gradient likewise.
      const LayerSpec& p = members[i - 1];
      const double mid = p.output_bytes_per_sample;
      const double removed = p.output_reused ? mid : 2.0 * mid;
      f.fwd_bytes_per_sample -= removed;
      bwd -= removed;
      // Min-cut partitioner, simply: a member that saves its input, a private intermediate of
      // the chain, saves nothing when the group's input is saved: the fused backward recomputes
      // the chain from there (pointwise FLOPs only, not counted).
      if (input_saved && !p.output_reused && fused_act(l) > 0 && same_bytes(fused_act(l), mid)) {
        act = 0;
        sel = 0;
      }
    }
    f.activation_bytes_per_sample += act;
    selective += sel;
  }
  const LayerSpec& last = members.back();
  f.output_bytes_per_sample = last.output_bytes_per_sample;
  f.output_reused = last.output_reused;
  f.bwd_bytes_per_sample = std::max(0.0, bwd);
  f.fwd_bytes_per_sample = std::max(0.0, f.fwd_bytes_per_sample);
  f.selective_activation_bytes_per_sample = any_selective ? selective : -1;
  // Backward: one kernel for the input gradients, plus one reduction over the tokens for the
  // weight gradients when the group has parameters (a norm's weight and bias).
  f.bwd_kernels = f.params > 0 ? 2 : 1;
  return f;
}

ModelSpec compile_model(const ModelSpec& eager, CompileReport* report) {
  ModelSpec out = eager;
  out.layers.clear();
  CompileReport rep;
  const auto& in = eager.layers;
  rep.layers_before = static_cast<int>(in.size());
  double fwd_eager = 0, bwd_eager = 0, fwd_compiled = 0, bwd_compiled = 0;
  int kernels_eager = 0, kernels_compiled = 0;
  for (const LayerSpec& l : in) {
    fwd_eager += l.fwd_bytes_per_sample;
    bwd_eager += bwd_bytes(l);
    kernels_eager += l.kernels;
  }
  std::size_t i = 0;
  while (i < in.size()) {
    if (!compile_fusible(in[i])) {
      out.layers.push_back(in[i++]);
      continue;
    }
    std::size_t j = i + 1;
    while (j < in.size() && compile_fuses(in[j - 1], in[j])) ++j;
    const std::vector<LayerSpec> members(in.begin() + static_cast<std::ptrdiff_t>(i),
                                         in.begin() + static_cast<std::ptrdiff_t>(j));
    if (members.size() > 1 || members.front().kernels > 1) ++rep.fused_groups;
    out.layers.push_back(fuse_layers(members, i > 0 ? &in[i - 1] : nullptr));
    i = j;
  }
  for (const LayerSpec& l : out.layers) {
    fwd_compiled += l.fwd_bytes_per_sample;
    bwd_compiled += bwd_bytes(l);
    kernels_compiled += l.kernels;
  }
  rep.layers_after = static_cast<int>(out.layers.size());
  rep.fwd_bytes_saved_per_sample = fwd_eager - fwd_compiled;
  rep.bwd_bytes_saved_per_sample = bwd_eager - bwd_compiled;
  rep.fwd_kernels_saved = kernels_eager - kernels_compiled;
  if (report != nullptr) *report = rep;
  return out;
}

}  // namespace csim::core
