// Scenario parser: one test per error class (each checks the message names the file and the JSON
// path), defaults, overrides, and every bundled scenario parses.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "core/json_diagnostics.hpp"
#include "core/scenario/scenario_parser.hpp"

using namespace csim;
using namespace csim::core;

namespace {

const char* const kFile = "test.json";

std::string minimal(const std::string& strategy = R"({"kind": "single"})",
                    const std::string& gpu = R"("GTX-1080-Ti")",
                    const std::string& training = R"({"global_batch": 30})") {
  return R"({"cluster": {"nodes": 1, "gpus_per_node": 4, "gpu": )" + gpu +
         R"(}, "model": {"layers": [{"type": "linear", "in": 5, "out": 2}]}, "training": )" +
         training + R"(, "strategy": )" + strategy + "}";
}

// Parses `text`, expects an InputError whose json_path is `path` and whose one-line message names
// the file and contains `needle`; returns the error.
InputError expect_error(const std::string& text, const std::string& path, const std::string& needle,
                        const std::vector<std::string>& overrides = {}) {
  try {
    parse_scenario_string(text, kFile, overrides);
  } catch (const InputError& e) {
    INFO(e.what());
    CHECK(e.json_path() == path);
    CHECK(std::string(e.what()).find(kFile) != std::string::npos);
    if (!path.empty()) CHECK(std::string(e.what()).find(path) != std::string::npos);
    CHECK(std::string(e.what()).find(needle) != std::string::npos);
    return e;
  }
  FAIL("no InputError for: " << text);
  return InputError("", "", "");
}

}  // namespace

TEST_CASE("diagnostics: byte offset -> line:column, edit distance", "[parser]") {
  const LineCol lc = line_col_at("ab\ncd\nef", 4);  // 'd'
  CHECK(lc.line == 2);
  CHECK(lc.column == 2);
  CHECK(edit_distance("bucket_cap_m", "bucket_cap_mb") == 1);
  CHECK(edit_distance("ab", "ba") == 1);  // transposition
  CHECK(nearest_candidate("bucket_cap_m", {"overlap", "bucket_cap_mb"}) == "bucket_cap_mb");
  CHECK(nearest_candidate("zzzzzz", {"overlap"}).empty());
}

TEST_CASE("parser: a minimal scenario gets its defaults", "[parser]") {
  const Scenario s = parse_scenario_string(minimal(), kFile);
  CHECK(s.name == "test");  // file stem
  CHECK(s.cluster.gpu.name == "GTX-1080-Ti");
  CHECK(s.cluster.intra.kind == IntraNodeKind::kPcie);
  CHECK(s.cluster.reserve.cuda_context_bytes == 300 * kMiB);
  CHECK(s.training.optimizer == OptimizerKind::kAdam);
  CHECK(s.training.steps == 3);
  CHECK(s.strategy.device_ids == std::vector<int>{0});
  CHECK(s.strategy.output_device == 0);
  CHECK(s.model.total_params() == 12);
  CHECK(s.model.input_bytes_per_sample == 20);
  CHECK(s.strategy.ddp.bucket_cap_mb == 25);
  CHECK(s.strategy.ddp.first_bucket_mb == 1);
}

TEST_CASE("parser: device_ids defaults per strategy, output_device defaults to device_ids[0]",
          "[parser]") {
  const std::string two_nodes =
      R"({"cluster": {"nodes": 2, "gpus_per_node": 4, "gpu": "a100"}, "model": {"resnet50": {}},
          "training": {"global_batch": 64}, "strategy": {"kind": "KIND"}})";
  auto with = [&](const std::string& kind) {
    std::string t = two_nodes;
    t.replace(t.find("KIND"), 4, kind);
    return parse_scenario_string(t, kFile);
  };
  CHECK(with("ddp").strategy.device_ids == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});  // all GPUs
  CHECK(with("data_parallel").strategy.device_ids == std::vector<int>{0, 1, 2, 3});    // node 0
  CHECK(with("single").strategy.device_ids == std::vector<int>{0});
  const Scenario s =
      parse_scenario_string(minimal(R"({"kind": "data_parallel", "device_ids": [2, 3]})"), kFile);
  CHECK(s.strategy.output_device == 2);
}

TEST_CASE("parser error: malformed JSON reports line and column", "[parser][errors]") {
  // line 3 follows a missing comma: the parser fails once it has read the string "model", i.e. at
  // its closing quote: line 3, column 9 (2 spaces + 7 characters of "model")
  const std::string text = "{\n  \"name\": \"x\"\n  \"model\": {}\n}";
  const InputError e = expect_error(text, "", "line 3, column 9");
  CHECK(std::string(e.what()).find("malformed JSON") != std::string::npos);
}

TEST_CASE("parser error: duplicate key", "[parser][errors]") {
  expect_error(R"({"name": "a", "name": "b"})", "name", "duplicate key");
}

TEST_CASE("parser error: unknown key with did-you-mean", "[parser][errors]") {
  const InputError e = expect_error(minimal(R"({"kind": "ddp", "ddp": {"bucket_cap_m": 10}})"),
                                    "strategy.ddp.bucket_cap_m", "unknown key 'bucket_cap_m'");
  CHECK(e.hint() == "did you mean bucket_cap_mb?");
  CHECK(std::string(e.what()).find("(hint: did you mean bucket_cap_mb?)") != std::string::npos);
  // inside a layer list: model.layers[0].outt
  const std::string layers = R"({"cluster": {"gpu": "v100"}, "training": {"global_batch": 1},
      "model": {"layers": [{"type": "linear", "in": 5, "outt": 2}]}})";
  const InputError e2 = expect_error(layers, "model.layers[0].outt", "unknown key");
  CHECK(e2.hint() == "did you mean out?");
}

TEST_CASE("parser error: wrong type", "[parser][errors]") {
  expect_error(minimal(R"({"kind": "single"})", R"("v100")", R"({"global_batch": "64"})"),
               "training.global_batch", "expected an integer, got string \"64\"");
  expect_error(minimal(R"({"kind": "single"})", R"("v100")", R"({"global_batch": 6.5})"),
               "training.global_batch", "expected an integer");
  expect_error(minimal(R"({"kind": "ddp", "ddp": {"overlap": 1}})"), "strategy.ddp.overlap",
               "expected true or false");
}

TEST_CASE("parser error: out-of-range value names the limit", "[parser][errors]") {
  expect_error(minimal(R"({"kind": "single"})", R"("v100")", R"({"global_batch": 8, "steps": 0})"),
               "training.steps", "must be 1..100000");
  // nodes x gpus_per_node against limits.max_gpus (docs/limits.md).
  const std::string big = R"({"cluster": {"nodes": 5000, "gpus_per_node": 16, "gpu": "h100"},
      "model": {"resnet50": {}}, "training": {"global_batch": 8}})";
  expect_error(big, "cluster.nodes", "exceeds the limit of 65536 (limits.max_gpus");
  expect_error(
      minimal(R"({"kind": "single"})", R"("v100")", R"({"global_batch": 8, "precision": "fp4"})"),
      "training.precision", "'fp4' is not one of fp32, amp, bf16, fp16, fp8");
  // fp8 is a precision, but not on a V100 (docs/fp8.md, "Support matrix").
  expect_error(
      minimal(R"({"kind": "single"})", R"("v100")", R"({"global_batch": 8, "precision": "fp8"})"),
      "training.precision",
      "delayed scaling needs compute capability 8.9 or newer; V100-SXM2-16GB has 7.0");
}

TEST_CASE("parser error: device ids that do not exist, or duplicated", "[parser][errors]") {
  expect_error(minimal(R"({"kind": "data_parallel", "device_ids": [0, 1, 4]})"),
               "strategy.device_ids[2]", "GPU 4 does not exist: the cluster has 4 GPUs (0..3)");
  expect_error(minimal(R"({"kind": "data_parallel", "device_ids": [0, 1, 1]})"),
               "strategy.device_ids[2]", "GPU 1 is listed twice");
}

TEST_CASE("parser error: output_device not in device_ids", "[parser][errors]") {
  expect_error(minimal(R"({"kind": "data_parallel", "device_ids": [0, 1], "output_device": 3})"),
               "strategy.output_device", "GPU 3 is not one of device_ids");
}

TEST_CASE("parser error: a dtype the GPU lacks", "[parser][errors]") {
  // V100 has no bf16
  const InputError e =
      expect_error(minimal(R"({"kind": "single"})", R"("V100-SXM2-16GB")",
                           R"({"global_batch": 8, "precision": "bf16"})"),
                   "training.precision", "bf16 is not supported by V100-SXM2-16GB");
  CHECK(e.hint().find("amp_dtype fp16") != std::string::npos);
  // amp with bf16 on a GTX 1080 Ti: the path is amp_dtype
  expect_error(minimal(R"({"kind": "single"})", R"("1080ti")",
                       R"({"global_batch": 8, "precision": "amp", "amp_dtype": "bf16"})"),
               "training.amp_dtype", "bf16 is not supported by GTX-1080-Ti");
  // amp fp16 on the 1080 Ti is accepted with a warning: 1/64 rate
  const Scenario s = parse_scenario_string(
      minimal(R"({"kind": "single"})", R"("1080ti")", R"({"global_batch": 8, "precision": "amp"})"),
      kFile);
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].find("64x lower rate than fp32") != std::string::npos);
}

TEST_CASE("parser error: missing required keys", "[parser][errors]") {
  expect_error(R"({"cluster": {"gpu": "a100"}, "model": {"resnet50": {}}})", "training",
               "missing required key 'training'");
  expect_error(
      R"({"cluster": {"gpus_per_node": 2}, "model": {"resnet50": {}}, "training": {"global_batch": 2}})",
      "cluster.gpu", "missing required key 'gpu'");
  expect_error(R"({"cluster": {"gpu": "a100"}, "model": {}, "training": {"global_batch": 2}})",
               "model", "missing the model: give one of layers, gpt");
}

TEST_CASE("parser error: inconsistent strategy", "[parser][errors]") {
  // DataParallel is one process: its GPUs must share a node (GPU 4 is node 1 with 4 GPUs per node)
  const std::string dp = R"({"cluster": {"nodes": 2, "gpus_per_node": 4, "gpu": "a100"},
      "model": {"resnet50": {}}, "training": {"global_batch": 64},
      "strategy": {"kind": "data_parallel", "device_ids": [0, 4]}})";
  expect_error(dp, "strategy.device_ids[1]", "DataParallel is single-process");
  // single needs exactly one GPU
  expect_error(minimal(R"({"kind": "single", "device_ids": [0, 1]})"), "strategy.device_ids",
               "exactly one GPU");
  // DDP needs the micro-batch to split evenly: 30 over 4 ranks does not
  expect_error(minimal(R"({"kind": "ddp"})"), "training.global_batch",
               "does not split evenly over 4 DDP ranks");
}

TEST_CASE("parser error: unknown GPU lists the valid names", "[parser][errors]") {
  const InputError e = expect_error(minimal(R"({"kind": "single"})", R"("A100-80G")"),
                                    "cluster.gpu", "unknown GPU 'A100-80G'");
  CHECK(e.hint().find("did you mean A100-SXM4-80GB?") != std::string::npos);
  CHECK(e.hint().find("GTX-1080-Ti") != std::string::npos);
}

TEST_CASE("parser error: layer shapes that do not chain", "[parser][errors]") {
  const std::string t = R"({"cluster": {"gpu": "v100"}, "training": {"global_batch": 1},
      "model": {"layers": [{"type": "linear", "in": 5, "out": 3}, {"type": "relu"},
                           {"type": "linear", "in": 4, "out": 2}]}})";
  expect_error(t, "model.layers[2]",
               "in = 4 does not match the previous layer's output (3 features)");
}

TEST_CASE("parser: overrides are applied before validation", "[parser][overrides]") {
  const Scenario s = parse_scenario_string(
      minimal(R"({"kind": "data_parallel"})", R"("1080ti")", R"({"global_batch": 32})"), kFile,
      {"strategy.kind=ddp", "training.global_batch=48", "strategy.device_ids=[0,1,2]",
       "strategy.ddp.bucket_cap_mb=50", "name=my run"});
  CHECK(s.strategy.kind == StrategyKind::kDdp);
  CHECK(s.training.global_batch == 48);
  CHECK(s.strategy.device_ids == std::vector<int>{0, 1, 2});
  CHECK(s.strategy.ddp.bucket_cap_mb == 50);
  CHECK(s.name == "my run");  // not JSON -> read as a string
}

TEST_CASE("parser error: a bad override names --set as its origin", "[parser][errors][overrides]") {
  const InputError e =
      expect_error(minimal(), "strategy.kindd", "unknown key 'kindd'", {"strategy.kindd=ddp"});
  CHECK(e.file().find("--set strategy.kindd") != std::string::npos);
  CHECK(e.hint() == "did you mean kind?");
  const InputError e2 =
      expect_error(minimal(), "strategy.kind", "'dpp' is not one of", {"strategy.kind=dpp"});
  CHECK(e2.file().find("--set strategy.kind") != std::string::npos);
  CHECK(e2.hint() == "did you mean ddp?");
  // an error elsewhere is not blamed on the override
  const InputError e3 =
      expect_error(minimal(R"({"kind": "single", "device_ids": [9]})"), "strategy.device_ids[0]",
                   "GPU 9 does not exist", {"training.steps=4"});
  CHECK(e3.file() == kFile);
  // no '='
  CHECK_THROWS_AS(parse_scenario_string(minimal(), kFile, {"strategy.kind"}), InputError);
}

TEST_CASE("parser: warnings for accepted-but-noteworthy input", "[parser]") {
  // 6 samples over 4 GPUs: torch.chunk makes chunks of 2 -> only 3 replicas run
  const Scenario s =
      parse_scenario_string(minimal(R"({"kind": "data_parallel", "device_ids": [0, 1, 2, 3]})",
                                    R"("1080ti")", R"({"global_batch": 6})"),
                            kFile);
  REQUIRE(s.warnings.size() == 1);
  CHECK(s.warnings[0].find("only 3 of 4 replicas run") != std::string::npos);
}

TEST_CASE("parser: inline custom GPU and catalog base with overrides", "[parser]") {
  const Scenario s = parse_scenario_string(
      minimal(
          R"({"kind": "single"})",
          R"({"base": "a100", "memory_gib": 40, "efficiency": {"gemm": {"max_efficiency": 0.5}}})"),
      kFile);
  CHECK(s.cluster.gpu.memory_bytes == 40 * kGiB);
  CHECK(s.cluster.gpu.efficiency[0].max_efficiency == 0.5);
  CHECK(s.cluster.gpu.peak_bf16_flops_per_s == Approx(312e12));
  const Scenario c = parse_scenario_string(
      minimal(R"({"kind": "single"})",
              R"({"name": "toy", "memory_gib": 8, "peak_fp32_tflops": 10, "mem_bw_gbps": 500})"),
      kFile);
  CHECK(c.cluster.gpu.name == "toy");
  CHECK(c.cluster.gpu.mem_bw_bytes_per_s == Approx(500e9));
  expect_error(minimal(R"({"kind": "single"})", R"({"name": "toy", "memory_gib": 8})"),
               "cluster.gpu.peak_fp32_tflops", "missing required key");
}

TEST_CASE("parser: every bundled scenario parses", "[parser][scenarios]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(CSIM_SOURCE_DIR) / "scenarios";
  int n = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().string());
    Scenario s;
    REQUIRE_NOTHROW(s = parse_scenario_file(entry.path().string()));
    CHECK(s.warnings.empty());
    ++n;
    // the comparisons the scenarios are for: DDP by --set strategy.kind=ddp
    if (s.strategy.kind == StrategyKind::kDataParallel && s.training.global_batch % 8 == 0) {
      CHECK_NOTHROW(parse_scenario_file(entry.path().string(), {"strategy.kind=ddp"}));
    }
  }
  CHECK(n >= 8);
  const Scenario dp3 = parse_scenario_file((dir / "linear_5x2_dp3.json").string());
  CHECK(dp3.strategy.device_ids == std::vector<int>{0, 1, 2});
  CHECK(dp3.training.dataset_size == 100);
  CHECK(dp3.model.layers[0].extra_python_us == 20);
  const Scenario v = parse_scenario_file((dir / "resnet50_8xv100_dgx1.json").string());
  CHECK(v.cluster.intra.kind == IntraNodeKind::kNvlinkMesh);
  CHECK(v.cluster.intra.nvlink_pairs.size() == 16);
  CHECK(v.strategy.device_ids.size() == 8);
  const Scenario g = parse_scenario_file((dir / "gpt2_small_8xa100.json").string());
  CHECK(g.model.total_params() == 124439808);
}

TEST_CASE("parser error: unreadable file", "[parser][errors]") {
  CHECK_THROWS_AS(parse_scenario_file("/nonexistent/x.json"), InputError);
}

TEST_CASE("heterogeneity keys: errors name the key", "[scenario][heterogeneity]") {
  const std::string base =
      "{\"cluster\":{\"nodes\":2,\"gpus_per_node\":8,\"gpu\":\"A100-SXM4-80GB\"%s},"
      "\"model\":{\"gpt\":{\"layers\":2,\"hidden\":256,\"heads\":4,\"seq_len\":128,\"vocab\":1000}}"
      ","
      "\"training\":{\"global_batch\":16},\"strategy\":{\"kind\":\"ddp\"}}";
  auto with = [&](const std::string& extra) {
    std::string s = base;
    s.replace(s.find("%s"), 2, extra);
    return s;
  };
  const csim::core::Scenario ok = csim::core::parse_scenario_string(
      with(",\"stragglers\":[{\"gpu\":15,\"slowdown\":1.2}],\"degraded_links\":[{\"node\":1,"
           "\"nic\":7,\"factor\":0.5}],\"fabric\":{\"nodes_per_leaf\":1,\"oversubscription\":2}"),
      "t.json");
  CHECK(ok.cluster.slowdown_of(15) == 1.2);
  CHECK(ok.cluster.slowdown_of(14) == 1.0);
  CHECK_FALSE(ok.cluster.homogeneous());
  CHECK(ok.cluster.fabric.nodes_per_leaf == 1);
  // GPU 16 does not exist (2 x 8 GPUs)
  CHECK_THROWS_WITH(csim::core::parse_scenario_string(
                        with(",\"stragglers\":[{\"gpu\":16,\"slowdown\":1.2}]"), "t.json"),
                    Catch::Contains("cluster.stragglers[0].gpu"));
  // a speed-up is not a straggler
  CHECK_THROWS_WITH(csim::core::parse_scenario_string(
                        with(",\"stragglers\":[{\"gpu\":1,\"slowdown\":0.5}]"), "t.json"),
                    Catch::Contains("cluster.stragglers[0].slowdown"));
  // neither nic nor gpu
  CHECK_THROWS_WITH(csim::core::parse_scenario_string(
                        with(",\"degraded_links\":[{\"node\":1,\"factor\":0.5}]"), "t.json"),
                    Catch::Contains("exactly one of 'nic' or 'gpu'"));
  CHECK_THROWS_WITH(
      csim::core::parse_scenario_string(with(",\"fabric\":{\"oversubscription\":0.5}"), "t.json"),
      Catch::Contains("cluster.fabric.oversubscription"));
}

TEST_CASE("nccl keys: algo and proto as NCCL_ALGO / NCCL_PROTO", "[scenario][nccl]") {
  const std::string base =
      "{\"cluster\":{\"gpus_per_node\":8,\"gpu\":\"H100-SXM5-80GB\"},"
      "\"model\":{\"gpt\":{\"layers\":2,\"hidden\":256,\"heads\":4,\"seq_len\":128,\"vocab\":1000}}"
      ","
      "\"training\":{\"global_batch\":16},\"strategy\":{\"kind\":\"ddp\"}}";
  const csim::core::Scenario s =
      csim::core::parse_scenario_string(base, "t.json", {"nccl.algo=nvls", "nccl.proto=Simple"});
  CHECK(s.nccl.algo == csim::core::CollectiveAlgo::kNvls);
  CHECK(s.nccl.proto == csim::core::NcclProto::kSimple);
  CHECK(csim::core::parse_scenario_string(base, "t.json").nccl.algo ==
        csim::core::CollectiveAlgo::kAuto);
  // a misspelt protocol is an error that names the key and suggests the nearest value
  CHECK_THROWS_WITH(csim::core::parse_scenario_string(base, "t.json", {"nccl.proto=LL12"}),
                    Catch::Contains("nccl.proto"));
  // NCCL's gates (docs/cost-model.md, "Algorithm gates"): PAT only with one GPU per node,
  // NVLSTree only across nodes; the error names the key and the reason.
  CHECK_THROWS_WITH(csim::core::parse_scenario_string(base, "t.json", {"nccl.algo=pat"}),
                    Catch::Contains("nccl.algo") && Catch::Contains("one GPU per node"));
  CHECK_THROWS_WITH(csim::core::parse_scenario_string(base, "t.json", {"nccl.algo=nvlstree"}),
                    Catch::Contains("nccl.algo") && Catch::Contains("single node"));
  CHECK(csim::core::parse_scenario_string(base, "t.json", {"nccl.algo=nvlstree", "cluster.nodes=2"})
            .nccl.algo == csim::core::CollectiveAlgo::kNvlsTree);
  CHECK(csim::core::parse_scenario_string(
            base, "t.json", {"nccl.algo=pat", "cluster.nodes=4", "cluster.gpus_per_node=1"})
            .nccl.algo == csim::core::CollectiveAlgo::kPat);
}

namespace {

// A 4-block GPT on 8 A100s under 3D (dp 2, tp 2, pp 2), as tests/bad_inputs/cases.json's "gpt3d".
std::string gpt3d(std::int64_t vocab = 1000, int steps = 1) {
  return R"({"cluster": {"gpus_per_node": 8, "gpu": "A100-SXM4-80GB"}, "model": {"gpt": {"layers": 4,
    "hidden": 256, "heads": 8, "seq_len": 128, "vocab": )" +
         std::to_string(vocab) + R"(}}, "training": {"global_batch": 16, "precision": "bf16",
    "steps": )" +
         std::to_string(steps) +
         R"(}, "strategy": {"kind": "3d", "dp": 2, "tp": 2, "pp": 2, "micro_batch_size": 1}})";
}

}  // namespace

TEST_CASE("parser: a conflict between --set values names every key and its origin",
          "[parser][overrides]") {
  // 4 layers over pp 2 x virtual_stages 4 = 8 chunks: layers, pp and virtual_stages conflict, and
  // the two that were --set say so; pp comes from the file.
  const InputError e = expect_error(gpt3d(),
                                    "conflicting keys model.gpt.layers (file), strategy.pp (file), "
                                    "strategy.virtual_stages (--set strategy.virtual_stages)",
                                    "is not divisible by pp * virtual_stages = 8",
                                    {"strategy.schedule=interleaved", "strategy.virtual_stages=4"});
  // The issue's case: --set model.gpt.layers=70 --set strategy.pp=8 --set
  // strategy.virtual_stages=1 on 8 GPUs (dp 1, tp 1): 70 % 8 != 0, and all three are named.
  expect_error(gpt3d(),
               "conflicting keys model.gpt.layers (--set model.gpt.layers), strategy.pp "
               "(--set strategy.pp), strategy.virtual_stages (--set strategy.virtual_stages)",
               "model.gpt.layers 70 is not divisible",
               {"model.gpt.layers=70", "strategy.pp=8", "strategy.dp=1", "strategy.tp=1",
                "strategy.virtual_stages=1"});
}

TEST_CASE("parser: a vocabulary tp cannot split is padded as Megatron pads it", "[parser]") {
  // Megatron: V' = ceil(V / (128 tp)) * 128 tp. V = 1001, tp 2: ceil(1001 / 256) * 256 = 1024.
  const Scenario padded = parse_scenario_string(gpt3d(1001), kFile);
  CHECK(padded.model.transformer.vocab == 1024);
  REQUIRE(padded.warnings.size() == 1);
  CHECK(padded.warnings[0].find("padded to 1024") != std::string::npos);
  // The extra 23 rows are parameters: the embedding (tied with the LM head) grows by 23 x h.
  const Scenario even = parse_scenario_string(gpt3d(1024), kFile);
  CHECK(padded.model.total_params() == even.model.total_params());
  // A vocabulary that tp divides is kept as given (1000 = 2 x 500): no note.
  const Scenario kept = parse_scenario_string(gpt3d(1000), kFile);
  CHECK(kept.model.transformer.vocab == 1000);
  CHECK(kept.warnings.empty());
}

TEST_CASE("parser: the trace-size limit applies to written traces only", "[parser][limits]") {
  // gpt3d for 2 steps estimates 2 x 8 micro-batches x (13*4+3 layers + 4) x 1 replica (rank
  // symmetry) x 16 = 15,104 events; a limit of 1,000 refuses a trace of it, not the run itself.
  const Scenario s = parse_scenario_string(gpt3d(1000, 2), kFile, {"limits.max_trace_events=1000"});
  CHECK(s.estimated_trace_events == 15104);
  try {
    check_trace_limit(s);
    FAIL("no InputError");
  } catch (const InputError& e) {
    INFO(e.what());
    CHECK(e.json_path() == "training.steps");  // several steps: the usual lever
    CHECK(std::string(e.what()).find("exceeds the limit of 1000") != std::string::npos);
    CHECK(e.hint().find("write no trace") != std::string::npos);
  }
  // One step: the steps are no lever; with symmetry on and micro-batches, the lever is the batch
  // and the hint names fewer, larger micro-batches, never fewer steps.
  const Scenario one =
      parse_scenario_string(gpt3d(1000, 1), kFile, {"limits.max_trace_events=1000"});
  try {
    check_trace_limit(one);
    FAIL("no InputError");
  } catch (const InputError& e) {
    INFO(e.what());
    CHECK(e.json_path() == "training.global_batch");
    CHECK(e.hint().find("training.steps") == std::string::npos);
    CHECK(e.hint().find("micro_batch_size") != std::string::npos);
  }
  CHECK_NOTHROW(check_trace_limit(parse_scenario_string(gpt3d(1000, 2), kFile)));
}

TEST_CASE("lowering: a Program past the machine's memory is refused with the levers",
          "[parser][limits]") {
  // 1e15 ops at 380 bytes each (kBytesPerEventSimulated) is 380 PB: no machine has that much
  // memory, so the check refuses it on any test machine; 1,000 ops (380 kB) always fit. Two steps:
  // the lever named is training.steps, as for the trace limit.
  const Scenario s = parse_scenario_string(gpt3d(1000, 2), kFile);
  CHECK_NOTHROW(check_program_memory(s, 1000, 2));
  try {
    check_program_memory(s, 1e15, 2048);
    FAIL("no InputError");
  } catch (const InputError& e) {
    INFO(e.what());
    CHECK(e.json_path() == "training.steps");
    CHECK(std::string(e.what()).find("2048 simulated ranks") != std::string::npos);
    CHECK(e.hint().find("training.steps") != std::string::npos);
  }
}

TEST_CASE("parser: --per-rank with every rank counts every GPU's replica", "[parser][limits]") {
  // gpt3d for 2 steps: 15,104 events simulated (1 replica under rank symmetry, above); every
  // rank's file holds its replica's events, dp 2 x tp 2 = 4 replicas: 60,416 events.
  const Scenario s =
      parse_scenario_string(gpt3d(1000, 2), kFile, {"limits.max_per_rank_events=60416"});
  CHECK_NOTHROW(check_per_rank_limit(s));
  const Scenario over =
      parse_scenario_string(gpt3d(1000, 2), kFile, {"limits.max_per_rank_events=60415"});
  try {
    check_per_rank_limit(over);
    FAIL("no InputError");
  } catch (const InputError& e) {
    INFO(e.what());
    CHECK(e.json_path() == "limits.max_per_rank_events");
    CHECK(std::string(e.what()).find("about 60416 events") != std::string::npos);
    CHECK(std::string(e.what()).find("x 4 model replicas") != std::string::npos);
    // The levers: the simulated GPUs' files only (8 GPUs x 1 / 4 replicas = 2), raising the
    // limit; 2 steps are below HTA's 3, so not fewer steps.
    CHECK(e.hint().find("--per-rank-representatives writes the 2 simulated GPUs' files") !=
          std::string::npos);
    CHECK(e.hint().find("limits.max_per_rank_events=N") != std::string::npos);
    CHECK(e.hint().find("training.steps") == std::string::npos);
  }
  // The default (50,000,000) is far above this run.
  CHECK_NOTHROW(check_per_rank_limit(parse_scenario_string(gpt3d(1000, 2), kFile)));
}
