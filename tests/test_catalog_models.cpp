// GPU catalog and model builders: figures and formulas derived by hand in the comments
// (docs/scenario.md, "GPU catalog" and "Model").
#include <catch2/catch.hpp>

#include "core/hardware/gpu_catalog.hpp"
#include "core/model/model_builders.hpp"

using namespace csim;
using namespace csim::core;

TEST_CASE("catalog: lookup by name and alias is case- and punctuation-insensitive", "[catalog]") {
  REQUIRE(find_gpu("A100-80GB") != nullptr);
  CHECK(find_gpu("A100-80GB")->gpu.name == "A100-SXM4-80GB");
  CHECK(find_gpu("a100_80gb")->gpu.name == "A100-SXM4-80GB");
  CHECK(find_gpu("a100-sxm4-40gb")->gpu.name == "A100-SXM4-40GB");
  CHECK(find_gpu("H100")->gpu.name == "H100-SXM5-80GB");
  CHECK(find_gpu("h200")->gpu.name == "H200-SXM-141GB");
  CHECK(find_gpu("1080ti")->gpu.name == "GTX-1080-Ti");
  CHECK(find_gpu("V100-32GB")->gpu.name == "V100-SXM2-32GB");
  CHECK(find_gpu("v100")->gpu.name == "V100-SXM2-16GB");
  CHECK(find_gpu("B300") == nullptr);
  CHECK(gpu_names().size() == 12);  // 7 + H100 PCIe, H800, L40S, B200, GB200
  const std::string hint = gpu_name_hint("A100-80G");
  CHECK(hint.find("did you mean A100-SXM4-80GB") != std::string::npos);
  CHECK(hint.find("H200-SXM-141GB") != std::string::npos);
}

TEST_CASE("catalog: dense peaks per dtype, 0 where the GPU lacks the dtype", "[catalog]") {
  const GpuSpec& p = find_gpu("1080ti")->gpu;
  // GP102: 3584 cores x 2 FLOP x 1.582 GHz = 11.34 TFLOP/s; fp16 at 1/64 of that; no bf16/tf32
  CHECK(p.peak_fp32_flops_per_s == Approx(3584 * 2 * 1.582e9).epsilon(0.001));
  CHECK(p.peak_flops_per_s(Dtype::kFp16) == Approx(p.peak_fp32_flops_per_s / 64));
  CHECK(p.peak_flops_per_s(Dtype::kBf16) == 0);
  CHECK(p.peak_flops_per_s(Dtype::kTf32) == 0);
  const GpuSpec& v = find_gpu("v100")->gpu;
  CHECK(v.peak_flops_per_s(Dtype::kFp16) == Approx(125e12));
  CHECK(v.peak_flops_per_s(Dtype::kBf16) == 0);
  CHECK(v.peak_flops_per_s(Dtype::kTf32) == 0);
  const GpuSpec& a = find_gpu("a100")->gpu;
  CHECK(a.peak_flops_per_s(Dtype::kBf16) == Approx(312e12));
  CHECK(a.peak_flops_per_s(Dtype::kTf32) == Approx(156e12));
  CHECK(a.memory_bytes == 80 * kGiB);
  // Hopper: datasheet 1,979 TFLOPS bf16 is 2:4 sparse -> dense 989.5
  const GpuSpec& h = find_gpu("h100")->gpu;
  CHECK(h.peak_flops_per_s(Dtype::kBf16) == Approx(1979e12 / 2));
  CHECK(h.peak_flops_per_s(Dtype::kTf32) == Approx(989e12 / 2));
  CHECK(find_gpu("h200")->gpu.mem_bw_bytes_per_s == Approx(4.8e12));
  for (const GpuCatalogEntry& e : gpu_catalog()) {
    CHECK_FALSE(e.gpu.source.empty());
    CHECK_FALSE(e.link_source.empty());
    for (const EfficiencyCurve& c : e.gpu.efficiency) {
      CHECK(c.max_efficiency > 0);
      CHECK(c.max_efficiency <= 1);
      CHECK_FALSE(c.source.empty());
    }
    // usable memory is positive with every default reserve
    ClusterSpec cs;
    cs.gpu = e.gpu;
    cs.reserve = e.reserve;
    CHECK(usable_memory_bytes(cs, true) > 0);
  }
}

TEST_CASE("catalog: the FP8-era GPUs by alias, dense FP8 = half the sparse headline", "[catalog]") {
  const std::pair<const char*, const char*> aliases[] = {
      {"H100-PCIe", "H100-PCIe-80GB"}, {"h100_pcie_80gb", "H100-PCIe-80GB"},
      {"H800", "H800-SXM5-80GB"},      {"h800-sxm5", "H800-SXM5-80GB"},
      {"L40S", "L40S-48GB"},           {"l40s-48gb", "L40S-48GB"},
      {"B200", "B200-180GB"},          {"HGX-B200", "B200-180GB"},
      {"GB200", "GB200-186GB"},        {"GB200-NVL72", "GB200-186GB"}};
  for (const auto& [alias, name] : aliases) {
    INFO(alias);
    REQUIRE(find_gpu(alias) != nullptr);
    CHECK(find_gpu(alias)->gpu.name == name);
  }
  // Dense FP8 = half of the 2:4-sparse datasheet headline (per GPU for the system datasheets):
  //   H100/H200/H800 SXM 3,958 -> 1,979; H100 PCIe 3,026 -> 1,513; L40S 1,466 -> 733;
  //   DGX B200 72 PFLOPS / 8 GPUs = 9 -> 4.5; GB200 NVL72 720 PFLOPS / 72 = 10 -> 5.
  const std::pair<const char*, double> sparse[] = {
      {"h100", 3958e12}, {"h200", 3958e12},   {"h800", 3958e12},     {"h100pcie", 3026e12},
      {"l40s", 1466e12}, {"b200", 72e15 / 8}, {"gb200", 720e15 / 72}};
  for (const auto& [alias, headline] : sparse) {
    INFO(alias);
    CHECK(find_gpu(alias)->gpu.peak_flops_per_s(Dtype::kFp8) == Approx(headline / 2));
  }
  // FP8 dense is twice bf16 dense on every FP8 GPU (same tensor-core generation).
  for (const GpuCatalogEntry& e : gpu_catalog()) {
    if (e.gpu.peak_fp8_flops_per_s == 0) continue;
    INFO(e.gpu.name);
    CHECK(e.gpu.peak_fp8_flops_per_s == Approx(2 * e.gpu.peak_bf16_flops_per_s).epsilon(0.02));
    CHECK_FALSE(e.gpu.fp8_gemm_efficiency.source.empty());
    CHECK(e.gpu.compute_capability >= 89);
  }
  // No FP8 before Ada: V100, A100, 1080 Ti have none.
  CHECK(find_gpu("a100")->gpu.peak_fp8_flops_per_s == 0);
  CHECK(find_gpu("v100")->gpu.peak_fp8_flops_per_s == 0);
  // Compute capabilities (x10): L40S 8.9, Hopper 9.0, Blackwell datacenter 10.0.
  CHECK(find_gpu("l40s")->gpu.compute_capability == 89);
  CHECK(find_gpu("h800")->gpu.compute_capability == 90);
  CHECK(find_gpu("h100pcie")->gpu.compute_capability == 90);
  CHECK(find_gpu("b200")->gpu.compute_capability == 100);
  CHECK(find_gpu("gb200")->gpu.compute_capability == 100);
  // Links: H800 NVLink 400 GB/s bidirectional = 200 per direction; NVLink 5 1.8 TB/s = 900.
  CHECK(find_gpu("h800")->nvswitch_bytes_per_s == Approx(200e9));
  CHECK(find_gpu("b200")->nvswitch_bytes_per_s == Approx(900e9));
  CHECK(find_gpu("gb200")->nvswitch_bytes_per_s == Approx(900e9));
  CHECK(find_gpu("l40s")->intra_kind == IntraNodeKind::kPcie);
  // Per-GPU shares of system memory bandwidth: 64 TB/s / 8 and 576 TB/s / 72 = 8 TB/s.
  CHECK(find_gpu("b200")->gpu.mem_bw_bytes_per_s == Approx(8e12));
  CHECK(find_gpu("gb200")->gpu.mem_bw_bytes_per_s == Approx(8e12));
  // The reused curves say where they come from.
  CHECK(find_gpu("l40s")->gpu.efficiency[0].source.find("reused from A100-SXM4-80GB") == 0);
  CHECK(find_gpu("b200")->gpu.efficiency[0].source.find("reused from H100-SXM5-80GB") == 0);
}

TEST_CASE("catalog: fitted curves cite their published-measurements case", "[catalog]") {
  const auto gemm = static_cast<int>(ComputeKind::kGemm);
  CHECK(find_gpu("v100")->gpu.efficiency[gemm].source.find("megatron19_1p2B_1gpu") !=
        std::string::npos);
  CHECK(find_gpu("a100")->gpu.efficiency[gemm].source.find("korthikanti_t4_22B") !=
        std::string::npos);
}

TEST_CASE("catalog: DGX-1 hybrid cube-mesh uses all 6 NVLink ports of each V100", "[catalog]") {
  const std::vector<NvlinkPair> pairs = dgx1_nvlink_pairs();
  CHECK(pairs.size() == 16);  // 12 cube edges + 4 face diagonals
  int per_gpu[8] = {};
  int total = 0;
  for (const NvlinkPair& p : pairs) {
    per_gpu[p.a] += p.links;
    per_gpu[p.b] += p.links;
    total += p.links;
  }
  CHECK(total == 24);  // 8 GPUs x 6 ports / 2
  for (int g = 0; g < 8; ++g) CHECK(per_gpu[g] == 6);
  const IntraNodeSpec s8 = default_intra(*find_gpu("v100"), 8);
  CHECK(s8.kind == IntraNodeKind::kNvlinkMesh);
  CHECK(s8.nvlink_bytes_per_s_per_link == Approx(25e9));
  CHECK(default_intra(*find_gpu("v100"), 4).kind == IntraNodeKind::kPcie);
  CHECK(default_intra(*find_gpu("a100"), 8).nvswitch_bytes_per_s == Approx(300e9));
  CHECK(default_intra(*find_gpu("h100"), 8).nvswitch_bytes_per_s == Approx(450e9));
}

TEST_CASE("scenario: precision bytes per parameter and usable memory", "[scenario]") {
  // fp32 4+4; amp 4+4 (autocast keeps fp32 weights/grads); bf16 2 + 4 main grads + 4 master;
  // fp16 2 + 2 + 4 master
  const PrecisionBytes f = precision_bytes(Precision::kFp32, Dtype::kFp16);
  CHECK((f.weights == 4 && f.grads == 4 && f.master == 0 && f.compute == Dtype::kFp32));
  const PrecisionBytes a = precision_bytes(Precision::kAmp, Dtype::kBf16);
  CHECK((a.weights == 4 && a.grads == 4 && a.master == 0 && a.compute == Dtype::kBf16));
  const PrecisionBytes b = precision_bytes(Precision::kBf16, Dtype::kFp16);
  CHECK((b.weights == 2 && b.grads == 4 && b.master == 4 && b.compute == Dtype::kBf16));
  const PrecisionBytes h = precision_bytes(Precision::kFp16, Dtype::kFp16);
  CHECK((h.weights == 2 && h.grads == 2 && h.master == 4 && h.compute == Dtype::kFp16));
  CHECK(std::string(to_string(StrategyKind::kDataParallel)) == "data_parallel");
  CHECK(dtype_bytes(Dtype::kBf16) == 2);
  ClusterSpec c;
  c.gpu.memory_bytes = 1000;
  c.reserve = {100, 50, 25};
  CHECK(usable_memory_bytes(c, false) == 1000 - 100 - 25);
  CHECK(usable_memory_bytes(c, true) == 1000 - 100 - 50 - 25);
}

TEST_CASE("layer list: the notes' Linear(5->2)", "[models]") {
  LayerListBuilder b(4);
  b.linear("fc", 5, 2, true);
  b.add_python_us(20);
  const std::vector<LayerSpec> l = b.take_layers();
  REQUIRE(l.size() == 1);
  CHECK(l[0].params == 5 * 2 + 2);                   // weight + bias = 12
  CHECK(l[0].fwd_flops_per_sample == 2 * 5 * 2);     // 2 FLOPs per MAC = 20
  CHECK(l[0].activation_bytes_per_sample == 5 * 4);  // saves its fp32 input
  CHECK(l[0].output_bytes_per_sample == 2 * 4);
  CHECK(l[0].extra_python_us == 20);
  CHECK(b.input_bytes_per_sample() == 5 * 4);  // in_features * 4
}

TEST_CASE("layer list: conv2d / batchnorm2d / relu shapes and dedup of saved tensors", "[models]") {
  LayerListBuilder b(4);
  b.conv2d("c1", 3, 16, 3, 1, 1, 32, 32, false);  // 32x32 -> 32x32
  b.batchnorm2d("bn", 0);
  b.elementwise("relu", "relu");
  b.conv2d("c2", 16, 8, 3, 2, 1, 0, 0, true);  // (32 + 2 - 3)/2 + 1 = 16
  b.flatten();
  b.linear("fc", 8 * 16 * 16, 10, true);
  CHECK(b.input_bytes_per_sample() == 3 * 32 * 32 * 4);
  const std::vector<LayerSpec> l = b.take_layers();
  REQUIRE(l.size() == 5);
  CHECK(l[0].params == 16 * 3 * 9);
  CHECK(l[0].fwd_flops_per_sample == 2.0 * 16 * 32 * 32 * 3 * 9);  // 2 * Cout*Ho*Wo * Cin*k^2
  CHECK(l[1].params == 2 * 16);
  CHECK(l[1].buffer_elems == 2 * 16 + 1);  // running mean/var + num_batches_tracked
  CHECK(l[2].activation_bytes_per_sample == 16 * 32 * 32 * 4);  // relu saves its output
  CHECK(l[3].activation_bytes_per_sample == 0);                 // c2's input is relu's saved output
  CHECK(l[3].params == 8 * 16 * 9 + 8);
  CHECK(l[3].output_bytes_per_sample == 8 * 16 * 16 * 4);
  CHECK(l[4].params == 8 * 16 * 16 * 10 + 10);

  LayerListBuilder bad(4);
  bad.linear("a", 5, 3, true);
  CHECK_THROWS_AS(bad.linear("b", 4, 2, true), std::invalid_argument);  // 4 != 3
  LayerListBuilder bad2(4);
  CHECK_THROWS_AS(bad2.elementwise("r", "relu"), std::invalid_argument);  // no input shape
}

TEST_CASE("layer list: embedding, layernorm, attention", "[models]") {
  LayerListBuilder b(2);
  b.embedding("emb", 1000, 64, 128);
  b.layernorm("ln", 0);
  b.attention("attn", 0, 4);
  CHECK(b.input_bytes_per_sample() == 128 * 8);  // int64 token ids
  const std::vector<LayerSpec> l = b.take_layers();
  REQUIRE(l.size() == 3);
  CHECK(l[0].params == 1000 * 64);
  CHECK(l[1].params == 2 * 64);
  // attention: 4h^2 + 4h params; 8sh^2 + 4s^2h FLOPs; (11sh + 5as^2) * e/2 saved bytes
  const double s = 128, h = 64, a = 4;
  CHECK(l[2].params == 4 * 64 * 64 + 4 * 64);
  CHECK(l[2].fwd_flops_per_sample == Approx(8 * s * h * h + 4 * s * s * h));
  CHECK(l[2].activation_bytes_per_sample == Approx(11 * s * h + 5 * a * s * s));
}

TEST_CASE("gpt: GPT-2 small parameter count, FLOPs and Korthikanti activations", "[models]") {
  GptConfig c;  // defaults: GPT-2 small
  const ModelSpec m = build_gpt(c, 2);
  // V*h + s*h + L*(12h^2 + 13h) + 2h = 38,597,376 + 786,432 + 12*7,087,872 + 1,536 = 124,439,808
  CHECK(m.total_params() == 124439808);
  CHECK(m.input_bytes_per_sample == 1024 * 8);
  const double s = 1024, h = 768, a = 12;
  double flops = 0, act = 0;
  for (const LayerSpec& l : m.layers) {
    if (l.name.rfind("h.0.", 0) != 0) continue;
    if (l.kind != ComputeKind::kElementwise) flops += l.fwd_flops_per_sample;
    act += l.activation_bytes_per_sample;
  }
  // per block: 24sh^2 + 4s^2h (Narayanan et al. 2021) = 14,495,514,624 + 3,221,225,472
  CHECK(flops == Approx(24 * s * h * h + 4 * s * s * h));
  // per block, 2-byte activations: sh(34 + 5as/h) (Korthikanti et al. 2022) = 94,371,840 bytes
  CHECK(act == Approx(s * h * (34 + 5 * a * s / h)));
  // fp32 activations double it
  const ModelSpec m4 = build_gpt(c, 4);
  double act4 = 0;
  for (const LayerSpec& l : m4.layers) {
    if (l.name.rfind("h.0.", 0) == 0) act4 += l.activation_bytes_per_sample;
  }
  CHECK(act4 == Approx(2 * act));
  // LM head logits: s * V elements
  CHECK(m.layers.back().output_bytes_per_sample == Approx(1024.0 * 50257 * 2));
}

TEST_CASE("resnet50: torchvision layer table", "[models]") {
  const ModelSpec m = build_resnet50({}, 4);
  // torchvision resnet50: 25,557,032 parameters
  CHECK(m.total_params() == 25557032);
  // 53 BatchNorms (1 stem + 3 x 16 blocks + 4 downsample), sum of their channels 26,560:
  // buffers 2 * 26,560 + 53 = 53,173
  int bns = 0;
  for (const LayerSpec& l : m.layers) bns += l.buffer_elems > 0 ? 1 : 0;
  CHECK(bns == 53);
  CHECK(m.total_buffer_elems() == 53173);
  // conv + fc MACs at 224x224: 4,089,184,256 (torchvision: "4.09 GFLOPS") -> 8.18 GFLOP forward
  double macs = 0;
  for (const LayerSpec& l : m.layers) {
    if (l.kind != ComputeKind::kElementwise) macs += l.fwd_flops_per_sample / 2;
  }
  CHECK(macs == Approx(4089184256.0));
  CHECK(m.input_bytes_per_sample == 3 * 224 * 224 * 4);
  CHECK(m.layers.front().name == "conv1");
  CHECK(m.layers.back().name == "fc");
  CHECK(m.layers.back().params == 2048 * 1000 + 1000);
  CHECK(m.layers.back().output_bytes_per_sample == 1000 * 4);
}

TEST_CASE("explicit: figures taken as given, negatives refused", "[models]") {
  LayerSpec l;
  l.name = "x";
  l.params = 10;
  l.fwd_flops_per_sample = 100;
  const ModelSpec m = build_explicit({l}, 64);
  CHECK(m.total_params() == 10);
  CHECK(m.input_bytes_per_sample == 64);
  l.params = -1;
  CHECK_THROWS_AS(build_explicit({l}, 0), std::invalid_argument);
}
