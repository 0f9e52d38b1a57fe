// simrun sweep and simrun tune over the knobs of the modern decoder (docs/sweep.md, "Tune: the
// other knobs"): attention kernel, precision, compile, sharding family, sequence parallelism,
// recompute policy, rank order, uneven stages; the memory bound derived by hand for FP8 and FSDP2.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>

#include "core/json_diagnostics.hpp"
#include "core/lowering/framework_states.hpp"
#include "core/lowering/parallel_plan.hpp"
#include "run/scenario_loader.hpp"
#include "simrun_cli_support.hpp"
#include "sweep/sweep_runner.hpp"
#include "sweep/tune.hpp"
#include "test_support.hpp"

using namespace csim;
namespace fs = std::filesystem;

namespace {

nlohmann::json doc_of(const std::string& path) {
  return core::parse_json_strict(test::read_file(path), path);
}

}  // namespace

// [SECTION] Sweep --------------------------------------------------------------------------------

// transformer_1xh100 (tests/data/sweep): 2 blocks, h 2048, s 8192, batch 2 on one H100.
//   FP8 vs bf16: the blocks' linear layers are 2 x 16,384 tokens x (2048 x 3072 + 2048 x 2048 +
//   3 x 2048 x 5632) = 2.2 TFLOP per block forward, GEMM-bound; the H100's dense FP8 peak is twice
//   its bf16 peak (docs/fp8.md, "Peaks"), so with FP8 GEMM efficiency above half the bf16 one the
//   GEMMs take less time, more than the casts' traffic adds: fp8 < bf16 for every kernel.
//   flash3 vs eager: at s = 8192 the eager core writes and reads the a s^2 = 1.07e9-element
//   scores several times per sample and block (scores, mask-softmax, A V: docs/attention.md,
//   "Eager"), while the fused kernel keeps them on chip and skips the masked half: flash3 <
//   eager for every precision.
//   compile: fuses the blocks' pointwise chains, fewer kernels and less traffic, the GEMMs
//   unchanged (docs/compile.md): compiled <= eager mode.
TEST_CASE("a sweep over attention kernel x precision x compile gives the derived orderings",
          "[sweep][knobs]") {
  const std::string path = test::repo_path("tests/data/sweep/transformer_1xh100.json");
  const std::vector<sweep::Knob> knobs{
      sweep::parse_knob("model.transformer.attention.kernel=eager,flash3"),
      sweep::parse_knob("training.precision=bf16,fp8"),
      sweep::parse_knob("training.compile=false,true")};
  sweep::SweepRunOptions o;
  o.threads = 2;
  const sweep::SweepRunOutcome run =
      sweep::run_variants(doc_of(path), path, {}, knobs, sweep::grid_variants(knobs, 100), o);
  REQUIRE(run.rows.size() == 8);
  std::map<std::string, double> t;  // "kernel precision compile" -> step time
  for (const sweep::VariantResult& r : run.rows) {
    INFO(r.error);
    REQUIRE(r.status == sweep::VariantStatus::kOk);
    t[r.values[0] + " " + r.values[1] + " " + r.values[2]] = r.step_time_s;
  }
  for (const char* k : {"eager", "flash3"})
    for (const char* c : {"false", "true"})
      CHECK(t[std::string(k) + " fp8 " + c] < t[std::string(k) + " bf16 " + c]);
  for (const char* p : {"bf16", "fp8"})
    for (const char* c : {"false", "true"})
      CHECK(t[std::string("flash3 ") + p + " " + c] < t[std::string("eager ") + p + " " + c]);
  for (const char* k : {"eager", "flash3"})
    for (const char* p : {"bf16", "fp8"})
      CHECK(t[std::string(k) + " " + p + " true"] <= t[std::string(k) + " " + p + " false"]);
}

TEST_CASE("a sweep reports fp8 and flash3 on an A100 as invalid variants with the parser's reason",
          "[sweep][knobs]") {
  const std::string path = test::repo_path("tests/data/sweep/transformer_1xh100.json");
  const std::vector<sweep::Knob> knobs{
      sweep::parse_knob("model.transformer.attention.kernel=flash2,flash3"),
      sweep::parse_knob("training.precision=bf16,fp8")};
  const sweep::SweepRunOutcome run =
      sweep::run_variants(doc_of(path), path, {"cluster.gpu=A100-SXM4-80GB"}, knobs,
                          sweep::grid_variants(knobs, 100), sweep::SweepRunOptions{});
  REQUIRE(run.rows.size() == 4);
  for (const sweep::VariantResult& r : run.rows) {
    INFO(r.values[0] << " " << r.values[1] << ": " << r.error);
    if (r.values[0] == "flash2" && r.values[1] == "bf16") {
      CHECK(r.status == sweep::VariantStatus::kOk);
      continue;
    }
    CHECK(r.status == sweep::VariantStatus::kInvalid);
    CHECK(r.error.find('\n') == std::string::npos);  // one line
    CHECK(r.error.find("A100-SXM4-80GB has 8.0") != std::string::npos);
    if (r.values[1] == "fp8")
      CHECK(r.error.find("training.precision: delayed scaling needs compute capability 8.9") !=
            std::string::npos);
    else
      CHECK(r.error.find("flash3 needs Hopper") != std::string::npos);
  }
}

// [SECTION] Memory bound -------------------------------------------------------------------------

// transformer_tiny (scenarios/transformer_tiny_1xh200.json) on 2 GPUs, FSDP2 dp 2, FP8 delayed,
// full recompute, 1 step. By hand (docs/transformer.md, "Parameters"):
//   block: q, o 512 x 512; k, v 512 x 128 (2 kv heads x 64): 655,360; SwiGLU 3 x 512 x 1408 =
//          2,162,688; two RMSNorms 1,024: 2,819,072; x 4 blocks = 11,276,288
//   embedding, LM head 32,000 x 512 each (untied) 32,768,000; final norm 512
//   P = 44,044,800 (the summary's count)
// FSDP2 states (core::fsdp2_state_bytes; docs/program.md, "FSDP2"): shard ceil(P / 2) =
// 22,022,400; fp8 keeps bf16 weights beside an fp32 master: W = G = 4 B (the fp32 original),
// optimizer K - master = 12 - 4 = 8 B: 22,022,400 x 16 = 352,358,400 B.
// FP8 weight copies (docs/fp8.md, "Memory"): the blocks' linear layers, 4 x 2,818,048 =
// 11,272,192 parameters, delayed scaling keeps 2 copies (FP8 + transpose) x 1 B: 22,544,384 B,
// not sharded (cast from the gathered weights).
// The LM head's logits, held with the one pass in flight (pp 1): b s V e = 4 x 1024 x 32,000 x
// 2 B = 262,144,000 B.
// Bound: W + G + K + C + A + L, above the optimizer step's W + G + K + C (one step: the
// steady-state projection the peak and the verdict read puts the optimizer state beside the
// activations, docs/sweep.md, "Bounds").
TEST_CASE("the memory bound of an FP8 FSDP2 layout is the hand-derived one and prunes it",
          "[sweep][tune][knobs]") {
  const std::string path = test::scenario_path("transformer_tiny_1xh200.json");
  const nlohmann::json doc = doc_of(path);
  const std::vector<std::string> base{
      "cluster.gpu=H100-SXM5-80GB", "cluster.gpus_per_node=2", "training.steps=1",
      "strategy={\"kind\":\"fsdp\",\"fsdp_version\":2,\"recompute\":\"full\"}"};
  std::vector<std::string> fp8 = base;
  fp8.push_back("training.precision=fp8");
  const core::Scenario s8 = run::load_scenario_document(doc, path, fp8);
  const sweep::MemoryBound b8 = sweep::memory_bound(s8, 2);
  CHECK(b8.states == 352358400.0);
  CHECK(b8.fp8_copies == 22544384.0);
  const core::Segment all{0, static_cast<int>(s8.model.layers.size())};
  CHECK(b8.activations == core::stored_activation_bytes_per_sample(s8.model, all, 1, false,
                                                                   core::RecomputeMode::kFull, 1) *
                              4);  // micro-batch 8 / dp 2
  CHECK(b8.logits == 262144000.0);
  CHECK(b8.bytes == 352358400.0 + 22544384.0 + b8.activations + b8.logits);
  // bf16: the same states (fp32 original and master are one copy), no FP8 copies.
  const sweep::MemoryBound b16 =
      sweep::memory_bound(run::load_scenario_document(doc, path, base), 2);
  CHECK(b16.states == 352358400.0);
  CHECK(b16.fp8_copies == 0);
  REQUIRE(b16.bytes < b8.bytes);

  // A GPU whose usable memory lies between the two: tune keeps the bf16 FSDP2 layout and rejects
  // the FP8 one without simulating it.
  const double usable = (b16.bytes + b8.bytes) / 2;
  char gpu[200];
  std::snprintf(gpu, sizeof gpu, "cluster.gpu={\"base\":\"H100-SXM5-80GB\",\"memory_gib\":%.9f}",
                usable / kGiB);
  sweep::TuneOptions o;
  o.threads = 2;
  o.space.precisions = {"bf16", "fp8"};
  o.space.sharding = {"fsdp2"};
  o.space.recompute = {"full"};
  o.micro_batch_sizes = {4};
  const std::vector<std::string> sets{"cluster.gpus_per_node=2", "training.steps=1", gpu,
                                      "cluster.reserve={\"cuda_context_mb\":0.001,\"nccl_buffers_"
                                      "mb\":0.001,\"workspace_mb\":0.001}"};
  const sweep::TuneResult r = sweep::tune(doc, path, sets, o);
  bool seen8 = false, seen16 = false;
  for (const sweep::TuneCandidate& c : r.candidates) {
    if (c.label.find("fsdp2 rc full") == std::string::npos) continue;  // the default reshard
    INFO(c.label << ": " << c.reason);
    if (c.label.find("fp8") != std::string::npos) {
      seen8 = true;
      CHECK(c.verdict == sweep::TuneVerdict::kCannotFit);
      CHECK(c.model_states_gib * kGiB == Approx(b8.bytes).epsilon(1e-12));
    } else {
      seen16 = true;
      CHECK(c.verdict != sweep::TuneVerdict::kCannotFit);
    }
  }
  CHECK(seen8);
  CHECK(seen16);
}

// [SECTION] Tune ---------------------------------------------------------------------------------

// transformer_tiny on 4 H100s (so that dp 2 x tp 2 has a rank order to choose) with every new knob:
// the best layout is a fitting one whose knobs the table and the JSON report name, and the bounds
// are bounds for every simulated layout (the memory bound never above the simulated peak, the
// compute bound never above the step time).
TEST_CASE("tune with the new knobs returns a valid best layout and reports its knobs",
          "[sweep][tune][knobs]") {
  const std::string path = test::scenario_path("transformer_tiny_1xh200.json");
  const nlohmann::json doc = doc_of(path);
  sweep::TuneOptions o;
  o.threads = 2;
  o.space.attention = {"all"};
  o.space.precisions = {"bf16", "fp8"};
  o.space.compile = {0, 1};
  o.space.sharding = {"zero", "distopt", "fsdp1", "fsdp2"};
  o.space.sequence_parallel = true;
  o.space.recompute = {"none", "selective_op", "full:2"};
  o.space.rank_orders = {"tp-dp-pp", "dp-tp-pp"};
  o.space.uneven_stages = true;
  o.micro_batch_sizes = {2, 4};
  const std::vector<std::string> sets{"cluster.gpu=H100-SXM5-80GB", "cluster.gpus_per_node=4"};
  const sweep::TuneResult r = sweep::tune(doc, path, sets, o);
  REQUIRE(r.complete);
  const std::vector<std::size_t> rank = r.ranking();
  REQUIRE_FALSE(rank.empty());
  const sweep::TuneCandidate& best = r.candidates[rank.front()];
  INFO(best.label);
  // Re-evaluated from its --set values alone, the best layout gives the same figures.
  const sweep::VariantResult again = sweep::evaluate_variant(doc, path, best.sets);
  REQUIRE(again.status == sweep::VariantStatus::kOk);
  CHECK(again.step_time_s == best.result.step_time_s);
  for (const char* k :
       {"model.transformer.attention.kernel", "training.precision", "training.compile", "strategy"})
    CHECK(best.knobs.contains(k));
  CHECK(best.label.find(" attn ") != std::string::npos);
  std::size_t fsdp2 = 0, sp = 0, order = 0, split = 0, sel_op = 0;
  for (const sweep::TuneCandidate& c : r.candidates) {
    fsdp2 += c.label.find("fsdp2") != std::string::npos;
    sp += c.label.find(" sp") != std::string::npos;
    order += c.label.find("dp-tp-pp") != std::string::npos;
    split += c.label.find("split") != std::string::npos;
    sel_op += c.label.find("selective_op") != std::string::npos;
    if (c.verdict != sweep::TuneVerdict::kFits && c.verdict != sweep::TuneVerdict::kOom) continue;
    INFO(c.label);
    CHECK(c.model_states_gib <= c.result.peak_gib);
    CHECK(c.lb_step_s <= c.result.step_time_s);
  }
  CHECK(fsdp2 > 0);
  CHECK(sp > 0);
  CHECK(order > 0);
  CHECK(split == 0);  // pp 2 divides 4 blocks: no uneven split is needed
  CHECK(sel_op > 0);
  const nlohmann::json j = sweep::tune_report_json(r, 3);
  REQUIRE(j["ranking"].size() >= 1);
  CHECK(j["ranking"][0]["label"] == best.label);
  CHECK(j["ranking"][0]["knobs"] == best.knobs);
  std::ostringstream out;
  sweep::print_tune_report(r, 3, 0, out);
  CHECK(out.str().find(best.label) != std::string::npos);
}

// A mixture of experts (the tiny scenario with 8 experts of 704, 2 per token) on 4 GPUs: tune tries
// ep in {1, 2, 4} (the divisors of 8 that divide tp x dp), each only where the parser takes it:
// no ep under ZeRO 2 / 3, tp > 1 only with sequence parallelism and ep > 1 (docs/program.md,
// "Expert parallel"); so no candidate is refused by the parser for its expert parallelism.
TEST_CASE("tune searches expert parallelism for a mixture of experts", "[sweep][tune][knobs]") {
  const std::string path = test::scenario_path("transformer_tiny_1xh200.json");
  const nlohmann::json doc = doc_of(path);
  sweep::TuneOptions o;
  o.threads = 2;
  o.space.recompute = {"none"};
  o.micro_batch_sizes = {1};
  const std::vector<std::string> sets{
      "cluster.gpu=H100-SXM5-80GB", "cluster.gpus_per_node=4",
      R"(model.transformer.moe={"experts": 8, "top_k": 2, "expert_ffn_hidden": 704})"};
  const sweep::TuneResult r = sweep::tune(doc, path, sets, o);
  REQUIRE(r.complete);
  std::map<int, std::size_t> by_ep;
  for (const sweep::TuneCandidate& c : r.candidates) {
    INFO(c.label << ": " << c.reason);
    const std::size_t at = c.label.find(" ep ");
    const int ep = at == std::string::npos ? 1 : std::stoi(c.label.substr(at + 4));
    ++by_ep[ep];
    // tp 4 over 2 key/value heads is refused whatever ep is (the parser's tp rule); nothing is
    // refused for its experts.
    if (c.verdict == sweep::TuneVerdict::kInvalid) {
      CHECK(c.reason.find("kv_heads") != std::string::npos);
      CHECK(c.reason.find("ep") == std::string::npos);
      CHECK(c.reason.find("experts") == std::string::npos);
    }
    if (c.label.find("tp 1 ") == std::string::npos && c.label.rfind("ddp", 0) != 0) {
      CHECK(c.label.find(" sp") != std::string::npos);
      CHECK(ep > 1);
    }
    // The memory bound is a bound: it counts each rank's E / ep experts (sharded over edp), as
    // the lowering allocates them, so it never exceeds a simulated peak.
    if (c.verdict == sweep::TuneVerdict::kFits || c.verdict == sweep::TuneVerdict::kOom)
      CHECK(c.model_states_gib <= c.result.peak_gib);
  }
  CHECK(by_ep.size() == 3);
  CHECK(by_ep.count(2) == 1);
  CHECK(by_ep.count(4) == 1);
  const std::vector<std::size_t> rank = r.ranking();
  REQUIRE_FALSE(rank.empty());
  const sweep::TuneCandidate& best = r.candidates[rank.front()];
  const sweep::VariantResult again = sweep::evaluate_variant(doc, path, best.sets);
  REQUIRE(again.status == sweep::VariantStatus::kOk);
  CHECK(again.step_time_s == best.result.step_time_s);
}

// 4 blocks over 3 stages: Megatron's first/last split 1 / 1 leaves 2 on the middle stage; 2 / 2
// leaves 0, so F = 1 (the smallest fullest stage: max(1, 2) = 2).
TEST_CASE("tune's uneven stages use Megatron's first/last split where pp does not divide",
          "[sweep][tune][knobs]") {
  const std::string path = test::scenario_path("transformer_tiny_1xh200.json");
  sweep::TuneOptions o;
  o.threads = 2;
  o.space.uneven_stages = true;
  o.space.recompute = {"none"};
  o.micro_batch_sizes = {1};
  const sweep::TuneResult r =
      sweep::tune(doc_of(path), path, {"cluster.gpu=H100-SXM5-80GB", "cluster.gpus_per_node=3"}, o);
  std::size_t split = 0;
  for (const sweep::TuneCandidate& c : r.candidates) {
    if (c.label.find("pp 3") == std::string::npos) continue;
    INFO(c.label << ": " << c.reason);
    CHECK(c.label.find("split 1/1") != std::string::npos);
    CHECK(c.verdict != sweep::TuneVerdict::kInvalid);
    ++split;
  }
  CHECK(split > 0);
}

// The GPT-3 175B tune of docs/sweep.md: the new options default off, so its optimum is the one
// found before them (dp 8 tp 8 pp 16, micro-batch 1, interleaved, ZeRO 1, no recompute).
TEST_CASE("tune's GPT-3 175B optimum is unchanged by the new knobs' defaults", "[sweep][tune]") {
  const std::string path = test::scenario_path("gpt3_175b_1024xa100_3d.json");
  sweep::TuneOptions o;
  o.threads = 2;
  const sweep::TuneResult r = sweep::tune(doc_of(path), path, {}, o);
  REQUIRE_FALSE(r.ranking().empty());
  CHECK(r.candidates[r.ranking().front()].label ==
        "dp 8 tp 8 pp 16 mbs 1 interleaved zero 1 rc none");
  CHECK(r.candidates.size() == 636);  // the search space of docs/sweep.md, "Speed"
}

TEST_CASE("simrun tune refuses bad knob values naming the option (exit 2)", "[sweep][tune][cli]") {
  const std::string tiny = test::scenario_path("transformer_tiny_1xh200.json");
  const test::CliResult a = test::run_simrun({"tune", tiny, "--precisions", "bf16,fp9"});
  CHECK(a.code == 2);
  CHECK(a.err.find("--precisions") != std::string::npos);
  const test::CliResult b = test::run_simrun({"tune", tiny, "--recompute", "full:0"});
  CHECK(b.code == 2);
  CHECK(b.err.find("--recompute") != std::string::npos);
  const test::CliResult t = test::run_simrun({"tune", tiny, "--tp-overlap", "off,userbuffer"});
  CHECK(t.code == 2);
  CHECK(t.err.find("--tp-overlap") != std::string::npos);
  // The attention kernel is a model.transformer key: a model.gpt scenario has none.
  const test::CliResult c = test::run_simrun(
      {"tune", test::scenario_path("gpt2_small_8xa100.json"), "--attention", "flash2"});
  CHECK(c.code == 2);
  CHECK(c.err.find("--attention") != std::string::npos);
  CHECK(std::count(c.err.begin(), c.err.end(), '\n') == 1);
}

TEST_CASE("simrun tune -o writes the report with the best layout's knobs", "[sweep][tune][cli]") {
  const fs::path d = test::fresh_dir("tune", "json");
  const std::string out = (d / "t.json").string();
  const test::CliResult r =
      test::run_simrun({"tune", test::scenario_path("transformer_tiny_1xh200.json"), "-q", "-j",
                        "2", "--precisions", "bf16,fp8", "--compile", "off,on", "-o", out});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const nlohmann::json j = doc_of(out);
  CHECK(j["format"] == "csim-tune");
  REQUIRE_FALSE(j["ranking"].empty());
  CHECK(j["ranking"][0]["knobs"].contains("training.precision"));
  CHECK(j["ranking"][0]["knobs"].contains("training.compile"));
}

TEST_CASE("simrun tune --timeline writes the best layout's trace, and only on request",
          "[sweep][tune][cli]") {
  // The trace is the op-level run of the layout the report ranks first: a Chrome trace with
  // events, whose metadata names the tuned scenario.
  const fs::path d = test::fresh_dir("tune", "timeline");
  const std::string trace = (d / "best.json").string(), report = (d / "t.json").string();
  const std::string tiny = test::scenario_path("transformer_tiny_1xh200.json");
  const test::CliResult r =
      test::run_simrun({"tune", tiny, "-q", "-j", "2", "-o", report, "--timeline", trace});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  REQUIRE(fs::exists(trace));
  const nlohmann::json t = doc_of(trace);
  REQUIRE(t.contains("traceEvents"));
  CHECK_FALSE(t["traceEvents"].empty());
  const nlohmann::json rep = doc_of(report);
  REQUIRE_FALSE(rep["ranking"].empty());
  INFO(t.dump().substr(0, 400));
  CHECK(t.dump().find("transformer_tiny_1xh200") != std::string::npos);
  // Without --timeline nothing but the report is written.
  const fs::path e = test::fresh_dir("tune", "no_timeline");
  const test::CliResult q =
      test::run_simrun({"tune", tiny, "-q", "-j", "2", "-o", (e / "t.json").string()});
  REQUIRE(q.code == 0);
  std::size_t files = 0;
  for (const auto& f : fs::directory_iterator(e)) files += f.is_regular_file();
  CHECK(files == 1);
}

// --tp-overlap off,on (strategy.tp_comm_overlap; docs/sweep.md, "Tune: the other knobs") on the
// tiny scenario over 4 H100s, with and without sequence parallelism: the overlap changes the
// Program only where tp > 1 without sequence parallelism (core/lowering/tp_comm_overlap.cpp,
// overlaps_wgrad), so exactly those candidates of the search without it gain a twin " tpo" whose
// strategy carries tp_comm_overlap true; the overlap neither saves memory nor FLOPs, so the twin
// has the same memory and compute bounds (the bounds prune it exactly as they prune its plain
// twin).
TEST_CASE("tune's TP overlap dimension doubles exactly the tp > 1 layouts without SP",
          "[sweep][tune][knobs]") {
  const std::string path = test::scenario_path("transformer_tiny_1xh200.json");
  const nlohmann::json doc = doc_of(path);
  sweep::TuneOptions o;
  o.threads = 2;
  o.space.sequence_parallel = true;
  o.space.recompute = {"none"};
  o.micro_batch_sizes = {2};
  const std::vector<std::string> sets{"cluster.gpu=H100-SXM5-80GB", "cluster.gpus_per_node=4"};
  const sweep::TuneResult plain = sweep::tune(doc, path, sets, o);
  o.space.tp_comm_overlap = {0, 1};
  const sweep::TuneResult with = sweep::tune(doc, path, sets, o);
  std::map<std::string, const sweep::TuneCandidate*> by_label;
  for (const sweep::TuneCandidate& c : with.candidates) by_label[c.label] = &c;
  std::size_t eligible = 0;
  for (const sweep::TuneCandidate& c : plain.candidates) {
    INFO(c.label);
    REQUIRE(by_label.count(c.label) == 1);
    const bool tp_over_1 =
        c.label.find(" tp 1 ") == std::string::npos && c.label.rfind("ddp", 0) != 0;
    const bool sp = c.label.find(" sp") != std::string::npos;
    const auto twin = by_label.find(c.label + " tpo");
    CHECK((twin != by_label.end()) == (tp_over_1 && !sp));
    if (twin == by_label.end()) continue;
    ++eligible;
    CHECK(twin->second->knobs["strategy"].value("tp_comm_overlap", false));
    CHECK(twin->second->model_states_gib == c.model_states_gib);
    CHECK(twin->second->lb_step_s == c.lb_step_s);
  }
  CHECK(eligible > 0);
  CHECK(with.candidates.size() == plain.candidates.size() + eligible);
}

// --sharding zero,distopt under kind 3d: Megatron's distributed optimizer is zero_stage 1 (the
// parser sets it; the lowering reads the flag only for kind zero), so every distopt layout is a
// duplicate of its "zero 1" twin, not simulated: the candidates left to bound and simulate are
// exactly those of --sharding zero alone, and the report counts the duplicates.
TEST_CASE("tune counts distopt layouts as duplicates of their zero 1 twins", "[sweep][tune]") {
  const std::string path = test::scenario_path("transformer_tiny_1xh200.json");
  const nlohmann::json doc = doc_of(path);
  sweep::TuneOptions o;
  o.threads = 2;
  o.space.recompute = {"none"};
  o.micro_batch_sizes = {2};
  const std::vector<std::string> sets{"cluster.gpu=H100-SXM5-80GB", "cluster.gpus_per_node=4"};
  const sweep::TuneResult zero = sweep::tune(doc, path, sets, o);
  o.space.sharding = {"zero", "distopt"};
  const sweep::TuneResult both = sweep::tune(doc, path, sets, o);
  std::size_t distopt = 0, kept = 0;
  for (const sweep::TuneCandidate& c : both.candidates) {
    INFO(c.label << ": " << c.reason);
    const bool is_distopt = c.label.find("distopt") != std::string::npos;
    distopt += is_distopt;
    CHECK((c.verdict == sweep::TuneVerdict::kDuplicate) == is_distopt);
    if (!is_distopt) {
      ++kept;
      continue;
    }
    std::string twin = c.label;
    twin.replace(twin.find("distopt"), 7, "zero 1");
    CHECK(c.reason.find(twin) != std::string::npos);
  }
  CHECK(distopt > 0);
  CHECK(kept == zero.candidates.size());
  CHECK(both.simulated == zero.simulated);
  std::ostringstream out;
  sweep::print_tune_report(both, 1, 0, out);
  CHECK(out.str().find(std::to_string(distopt) + " duplicates") != std::string::npos);
  CHECK(sweep::tune_report_json(both, 1)["duplicate"] == distopt);
}

// The duplicates are found on the parsed strategies (core::strategy_as_lowered): under kind 3d
// the distributed optimizer is the zero_stage 1 the parser gives it (the lowering reads the flag
// only through megatron_states, true for 3d anyway), so the two spellings are one strategy; under
// kind zero the flag picks Megatron's model states over DeepSpeed's (optimizer_memory.cpp), so
// there the two stay apart, as do two strategies differing in any other field.
TEST_CASE("tune's duplicates compare the parsed strategies", "[sweep][tune]") {
  const std::string path = test::scenario_path("transformer_tiny_1xh200.json");
  const nlohmann::json doc = doc_of(path);
  const auto lowered = [&](const std::string& strategy) {
    return core::strategy_as_lowered(run::load_scenario_document(
        doc, path,
        {"cluster.gpu=H100-SXM5-80GB", "cluster.gpus_per_node=4", "strategy=" + strategy}));
  };
  CHECK(lowered(R"({"kind": "3d", "dp": 2, "tp": 2, "distributed_optimizer": true})") ==
        lowered(R"({"kind": "3d", "dp": 2, "tp": 2, "zero_stage": 1})"));
  CHECK_FALSE(lowered(R"({"kind": "zero", "dp": 4, "distributed_optimizer": true})") ==
              lowered(R"({"kind": "zero", "dp": 4, "zero_stage": 1})"));
  CHECK_FALSE(lowered(R"({"kind": "3d", "dp": 2, "tp": 2, "zero_stage": 1})") ==
              lowered(R"({"kind": "3d", "dp": 2, "tp": 2, "zero_stage": 1, "recompute": "full"})"));
}
