// Scenario: the plain data a user describes in scenario.json (docs/scenario.md lists every key with
// its unit and default). Parsed and validated by scenario_parser; nothing here knows about JSON.
//
// Index: [SECTION] GPU, [SECTION] Cluster, [SECTION] Host, [SECTION] Model, [SECTION] Training,
//        [SECTION] Strategy, [SECTION] Scenario
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/scenario/transformer_config.hpp"
#include "core/units.hpp"

namespace csim::core {

// [SECTION] GPU ----------------------------------------------------------------------------------

// kFp8: the FP8 tensor-core GEMMs of precision "fp8" (E4M3 / E5M2 operands, bf16 output;
// docs/fp8.md).
enum class Dtype : std::uint8_t { kFp32, kTf32, kFp16, kBf16, kFp8 };
const char* to_string(Dtype d);
int dtype_bytes(Dtype d);

enum class ComputeKind : std::uint8_t { kGemm, kElementwise, kConv, kAttention };
const char* to_string(ComputeKind k);
inline constexpr int kNumComputeKinds = 4;

// Achieved fraction of peak as a function of the kernel's size (docs/cost-model.md, "Compute"):
//   efficiency(F) = max_efficiency * F / (F + half_flops)
struct EfficiencyCurve {
  double max_efficiency = 0.7;  // asymptotic fraction of dense peak for large kernels, (0, 1]
  double half_flops = 1e9;      // FLOPs at which half of max_efficiency is reached, >= 0
  std::string source;           // where the constants come from (datasheet, paper, calibration)
};

struct GpuSpec {
  std::string name;                  // catalog key, e.g. "A100-SXM4-80GB"
  Bytes memory_bytes = 0;            // device memory
  double peak_fp32_flops_per_s = 0;  // dense peak per dtype; 0 = the GPU lacks the dtype
  double peak_tf32_flops_per_s = 0;  //
  double peak_fp16_flops_per_s = 0;  // tensor-core dense (not 2:4 sparse)
  double peak_bf16_flops_per_s = 0;  //
  double peak_fp8_flops_per_s = 0;   // FP8 tensor-core dense; 0 = no FP8 (docs/fp8.md)
  double mem_bw_bytes_per_s = 0;     // HBM/GDDR bandwidth
  int sm_count = 0;                  //
  // SMs an NCCL collective occupies while it runs (one thread block per channel): compute kernels
  // running meanwhile get the rest, so they progress at (sm_count - nccl_sms) / sm_count of their
  // speed (docs/cost-model.md, "Resource sharing"). 0: no interference.
  int nccl_sms = 0;
  // Kernels share HBM bandwidth with each other and with the NCCL kernels and copies beside them
  // (docs/cost-model.md, "Resource sharing"); false: every kernel gets all of it, as alone.
  bool hbm_sharing = true;
  int compute_capability = 0;  // e.g. 80 for sm_80
  // Fraction of peak a GEMM thread block's main loop reaches (docs/cost-model.md, "GEMM shape");
  // 0 = the gemm curve's max_efficiency.
  double gemm_tile_efficiency = 0;
  // An FP8 grouped GEMM's (batch > 1: a mixture of experts' experts, one launch) tiles reach this
  // fraction of a single FP8 GEMM's tile efficiency (docs/cost-model.md, "GEMM shape"); 1 = the
  // same.
  double fp8_grouped_gemm_efficiency = 1;
  TimeNs kernel_overhead_ns = 0;                 // per-kernel device-side fixed cost
  EfficiencyCurve efficiency[kNumComputeKinds];  // by ComputeKind
  // FP8 GEMMs (kGemm ops of dtype kFp8; docs/fp8.md, "FP8 GEMM efficiency"): a curve of their own
  // because FP8 kernels reach a different share of their (2x larger) peak than bf16 ones.
  EfficiencyCurve fp8_gemm_efficiency;
  double mem_bw_efficiency = 0.85;  // achieved fraction of mem_bw for streaming kernels
  // Sustained compute clock under the cluster's power limit relative to the clock the peaks and
  // curves above stand for (the TDP): scales every kernel's compute term, not its memory term
  // (docs/cost-model.md, "Power limit"; cluster.gpu_power_limit_w). 1 = no cap.
  double compute_clock_factor = 1.0;
  std::string source;  // datasheet reference for the figures above

  double peak_flops_per_s(Dtype d) const;
};

// Memory the GPU has but training cannot use (docs/scenario.md, "cluster.reserved").
struct MemoryReserve {
  Bytes cuda_context_bytes = 0;  // CUDA context + kernels' module images
  Bytes nccl_buffers_bytes = 0;  // NCCL communicator buffers (only when the GPU communicates)
  Bytes workspace_bytes = 0;     // cuBLAS / cuDNN workspaces
};

// [SECTION] Cluster ------------------------------------------------------------------------------

enum class IntraNodeKind { kPcie, kNvlinkMesh, kNvswitch };
const char* to_string(IntraNodeKind k);

struct NvlinkPair {
  int a = 0, b = 0;  // local GPU indices
  int links = 1;     // bonded NVLink links between them
};

struct IntraNodeSpec {
  IntraNodeKind kind = IntraNodeKind::kPcie;
  int pcie_gen = 3;                    // 3, 4, 5
  int pcie_lanes = 16;                 // lanes per GPU
  double host_bridge_bytes_per_s = 0;  // shared root complex / inter-switch bandwidth per direction
                                       // (0 = derived: one x16 link of the same generation)
  std::vector<NvlinkPair> nvlink_pairs;    // kNvlinkMesh: which GPUs are joined
  double nvlink_bytes_per_s_per_link = 0;  // per direction per link (V100: 25 GB/s)
  double nvswitch_bytes_per_s = 0;         // kNvswitch: per GPU per direction
};

// The network between nodes (docs/cost-model.md, "Topology", "Fabric"). nodes_per_leaf 0: one
// non-blocking switch (every NIC reaches every other at line rate). Otherwise a two-level fat tree:
// leaf switches of nodes_per_leaf nodes (one per rail and node group when rail_optimized), their
// uplinks to the spine carrying (ports below x NIC rate) / oversubscription each way.
struct FabricSpec {
  int nodes_per_leaf = 0;
  double oversubscription = 1.0;  // down:up bandwidth ratio of a leaf (1 = non-blocking)
  bool rail_optimized = true;     // NIC k of every node on rail switch k (DGX SuperPOD); false:
                                  // all NICs of a node on one leaf
  bool sharp = false;  // the InfiniBand switches reduce in the network (SHARP): NCCL's CollNet
};

// A slow GPU (heterogeneity, docs/cost-model.md "Stragglers"): its kernels take `slowdown` times
// as long (thermal throttling, a bad HBM stack, a noisy neighbour).
struct Straggler {
  int gpu = 0;            // global GPU index
  double slowdown = 1.0;  // >= 1
};

// A link running below its line rate (a degraded NIC, a flapping NVLink): capacity x factor.
struct LinkDegradation {
  int node = 0;
  int nic = -1;         // this NIC of the node (both directions), or
  int gpu = -1;         // this GPU's (local index) NVSwitch / NVLink / PCIe ports
  double factor = 1.0;  // (0, 1]
};

// The inter-node stack NCCL's network transport runs on (docs/scenario.md, "cluster.nic"): it
// sets the NIC hop's latency and the fraction of the NIC's line rate NCCL sustains
// (core/hardware/nic_stack.hpp has the catalogue and its sources).
enum class NicStack { kInfiniband, kRoce, kGpudirectTcpx, kGpudirectTcpxo, kEfa };
const char* to_string(NicStack s);

struct NicSpec {
  NicStack stack = NicStack::kInfiniband;
  double latency_ns = 0;  // per NIC hop (alpha); 0 = the stack's catalogue latency
  double efficiency = 0;  // achieved fraction of nic_bytes_per_s, (0, 1]; 0 = the stack's
};

struct ClusterSpec {
  int nodes = 1;
  int gpus_per_node = 1;
  GpuSpec gpu;
  MemoryReserve reserve;
  IntraNodeSpec intra;
  int nics_per_node = 0;
  double nic_bytes_per_s = 0;  // per NIC per direction
  NicSpec nic;                 // stack, per-hop latency and line-rate fraction of the NICs
  // Board power cap of every GPU (cluster.gpu_power_limit_w), W; 0 = none (the datasheet TDP).
  // Its effect is gpu.compute_clock_factor.
  double gpu_power_limit_w = 0;
  // GPU peer-to-peer (CUDA P2P over NVLink / PCIe) between the GPUs of a node. false
  // (cluster.p2p, nccl.p2p_disable): NCCL's SHM transport and peer copies stage every hop through
  // host memory (docs/cost-model.md, "Host staging").
  bool p2p = true;
  FabricSpec fabric;
  std::vector<Straggler> stragglers;
  std::vector<LinkDegradation> degraded_links;

  bool homogeneous() const { return stragglers.empty() && degraded_links.empty(); }
  double slowdown_of(int gpu) const {
    double f = 1.0;
    for (const Straggler& s : stragglers) f *= s.gpu == gpu ? s.slowdown : 1.0;
    return f;
  }

  int world_gpus() const { return nodes * gpus_per_node; }
};

// [SECTION] Host ---------------------------------------------------------------------------------

struct HostSpec {
  int cpu_cores = 16;                     // per node; host threads beyond this queue for a core
  bool python = true;                     // false: a C++ training loop (no Python time at all)
  bool gil = true;                        // false: free-threaded Python (PEP 703)
  double python_us_per_op = 4.8;          // Python time per framework op, GIL held
  double dispatch_us_per_op = 2.0;        // ATen dispatch + cudaLaunchKernel, GIL released
  double launch_latency_us = 4.0;         // host enqueue -> earliest kernel start on an idle GPU
  double thread_start_us = 60.0;          // Python threading.Thread start + join (DataParallel)
  double host_memcpy_bytes_per_s = 10e9;  // pageable -> pinned staging copy on the host
};

// [SECTION] Model --------------------------------------------------------------------------------

// How a layer splits under Megatron tensor parallelism (docs/program.md, "Tensor parallel"):
//   kReplicated  every TP rank runs it in full (layer norms, residual adds; with sequence
//                parallelism each rank runs 1/t of the sequence instead)
//   kColumn      column-parallel GEMM (attn.qkv, mlp.fc): weight split by output columns, its input
//                is replicated (the "f" operator: identity forward, all-reduce backward before it)
//   kRow         row-parallel GEMM (attn.proj, mlp.proj): weight split by input rows, output
//   partial
//                sums (the "g" operator: all-reduce forward after it, identity backward)
//   kSharded     pointwise on a sharded tensor (attention core per head, GeLU): 1/t of the work
//   kVocabInput  vocabulary-parallel word embedding: rows split by vocabulary, partial outputs
//                all-reduced like a row-parallel GEMM
//   kVocabOutput vocabulary-parallel LM head: a column-parallel GEMM over the vocabulary
enum class TpRole { kReplicated, kColumn, kRow, kSharded, kVocabInput, kVocabOutput };
const char* to_string(TpRole r);

// A routed-expert layer's place in its mixture-of-experts block (core/model/moe_layers.hpp;
// docs/program.md, "Expert parallel"): under expert parallelism its parameters are split over the
// ep ranks and its gradients reduced over the expert-data-parallel ranks; the token dispatch runs
// before the first (experts.fc) and the combine after the last (experts.proj).
enum class ExpertRole : std::uint8_t { kNone, kFirst, kInner, kLast };

// The shape a fused attention kernel's efficiency depends on (docs/attention.md, "Efficiency"):
// set on the attn.core layer of flash2 / flash3 / cudnn; kernel kEager = not a fused attention
// kernel, and the layer's ComputeKind curve applies unchanged.
struct FusedAttentionShape {
  AttentionKernel kernel = AttentionKernel::kEager;  // which fused kernel runs the layer
  std::int64_t head_dim = 0;                         // d, q's and k's per head
  std::int64_t v_head_dim = 0;                       // v's per head (MLA: != d); 0 = d
  double keys_per_query = 0;  // keys each query attends on average (s, ~s/2 causal, ~w windowed)
  std::int64_t seq_len = 0;   // s (the causal diagonal tiles' share depends on it)
  bool causal = false;        // causal without a window: the kernel also runs the diagonal tiles
};

// A GEMM's shape (docs/cost-model.md, "GEMM shape"): `batch` products C[m x n] = A[m x k] B[k x n].
// m == 0: no shape (the kind's efficiency curve applies).
struct GemmShape {
  std::int64_t batch = 1;
  std::int64_t m = 0, n = 0, k = 0;
  bool empty() const { return m <= 0 || n <= 0 || k <= 0 || batch <= 0; }
};

// Which products of a linear layer an op runs (docs/cost-model.md, "GEMM shape"): the forward
// Y = X W (m x n, inner k); the backward's input gradient dX = dY W^T (m x k, inner n) and weight
// gradient dW = X^T dY (k x n, inner m); kBackward both, one after the other.
enum class GemmPass : std::uint8_t { kForward, kBackward, kDgrad, kWgrad };

struct LayerSpec {
  std::string name;  // e.g. "fc", "layer3.2.conv1", "h.5.attn"
  ComputeKind kind = ComputeKind::kGemm;
  int block = -1;                        // transformer block index (GPT builder); -1 outside blocks
  TpRole tp_role = TpRole::kReplicated;  // split under tensor parallelism (GPT builder sets it)
  std::int64_t params = 0;               // trainable parameter count
  // Of `params`, the elements of a second parameter tensor (a Linear's or a LayerNorm's bias, GPT's
  // position table beside the token table); 0: one tensor. DeepSpeed ZeRO-3 keeps, gathers and
  // reduce-scatters each tensor on its own (docs/program.md, "ZeRO-3 parameter fetch").
  std::int64_t second_tensor_params = 0;
  // Of `params`, those a token does not use: a mixture of experts' routed experts beyond its top_k
  // ((E - k) experts' weights; docs/transformer.md, "Mixture of experts"). 0 for dense layers.
  std::int64_t inactive_params = 0;
  ExpertRole expert_role = ExpertRole::kNone;  // routed experts: split over strategy.ep
  std::int64_t buffer_elems = 0;               // non-trainable buffers (BatchNorm running stats)
  double fwd_flops_per_sample = 0;             // forward FLOPs for one sample
  double fwd_bytes_per_sample =
      0;  // forward memory traffic (bytes) for one sample, excluding weights
  double activation_bytes_per_sample = 0;  // bytes saved for backward, one sample
  double selective_activation_bytes_per_sample =
      -1;                              // saved under selective recompute (the
                                       // attention core keeps Q, K, V only); < 0 = all of the above
  double output_bytes_per_sample = 0;  // the layer's output, one sample
  // Backward memory traffic for one sample, excluding weights; < 0 = twice the forward's
  // (docs/program.md, "A training step"). Pointwise layers set it: softmax's backward reads y and
  // dy and writes dx (3 tensors), not 2 x (read + write).
  double bwd_bytes_per_sample = -1;
  // Backward FLOPs for one sample; < 0 = twice the forward's (docs/program.md, "A training step").
  // A fused attention kernel that recomputes its scores sets it (docs/attention.md, "Backward").
  double bwd_flops_per_sample = -1;
  FusedAttentionShape fused_attention;  // a fused attention core's shape (its own efficiency)
  // Re-run by selective recompute before its backward (the attention core: scores, softmax,
  // dropout, attention x values; Korthikanti et al. 2022, section 4.2). Consecutive marked layers
  // are recomputed together, in forward order, before the backward of the last of them.
  bool selective_recompute = false;
  // The Megatron-Core recompute modules this layer belongs to (RecomputeModule bits; set by the
  // transformer builders, read under strategy.recompute_modules: core/model/recompute_modules.hpp).
  std::uint8_t recompute_modules = 0;
  int kernels = 1;             // kernel launches in forward (backward launches 2x)
  double extra_python_us = 0;  // extra Python in forward (e.g. the notes' print())
  // Kernel launches in backward; < 0 = 2 x kernels. Set by torch.compile's fusion
  // (core/model/compile_fusion.hpp: one Triton kernel per fused group).
  int bwd_kernels = -1;
  // The layer as one fused kernel (torch.compile, docs/compile.md): forward and backward traffic
  // and saved bytes when it reads its input and writes its output once. An eager framework's
  // kernel sequence moves and saves more (core/model/eager_kernels.hpp, docs/transformer.md, "Eager
  // kernel sequences"); < 0 = the same as the eager figures above.
  double fused_fwd_bytes_per_sample = -1;
  double fused_bwd_bytes_per_sample = -1;
  double fused_activation_bytes_per_sample = -1;
  // The output is read again by a layer other than the next one (the residual stream: a block's
  // residual adds). torch.compile's fusion must still write it (docs/compile.md).
  bool output_reused = false;
  // A linear layer's GEMM per sample (docs/cost-model.md, "GEMM shape"): m = tokens per sample,
  // n = output features, k = input features (unsharded); m == 0: no shape.
  GemmShape gemm;
};

// Backward kernel launches of a layer (framework ops for the host costs): its own count when set,
// else twice the forward's (docs/program.md, "A training step").
inline double backward_kernels(const LayerSpec& l) {
  return l.bwd_kernels >= 0 ? static_cast<double>(l.bwd_kernels) : 2.0 * l.kernels;
}

// A backward kernel's activation traffic for `samples` samples: the layer's own backward bytes
// when it states them (>= 0), else twice the forward's (docs/program.md, "A training step").
inline Bytes backward_traffic_bytes(double fwd_per_sample, double bwd_per_sample, double samples) {
  return bwd_per_sample >= 0 ? static_cast<Bytes>(std::llround(bwd_per_sample * samples))
                             : 2 * static_cast<Bytes>(std::llround(fwd_per_sample * samples));
}

// A backward kernel's FLOPs for `samples` samples: the layer's own backward FLOPs when it states
// them (>= 0), else twice the forward's (docs/program.md, "A training step").
inline double backward_flops(double fwd_per_sample, double bwd_per_sample, double samples) {
  return bwd_per_sample >= 0 ? bwd_per_sample * samples : 2.0 * fwd_per_sample * samples;
}

// Transformer shape kept by the GPT builder and by build_transformer
// (core/model/model_transformer.hpp) for the FLOPs formulas and the parallel checks
// (core/model/flops.hpp); layers == 0 for models that are not transformers.
struct TransformerShape {
  int layers = 0;               // l, transformer blocks
  std::int64_t hidden = 0;      // h
  int heads = 0;                // a
  std::int64_t seq_len = 0;     // s
  std::int64_t vocab = 0;       // V (build_transformer: the padded rows, what tp splits)
  std::int64_t ffn_hidden = 0;  // f (4h by default)
  int kv_heads = 0;             // key/value heads (build_transformer; 0 = heads)
  std::int64_t head_dim = 0;    // d (build_transformer; 0 = hidden / heads)
};

struct ModelSpec {
  std::string name;
  std::string source;                 // "layers", "gpt", "resnet50", "explicit"
  std::vector<LayerSpec> layers;      // in forward order
  double input_bytes_per_sample = 0;  // one input sample as loaded (fp32 unless said)
  bool python_hooks = false;          // backward hooks in Python: backward then needs the GIL
  TransformerShape transformer;       // set by the GPT builder and build_transformer
  // The general decoder block it was built from (model.transformer, model.hf_config); layers == 0
  // for every other model (model.gpt included). core/model/transformer_flops.hpp reads it.
  TransformerConfig transformer_config;
  // The loss's kernels and its memory traffic per byte of the model's output, forward and
  // backward together (docs/program.md, "A training step"): one read by default; PyTorch's
  // cross-entropy as torchtitan and Hugging Face run it (core/model/eager_kernels.hpp) sets its
  // own.
  int loss_kernels = 3;
  double loss_bytes_per_output_byte = 1;
  std::int64_t total_params() const;
  // Parameters one token uses: total_params less every layer's inactive_params (a mixture of
  // experts' unrouted experts); total_params for a dense model.
  std::int64_t active_params() const;
  std::int64_t total_buffer_elems() const;
};

// [SECTION] Training -----------------------------------------------------------------------------

// kFp8: bf16 mixed precision (as kBf16) whose transformer-block linear layers run FP8 GEMMs with
// a Transformer Engine / torchao recipe (TrainingSpec::fp8; docs/fp8.md).
enum class Precision { kFp32, kAmp, kBf16, kFp16, kFp8 };
const char* to_string(Precision p);

// Bytes per parameter by precision recipe (docs/scenario.md, "training.precision").
struct PrecisionBytes {
  int weights = 4;               // the model's parameters as stored
  int grads = 4;                 // .grad (or main grads)
  int master = 0;                // fp32 master copy kept by the optimizer
  Dtype compute = Dtype::kFp32;  // dtype the kernels run in
};
PrecisionBytes precision_bytes(Precision p, Dtype amp_dtype);

enum class OptimizerKind { kSgd, kAdam };
const char* to_string(OptimizerKind k);

struct DataLoaderSpec {
  int num_workers = 0;            // 0: the main thread loads batches itself (GIL held)
  bool pin_memory = false;        // pinned host buffers: async H2D at full PCIe rate
  double per_sample_load_us = 0;  // host time to load + decode + collate one sample
  int prefetch_factor = 2;        // batches in flight per worker
};

// FP8 scaling recipes (docs/fp8.md, "Recipes"): Transformer Engine's DelayedScaling,
// Float8CurrentScaling, Float8BlockScaling (1x128 activations / 128x128 weights, DeepSeek-V3),
// MXFP8BlockScaling and NVFP4BlockScaling, and torchao's Float8Linear with rowwise scaling.
enum class Fp8Recipe { kDelayed, kCurrent, kBlock, kMxfp8, kNvfp4, kRowwise, kTensorwise };
inline constexpr int kNumFp8Recipes = 7;

// training.fp8 (docs/scenario.md, "training.fp8"); read only when precision is "fp8".
struct Fp8Spec {
  Fp8Recipe recipe = Fp8Recipe::kDelayed;
  bool lm_head = false;         // the LM head's GEMM in FP8 too (default bf16)
  bool attention = false;       // the attention core (kAttention layers) in FP8 (default bf16)
  bool fp8_all_gather = false;  // FSDP2 all-gathers FP8 weights (1 B/param instead of 2)
  bool moe_dispatch = false;    // DeepEP dispatches FP8 tokens (DeepSeek-V3; docs/fp8.md)
  bool moe_act_input = false;   // the experts' SwiGLU input cached in FP8 (docs/fp8.md)
  int amax_history_len = 1024;  // delayed: amax history per tensor (TE's default)
};

// Whose kernels a transformer block runs (`training.framework`; core/model/eager_kernels.hpp,
// docs/transformer.md, "Eager kernel sequences"): the same model costs differently under
// torchtitan's composite RMSNorm and complex RoPE, Megatron with Transformer Engine's fused
// kernels, or Hugging Face's modules.
enum class Framework : std::uint8_t { kPlain, kTorchtitan, kMegatronTe, kHf };
const char* to_string(Framework f);

struct TrainingSpec {
  std::int64_t global_batch = 1;  // samples per optimizer step, all GPUs together
  std::int64_t dataset_size = 0;  // 0: unlimited; else batches follow an epoch (last partial)
  Precision precision = Precision::kFp32;
  Dtype amp_dtype = Dtype::kFp16;  // autocast dtype for precision "amp"
  Fp8Spec fp8;                     // precision "fp8" only
  OptimizerKind optimizer = OptimizerKind::kAdam;
  double sgd_momentum = 0.0;  // > 0 keeps a momentum buffer (4 bytes/param)
  int steps = 3;
  int gradient_accumulation = 1;  // micro-steps per optimizer step
  DataLoaderSpec loader;
  // Memory behaviour of the training script (docs/scenario.md, "training"; docs/memory.md).
  bool leak_loss_as_tensor = false;  // leaks.loss_as_tensor: total_loss += loss keeps each graph
  bool leak_keep_outputs = false;  // leaks.keep_outputs: a no-grad-less eval forward kept per step
  int empty_cache_every = 0;       // torch.cuda.empty_cache() every N steps (0: never)
  bool del_temporaries = true;     // false: output and input live until the step's end
  // torch.compile of every transformer block (docs/compile.md): pointwise chains fused by
  // core/model/compile_fusion.hpp when the model is built.
  bool compile = false;
  // training.framework; resolved by the parser from the strategy when not given
  // (core/model/eager_kernels.hpp, default_framework).
  Framework framework = Framework::kPlain;
  // training.fused_rmsnorm: RMSNorm as one Triton kernel under an eager framework (torchtitan's
  // norm_type "fused_rmsnorm"); core/eager_kernels.hpp.
  bool fused_rmsnorm = false;
  // training.pytorch_version "MAJOR.MINOR" as MAJOR * 100 + MINOR: which of PyTorch's optimizer
  // and clipping implementations the loop runs (core/lowering/optimizer_kernels.hpp;
  // docs/program.md, "Optimizer and clipping kernels").
  int pytorch_version = 205;
  // training.clip_grad_norm: torch.nn.utils.clip_grad_norm_(params, max_norm) before each
  // optimizer step; 0 = no clipping.
  double clip_grad_norm = 0;
  // allocator.expandable_segments: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, the caching
  // allocator's growing segments (docs/memory.md, "Expandable segments"; torchtitan's
  // run_train.sh sets it).
  bool expandable_segments = false;
};

// [SECTION] Strategy -----------------------------------------------------------------------------

enum class StrategyKind {
  kSingle,
  kDataParallel,
  kDdp,
  kModelParallel,
  kPipeline,
  kTensorParallel,
  k3d,
  kZero,
  kFsdp
};
const char* to_string(StrategyKind k);
// model_parallel, pipeline, tensor_parallel, 3d, zero, fsdp: the kinds configured by
// StrategySpec::parallel (dp, tp, pp, micro-batches, schedule, ZeRO stage, recompute).
bool is_parallel_kind(StrategyKind k);

enum class PipelineSchedule { kGpipe, k1f1b, kInterleaved, kDualPipeV };
const char* to_string(PipelineSchedule s);

// kSelectiveOp: torchtitan's per-op selective checkpointing (selective_ac_option "op": matmul
// outputs saved, the rest recomputed; docs/program.md, "Activation recompute").
enum class RecomputeMode { kNone, kSelective, kFull, kSelectiveOp };
const char* to_string(RecomputeMode m);

// Megatron-Core's --recompute-modules under --recompute-granularity selective
// (megatron/core/transformer/transformer_config.py, TransformerConfig.recompute_modules), one bit
// each; the default is core_attn alone (docs/program.md, "Activation recompute").
namespace recompute_module {
inline constexpr std::uint8_t kCoreAttn = 1u << 0;       // the attention core (Korthikanti 4.2)
inline constexpr std::uint8_t kMoeAct = 1u << 1;         // the routed experts' activation
inline constexpr std::uint8_t kLayernorm = 1u << 2;      // input_layernorm, pre_mlp_layernorm
inline constexpr std::uint8_t kMlaUpProj = 1u << 3;      // MLA up projections and RoPE
inline constexpr std::uint8_t kMlp = 1u << 4;            // a dense block's MLP
inline constexpr std::uint8_t kMoe = 1u << 5;            // a MoE block's whole MLP
inline constexpr std::uint8_t kSharedExperts = 1u << 6;  // a MoE block's shared experts
inline constexpr int kCount = 7;
// Megatron's names, by bit index ("core_attn", "moe_act", ...).
const char* name(int bit);
}  // namespace recompute_module

// FSDP2's reshard_after_forward per unit (torchtitan's fsdp_reshard_after_forward policy;
// docs/program.md, "FSDP2"): default = every block but the last, the root too, all false under PP.
enum class ReshardPolicy { kDefault, kAlways, kNever };
const char* to_string(ReshardPolicy r);

// FSDP2 (per-parameter sharding, fully_shard per block) and Megatron-FSDP, lowered by
// core/lowering/fsdp2.cpp (docs/program.md, "FSDP2"; parse_parallel_fsdp2.cpp).
struct Fsdp2Spec {
  bool enabled = false;   // strategy.fsdp_version 2, or megatron_fsdp
  bool megatron = false;  // strategy.megatron_fsdp: Megatron-FSDP mapped onto the same lowering
  ReshardPolicy reshard = ReshardPolicy::kDefault;
  int reduce_bytes = 4;  // reduce_dtype's element bytes: the reduce-scatter's (fp32: 4)
  int replicate = 1;     // HSDP: replicas; a shard is taken over dp / replicate ranks
  bool operator==(const Fsdp2Spec&) const = default;
};

// How DeepSpeed's stage 3 fetches parameters (docs/program.md, "ZeRO-3 parameter fetch"):
// kAsync is the PartitionedParameterCoordinator of DeepSpeed 0.6.0 on (PR #1453, 2022-01-20: a
// separate all-gather stream, at most 2 fetch events ahead); kSynchronous is stage3.py of 0.3.13
// to 0.5.10, whose every fetch blocks on torch.cuda.synchronize().
enum class Zero3Fetch { kAsync, kSynchronous };
const char* to_string(Zero3Fetch f);

// DeepSpeed ZeRO-3's parameter coordinator and gradient buckets (kind zero, zero_stage 3), with
// DeepSpeed's defaults (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig); lowered by
// core/lowering/zero3_fetch.cpp (docs/program.md, "ZeRO-3 parameter fetch"). Sizes in elements.
struct Zero3Spec {
  Zero3Fetch fetch = Zero3Fetch::kAsync;                  // zero3_fetch
  std::int64_t prefetch_bucket_numel = 50'000'000;        // stage3_prefetch_bucket_size 5e7
  std::int64_t max_live_numel = 1'000'000'000;            // stage3_max_live_parameters 1e9
  std::int64_t max_reuse_distance_numel = 1'000'000'000;  // stage3_max_reuse_distance 1e9
  std::int64_t persistence_threshold_numel = 100'000;     // stage3_param_persistence_threshold 1e5
  std::int64_t reduce_bucket_numel = 500'000'000;         // reduce_bucket_size 5e8
  bool overlap_comm = true;  // stage 3's default (DeepSpeedZeroConfig.overlap_comm_valid)
  bool operator==(const Zero3Spec&) const = default;
};

// FSDP1's (FullyShardedDataParallel) prefetch and rate limiter, PyTorch's defaults
// (torch/distributed/fsdp/fully_sharded_data_parallel.py); lowered by zero_fsdp.cpp
// (docs/program.md, "ZeRO and FSDP").
enum class BackwardPrefetch { kBackwardPre, kBackwardPost, kNone };
struct Fsdp1Spec {
  bool limit_all_gathers = true;  // at most 2 all-gathers ahead of the freed units (host waits)
  bool forward_prefetch = false;  // issue the next unit's all-gather before this unit's forward
  BackwardPrefetch backward_prefetch = BackwardPrefetch::kBackwardPre;
  bool operator==(const Fsdp1Spec&) const = default;
};

enum class FsdpSharding { kFullShard, kShardGradOp };
const char* to_string(FsdpSharding f);

// The named dimensions of the rank grid (core/lowering/parallel_plan.hpp, RankGrid;
// docs/program.md, "Ranks"): the dense layers' tp, cp, ep, dp, pp, and the expert layers' etp and
// edp of Megatron-Core's MoE Parallel Folding (etp x ep x edp covers the ranks of tp x cp x dp).
enum class ParallelDim : std::uint8_t { kTp, kCp, kEp, kDp, kPp, kEtp, kEdp };
inline constexpr int kNumParallelDims = 7;
const char* to_string(ParallelDim d);

// How context-parallel ranks exchange keys and values around the attention core (docs/program.md,
// "Context parallel"): Transformer Engine's cp_comm_type.
//   kP2p     ring attention: K/V blocks passed around the CP ring, each step's transfer overlapped
//            with the attention of the block in hand (AttnFuncWithCPAndKVP2P)
//   kAllGather  all-gather K and V before attention, reduce-scatter dK/dV (Llama 3, section 3.3.2)
//   kA2a     DeepSpeed-Ulysses: all-to-all from sequence- to head-sharding and back
//   kA2aP2p  Megatron's hierarchical CP: a2a inside groups of cp_a2a ranks, a ring across them
enum class CpComm : std::uint8_t { kP2p, kAllGather, kA2a, kA2aP2p };
const char* to_string(CpComm c);

// How an MoE block's tokens reach the expert-parallel ranks holding their experts and come back
// (docs/program.md, "MoE token dispatchers"; Megatron-Core's moe_token_dispatcher_type):
//   kAllToAll  NCCL all-to-all of each token's k routed copies (MoEAlltoAllTokenDispatcher)
//   kAllGather every rank all-gathers the group's tokens, reduce-scatters the expert outputs
//              (MoEAllGatherTokenDispatcher)
//   kDeepEp    DeepEP's normal kernels: one copy per destination GPU over NVLink inside a node,
//              one per destination node over RDMA then forwarded over NVLink; their kernels hold
//              deepep_sms SMs (DeepSeek-V3 report, section 3.2.2)
enum class MoeDispatcher : std::uint8_t { kAllToAll, kAllGather, kDeepEp };
const char* to_string(MoeDispatcher d);

// Whether the EP dispatch / combine run in line or beside the other micro-batch's compute
// (docs/program.md, "MoE all-to-all overlap"; strategy.moe_a2a_overlap):
//   kNone  in line on the compute stream (Megatron-Core's default)
//   k1f1b  Megatron-Core's combined 1F1B (--overlap-moe-expert-parallel-comm, 0.14+): in the
//          steady phase one micro-batch's forward and another's backward are merged layer by
//          layer, the all-to-alls of each on a comm stream beside the other's kernels
enum class MoeA2aOverlap : std::uint8_t { kNone, k1f1b };
const char* to_string(MoeA2aOverlap o);

// Model, pipeline, tensor, 3D, ZeRO and FSDP parallelism (docs/scenario.md, "strategy.parallel").
// The parser fills every field consistently for the strategy kind: dp * tp * pp = GPUs used.
struct ParallelSpec {
  int dp = 1;   // data-parallel replicas
  int tp = 1;   // tensor-parallel ranks (Megatron column/row GEMMs)
  int pp = 1;   // pipeline stages
  int cp = 1;   // context-parallel ranks: the sequence split into 2 cp chunks (docs/program.md)
  int ep = 1;   // expert-parallel ranks: the routed experts split over them (docs/program.md)
  int etp = 1;  // expert tensor-parallel ranks (MoE Parallel Folding; 1: not modelled beyond)
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  int deepep_sms = 20;  // SMs DeepEP's kernels hold (DeepEP's Buffer default, DeepSeek-V3's 20)
  MoeA2aOverlap moe_a2a_overlap = MoeA2aOverlap::kNone;
  CpComm cp_comm = CpComm::kP2p;
  int cp_a2a =
      1;  // a2a+p2p: the a2a groups' size (Megatron's hierarchical sizes [cp_a2a, cp / cp_a2a])
  // fastest-varying first (Megatron's RankGenerator: tp-cp-ep-dp-pp)
  std::vector<ParallelDim> rank_order{ParallelDim::kTp, ParallelDim::kCp, ParallelDim::kEp,
                                      ParallelDim::kDp, ParallelDim::kPp};
  // A dimension's size (edp: the expert-data-parallel ranks tp cp dp / (etp ep)).
  int size(ParallelDim d) const;
  // The ranks holding the same (dense) parameters, over which gradients are reduced and ZeRO /
  // FSDP shard: dp x cp (Megatron's data_parallel_group with context parallelism).
  int dp_cp() const { return dp * cp; }
  bool sequence_parallel = false;  // reduce-scatter / all-gather instead of TP all-reduces
  // Megatron's async TP all-reduce (--async-tensor-model-parallel-allreduce, on in Megatron): a
  // column-parallel layer's input-gradient all-reduce runs on its own stream while the weight-
  // gradient GEMM runs (docs/program.md, "TP communication overlap"); not with sequence
  // parallelism. The parser's default is false (docs/scenario.md); true for Programs built here.
  bool tp_comm_overlap = true;
  std::int64_t micro_batch_size = 1;  // samples per micro-batch per data-parallel replica
  std::int64_t micro_batches = 1;     // m = global_batch / (dp * micro_batch_size)
  PipelineSchedule schedule = PipelineSchedule::k1f1b;
  int virtual_stages = 1;  // v: model chunks per pipeline rank (interleaved; dualpipev: 2)
  int zero_stage = 0;      // 0..3: optimizer / + gradients / + parameters sharded over dp
  FsdpSharding fsdp = FsdpSharding::kFullShard;
  bool prefetch = true;             // ZeRO-3 / FSDP: all-gather the next unit during this one
  bool overlap_grad_reduce = true;  // reduce gradients while backward runs
  RecomputeMode recompute = RecomputeMode::kNone;
  int recompute_every = 1;  // full: checkpoint every k-th block (torchtitan "<k>")
  // selective: the recompute_module bits re-run (Megatron's default core_attn: Korthikanti 2022)
  std::uint8_t recompute_modules = recompute_module::kCoreAttn;
  int fsdp_version = 1;                // kind fsdp: 1 (FullyShardedDataParallel) or 2 (fully_shard)
  Fsdp2Spec fsdp2;                     // fsdp_version 2 or megatron_fsdp
  Zero3Spec zero3;                     // kind zero, zero_stage 3 (DeepSpeed's coordinator)
  Fsdp1Spec fsdp1;                     // kind fsdp, fsdp_version 1
  bool distributed_optimizer = false;  // Megatron's flag: zero_stage 1
  // Megatron-Core's --optimizer-cpu-offload --optimizer-offload-fraction F (HybridDeviceOptimizer):
  // the fraction of the rank's optimizer share whose fp32 master weights and Adam moments live on
  // the host and are updated there (core/lowering/optimizer_offload.hpp; docs/program.md,
  // "Optimizer offload"). 0: none (every Program as before).
  double optimizer_offload = 0;
  // Megatron-Core's cpu_offloading with cpu_offloading_num_layers K (TransformerEngine's
  // activation offload, get_cpu_offload_context): the saved activations of the first K
  // transformer blocks go to pinned host memory after their forward and come back before their
  // backward (core/lowering/activation_offload.hpp; docs/program.md, "Activation offload").
  // 0: none (every Program as before).
  int activation_offload = 0;
  std::vector<int> stage_first_layer;  // model_parallel: first layer index of each device's part
  // Transformer blocks per pipeline segment g, in model order (g = chunk * pp + stage; DualPipeV's
  // V: core/lowering/parallel_plan.hpp, pipeline_segment; core/model/pipeline_stages.hpp;
  // docs/scenario.md, "strategy: uneven pipeline stages"); empty = the even split.
  std::vector<int> segment_blocks;
  // Field by field (tune's duplicates: sweep/tune.cpp, core::strategy_as_lowered).
  bool operator==(const ParallelSpec&) const = default;
};

enum class DdpLauncher { kProcess, kThread };

struct DdpSpec {
  double bucket_cap_mb = 25.0;    // MiB, as torch's bucket_cap_mb
  double first_bucket_mb = 1.0;   // MiB (torch: dist._DEFAULT_FIRST_BUCKET_BYTES)
  bool overlap = true;            // all-reduce buckets while backward runs
  bool broadcast_buffers = true;  // broadcast module buffers from rank 0 before each forward
  bool gradient_as_bucket_view = false;
  DdpLauncher launcher = DdpLauncher::kProcess;
  bool operator==(const DdpSpec&) const = default;
};

struct StrategySpec {
  StrategyKind kind = StrategyKind::kSingle;
  std::vector<int>
      device_ids;  // global GPU indices; empty in the file = all GPUs (filled by the parser)
  int output_device = -1;  // data_parallel; -1 in the file = device_ids[0] (filled by the parser)
  DdpSpec ddp;
  ParallelSpec parallel;  // model_parallel, pipeline, tensor_parallel, 3d, zero, fsdp
  bool operator==(const StrategySpec&) const = default;
};

// [SECTION] NCCL ---------------------------------------------------------------------------------

// A collective's algorithm (Op::algo; kAuto: the cost model picks, as NCCL's tuner does).
// kCollnet: NCCL's CollNet (in-network reduction on SHARP InfiniBand switches). kNvlsTree: NCCL's
// NVLSTree (NVLS inside each node, a double binary tree across nodes; all-reduce). kPat: NCCL's
// PAT (all-gather, reduce-scatter with one GPU per node). docs/cost-model.md, "NVLSTree", "PAT".
enum class CollectiveAlgo : std::uint8_t {
  kAuto,
  kRing,
  kTree,
  kNvls,
  kHierarchical,
  kCollnet,
  kNvlsTree,
  kPat
};
inline constexpr int kNumCollectiveAlgos = 8;
// NCCL protocols (docs/cost-model.md, "Protocols"): LL (8-byte lines, 4 bytes of data), LL128
// (128-byte lines, 120 of data), Simple (bulk copies with a flag per chunk).
enum class NcclProto : std::uint8_t { kAuto, kLL, kLL128, kSimple };
inline constexpr int kNumNcclProtos = 4;
// The scenario's spelling, one table each (core/scenario/scenario.cpp): auto, ring, tree, nvls,
// hierarchical, collnet, nvlstree, pat (NCCL_ALGO's, lower case); auto, LL, LL128, Simple
// (NCCL_PROTO's). The trace's NCCL spelling (RING, SIMPLE) is backends/common/kineto_names.hpp's.
const char* to_string(CollectiveAlgo a);
const char* to_string(NcclProto p);
// Every spelling, in enum order (the parser's choices: the index is the enum value).
const std::vector<std::string>& collective_algo_names();
const std::vector<std::string>& nccl_proto_names();

// Forcing NCCL's choice, as the NCCL_ALGO / NCCL_PROTO environment variables do
// (docs/scenario.md, "nccl"; docs/cost-model.md, "Protocols"). Parsed once by the parser.
struct NcclSpec {
  CollectiveAlgo algo = CollectiveAlgo::kAuto;
  NcclProto proto = NcclProto::kAuto;
};

// [SECTION] Simulation ---------------------------------------------------------------------------

// How the simulator runs the Program (docs/scenario.md, "simulation").
struct SimulationSpec {
  // Rank symmetry (docs/cost-model.md, "Rank symmetry"): ranks that differ only by their
  // data- or tensor-parallel index run the same ops at the same times, so the lowering emits one
  // representative per class and the simulator moves the others' traffic as mirror images.
  // false: full fidelity, every rank simulated op by op.
  bool symmetry = true;
};

// [SECTION] Scenario -----------------------------------------------------------------------------

// Resource limits (docs/limits.md): sizes past these are refused up front by the parser, with
// the limit and how to raise it, instead of exhausting memory or time. Raised per scenario with
// the top-level "limits" object (or --set limits.KEY=N), up to the hard ceilings below.
struct ScenarioLimits {
  std::int64_t max_gpus = 65536;             // cluster.nodes x cluster.gpus_per_node
  std::int64_t max_steps = 100000;           // training.steps
  std::int64_t max_layers = 100000;          // model layers after building
  std::int64_t max_trace_events = 20000000;  // estimated events of the run's trace
  // estimated events of --per-rank's files with every rank written (rank symmetry's mirrors too)
  std::int64_t max_per_rank_events = 50000000;
  static constexpr std::int64_t kCeilingGpus = 1 << 20;
  static constexpr std::int64_t kCeilingSteps = 1000000000;
  static constexpr std::int64_t kCeilingLayers = 10000000;
  static constexpr std::int64_t kCeilingTraceEvents = 4000000000LL;
};

struct Scenario {
  std::string name;
  std::string description;
  std::string file;  // path it was read from (for messages)
  ClusterSpec cluster;
  HostSpec host;
  ModelSpec model;
  TrainingSpec training;
  StrategySpec strategy;
  SimulationSpec simulation;
  NcclSpec nccl;
  ScenarioLimits limits;
  std::int64_t estimated_trace_events = 0;  // the parser's estimate checked against the limit
  std::vector<std::string> warnings;  // accepted but noteworthy (e.g. fewer replicas than devices)
};

// Usable memory = memory - context - NCCL buffers (when communicating) - workspace
// (docs/cost-model.md, "Memory").
Bytes usable_memory_bytes(const ClusterSpec& c, bool communicates);

}  // namespace csim::core
