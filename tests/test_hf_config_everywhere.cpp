// --hf-config on every command that takes a scenario (run::ScenarioLoader::from_file's hf_config;
// docs/scenario.md, "model.hf_config"): simrun sweep, tune, hpo and compare give with
// `SCENARIO --hf-config FILE` the figures they give for SCENARIO with "model": {"hf_config": FILE}
// written in the file; a missing config and a mixture of experts exit 2 naming the config file
// before anything runs.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/simrun_cli_support.hpp"
#include "tests/test_support.hpp"

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using csim::test::CliResult;
using csim::test::run_simrun;

// gpt2_small_1xh200.json (GPT-2 small by model.gpt, seq_len 1024, one H200) and Pythia 1.4B's
// config.json, a different model (24 blocks of hidden 2048 against GPT-2 small's 12 of 768), so
// that a command that ignored --hf-config would show other figures.
const std::string kScenario = "gpt2_small_1xh200.json";
const std::string kConfig = "scenarios/models/pythia_1_4b.json";

// The same scenario with the config written in it: the model --hf-config makes
// (core::hf_config_model_override keeps the scenario's seq_len, 1024, and it has no
// python_hooks), the config's path absolute so that it resolves from the temporary folder.
std::string scenario_with_config(const fs::path& dir) {
  json doc = json::parse(csim::test::read_file(csim::test::scenario_path(kScenario)));
  doc["model"] = {{"hf_config", csim::test::repo_path(kConfig)}, {"seq_len", 1024}};
  const fs::path path = dir / "with_config.json";
  std::ofstream(path) << doc.dump(2) << "\n";
  return path.string();
}

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The three runs of one command: the scenario with --hf-config, the scenario with the config in
// its file, and the scenario alone (its own model).
struct Three {
  CliResult flag, file, own;
};
Three run_three(const std::string& command, const std::vector<std::string>& rest,
                const fs::path& dir, const std::string& out_name) {
  const std::string scenario = csim::test::scenario_path(kScenario);
  const std::string in_file = scenario_with_config(dir);
  const std::string config = csim::test::repo_path(kConfig);
  Three t;
  t.flag = run_simrun(
      with({command, scenario, "--hf-config", config}, with(rest, {out_name + ".flag"})));
  t.file = run_simrun(with({command, in_file}, with(rest, {out_name + ".file"})));
  t.own = run_simrun(with({command, scenario}, with(rest, {out_name + ".own"})));
  INFO(t.flag.err << t.file.err << t.own.err);
  REQUIRE(t.flag.code == 0);
  REQUIRE(t.file.code == 0);
  REQUIRE(t.own.code == 0);
  return t;
}

json read_json(const std::string& path) {
  return json::parse(csim::test::read_file(path));
}

}  // namespace

TEST_CASE("simrun sweep --hf-config: the rows of the scenario with model.hf_config",
          "[hf_config][cli]") {
  const fs::path dir = csim::test::fresh_dir("csim_hf_every_", "sweep");
  const std::string out = (dir / "rows").string();
  // Two variants (batches of 4 and 8): each row's step time, memory and MFU come from the model,
  // so equal rows mean the same model.
  run_three("sweep", {"--grid", "training.global_batch=4,8", "-q", "-j", "1", "-o"}, dir, out);
  const json flag = read_json(out + ".flag"), file = read_json(out + ".file"),
             own = read_json(out + ".own");
  REQUIRE(flag.at("rows").size() == 2);
  for (const json& row : flag.at("rows")) CHECK(row.at("status") == "ok");
  CHECK(flag.at("rows") == file.at("rows"));
  CHECK(flag.at("rows") != own.at("rows"));
  fs::remove_all(dir);
}

TEST_CASE("simrun tune --hf-config: the ranking of the scenario with model.hf_config",
          "[hf_config][cli]") {
  const fs::path dir = csim::test::fresh_dir("csim_hf_every_", "tune");
  const std::string out = (dir / "tune").string();
  run_three("tune", {"-q", "-j", "1", "--top", "3", "-o"}, dir, out);
  // The layouts' labels and figures; the sets differ by design (--hf-config's "model={...}"
  // override is one of them).
  auto figures = [](const json& report) {
    json rows = json::array();
    for (const json& r : report.at("ranking"))
      rows.push_back({r.at("label"), r.at("step_time_ms"), r.at("peak_gib"), r.at("mfu")});
    return rows;
  };
  const json flag = read_json(out + ".flag"), file = read_json(out + ".file"),
             own = read_json(out + ".own");
  REQUIRE_FALSE(figures(flag).empty());
  CHECK(figures(flag) == figures(file));
  CHECK(figures(flag) != figures(own));
  fs::remove_all(dir);
}

TEST_CASE("simrun hpo --hf-config: the trials of the scenario with model.hf_config",
          "[hf_config][cli]") {
  const fs::path dir = csim::test::fresh_dir("csim_hf_every_", "hpo");
  const std::string out = (dir / "hpo").string();
  // Two trials, grid search over the batch: each trial's iteration time is a simulated step.
  run_three("hpo",
            {"--space", "training.global_batch=4,8", "--trials", "2", "--search", "grid",
             "--scheduler", "fifo", "--max-t", "1", "--set", "training.steps=1", "--results"},
            dir, out);
  auto times = [](const json& results) {
    json t = json::array();
    for (const json& r : results.at("trials")) t.push_back(r.at("iteration_time_s"));
    return t;
  };
  const json flag = read_json(out + ".flag"), file = read_json(out + ".file"),
             own = read_json(out + ".own");
  REQUIRE(times(flag).size() == 2);
  CHECK(times(flag) == times(file));
  CHECK(times(flag) != times(own));
  fs::remove_all(dir);
}

TEST_CASE("simrun compare --hf-config: the simulated side of the scenario with model.hf_config",
          "[hf_config][cli]") {
  const fs::path dir = csim::test::fresh_dir("csim_hf_every_", "compare");
  const std::string out = (dir / "cmp").string();
  // The stand-in real run at 1/1000 of the simulated durations; the simulated columns (GPU, class,
  // ops, sim_ms) of the per-class table and the whole run's simulated time are the model's.
  const Three t = run_three("compare",
                            {"--backend", "standin", "--time-scale", "0.001", "--set",
                             "training.steps=1", "--largest", "0", "-o"},
                            dir, out);
  auto simulated = [](const std::string& printed) {
    std::istringstream in(printed);
    std::string line, kept;
    while (std::getline(in, line)) {
      if (line.rfind("whole run: sim ", 0) == 0) kept += line.substr(0, line.find(", real")) + "\n";
      std::istringstream cols(line);
      std::string gpu, cls, ops, sim_ms;
      if (cols >> gpu >> cls >> ops >> sim_ms && gpu == "0")
        kept += cls + " " + ops + " " + sim_ms + "\n";
    }
    return kept;
  };
  REQUIRE_FALSE(simulated(t.flag.out).empty());
  CHECK(simulated(t.flag.out) == simulated(t.file.out));
  CHECK(simulated(t.flag.out) != simulated(t.own.out));
  fs::remove_all(dir);
}

TEST_CASE("simrun --hf-config everywhere: a missing config exits 2 naming it, on every command",
          "[hf_config][cli]") {
  const fs::path dir = csim::test::fresh_dir("csim_hf_every_", "missing");
  const std::string missing = (dir / "nosuch.json").string();
  const std::string scenario = csim::test::scenario_path(kScenario);
  // mlp_1xh200.json has no seq_len: before the loader read the config first, --hf-config with a
  // missing file was reported as model.seq_len missing.
  const std::string no_seq_len = csim::test::scenario_path("mlp_1xh200.json");
  const std::vector<std::vector<std::string>> commands = {
      {scenario},
      {no_seq_len},
      {"sweep", scenario, "--grid", "training.steps=1,2"},
      {"tune", scenario},
      {"hpo", scenario, "--space", "training.global_batch=4,8", "--trials", "2"},
      {"compare", scenario, "--backend", "standin"},
  };
  for (const auto& c : commands) {
    const CliResult r = run_simrun(with(c, {"--hf-config", missing}));
    INFO(c.front() << ": " << r.err);
    CHECK(r.code == 2);
    CHECK(
        r.err.find(missing + ": cannot read the Hugging Face config: No such file or directory") !=
        std::string::npos);
    CHECK(r.err.find("seq_len") == std::string::npos);
    // A folder (a model's repository checked out) is named as one, not as malformed JSON.
    const CliResult d = run_simrun(with(c, {"--hf-config", dir.string()}));
    CHECK(d.code == 2);
    CHECK(d.err.find(dir.string() + ": is a directory, not a Hugging Face config.json") !=
          std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE(
    "simrun --hf-config everywhere: mixture-of-experts configs are refused as MoE, naming the key",
    "[hf_config][cli]") {
  const std::string scenario = csim::test::scenario_path(kScenario);
  struct Case {
    std::string file, key, message;
  };
  // tests/data/hf/README.md: OLMoE by its architecture; an unknown architecture by its expert
  // count (it would otherwise be "not a supported architecture"); experts kept in text_config.
  const std::vector<Case> cases = {
      {"tests/data/hf/olmoe_like.json", "architectures[0]",
       "OlmoeForCausalLM is a mixture-of-experts model: not modelled yet (the mixtures modelled: "
       "MixtralForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM)"},
      {"tests/data/hf/unknown_arch_with_experts.json", "num_experts",
       "64 experts make a mixture-of-experts model: not modelled yet (the mixtures modelled: "
       "MixtralForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM)"},
      {"tests/data/hf/nested_text_config_experts.json", "text_config.num_local_experts",
       "16 experts make a mixture-of-experts model: not modelled yet (the mixtures modelled: "
       "MixtralForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM)"},
  };
  for (const Case& c : cases) {
    const std::string cfg = csim::test::repo_path(c.file);
    for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
             {scenario}, {"sweep", scenario, "--grid", "training.steps=1,2"}}) {
      const CliResult r = run_simrun(with(cmd, {"--hf-config", cfg}));
      INFO(c.file << ": " << r.err);
      CHECK(r.code == 2);
      CHECK(r.err.find(cfg + ": " + c.key + ": " + c.message) != std::string::npos);
      CHECK(r.err.find("not a supported architecture") == std::string::npos);
    }
  }
}
