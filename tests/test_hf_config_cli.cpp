// simrun --hf-config FILE (tools/simrun_app.cpp): the scenario's model replaced by a Hugging Face
// config.json, the scenario's seq_len kept, --set applied after it; a bad config exits 2 with one
// line naming the config file, writing nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/simrun_cli_support.hpp"
#include "tests/test_support.hpp"

namespace {

namespace fs = std::filesystem;

}  // namespace

TEST_CASE("simrun --hf-config replaces the model and keeps seq_len", "[hf_config][cli]") {
  const fs::path dir = csim::test::fresh_dir("csim_hf_cli_", "run");
  const std::string summary = (dir / "summary.json").string();
  // gpt2_small_1xh200.json is GPT-2 small by model.gpt (seq_len 1024): the same model from its
  // config.json runs (its parameter count is test_hf_config.cpp's), and the kept seq_len is what
  // a later --set changes.
  const csim::test::CliResult r =
      csim::test::run_simrun({csim::test::scenario_path("gpt2_small_1xh200.json"), "-q",
                              "--hf-config", csim::test::repo_path("scenarios/models/gpt2.json"),
                              "--set", "training.steps=2", "--summary", summary});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(nlohmann::json::parse(csim::test::read_file(summary)).at("mfu").get<double>() > 0);
  // --set model.seq_len after --hf-config: past GPT-2's 1024 positions, refused.
  const csim::test::CliResult bad = csim::test::run_simrun(
      {csim::test::scenario_path("gpt2_small_1xh200.json"), "-q", "--hf-config",
       csim::test::repo_path("scenarios/models/gpt2.json"), "--set", "model.seq_len=2048"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("model.seq_len: seq_len 2048 is longer than the 1024 learned positions") !=
        std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("simrun --hf-config: a config that is not JSON exits 2 naming it", "[hf_config][cli]") {
  const fs::path dir = csim::test::fresh_dir("csim_hf_cli_", "bad");
  const std::string cfg = (dir / "config.json").string();
  {
    std::ofstream out(cfg);
    out << "not json\n";
  }
  const std::string trace = (dir / "t.json").string();
  const csim::test::CliResult r = csim::test::run_simrun(
      {csim::test::scenario_path("gpt2_small_1xh200.json"), "-q", "--hf-config", cfg, "-o", trace});
  CHECK(r.code == 2);
  CHECK(r.err.find("simrun: " + cfg + ": malformed JSON at line 1") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(trace));
  // A mixture of experts: the field named.
  {
    std::ofstream out(cfg);
    out << R"({"architectures": ["DeepseekV2ForCausalLM"], "n_routed_experts": 160})";
  }
  const csim::test::CliResult moe = csim::test::run_simrun(
      {csim::test::scenario_path("gpt2_small_1xh200.json"), "-q", "--hf-config", cfg, "-o", trace});
  CHECK(moe.code == 2);
  CHECK(moe.err.find(cfg + ": architectures[0]: DeepseekV2ForCausalLM is a mixture-of-experts "
                           "model: not modelled yet (the mixtures modelled: MixtralForCausalLM, "
                           "Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, GptOssForCausalLM)") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(trace));
  fs::remove_all(dir);
}
