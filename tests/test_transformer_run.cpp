// model.transformer end to end: simrun runs the bundled tiny scenario and the summary carries the
// general block's figures (docs/summary.md, "Tokens and FLOPs per token"); model.gpt's does not.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/simrun_cli_support.hpp"
#include "tests/test_support.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("simrun runs transformer_tiny_1xh200 and reports tokens and FLOPs per token",
          "[transformer][cli]") {
  const fs::path d = csim::test::fresh_dir("csim_transformer_", "tiny");
  const csim::test::CliResult r =
      csim::test::run_simrun({csim::test::scenario_path("transformer_tiny_1xh200.json"),
                              "--summary", (d / "s.json").string()});
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("tokens/s:") != std::string::npos);
  CHECK(r.out.find("44044800 parameters") != std::string::npos);
  const json s = json::parse(csim::test::read_file((d / "s.json").string()));
  REQUIRE(s.contains("transformer"));
  const json& t = s.at("transformer");
  // Parameters: per block q 512^2 = 262,144, k and v 2 x 512 x 128 = 131,072, o 262,144, SwiGLU
  // 3 x 512 x 1408 = 2,162,688, two RMSNorms 1,024 -> 2,819,072; 4 blocks 11,276,288; untied
  // embeddings 2 x 32000 x 512 = 32,768,000; final norm 512 -> 44,044,800
  CHECK(t.at("params").get<long long>() == 44044800LL);
  // tokens per step = global batch 8 x seq 1024
  CHECK(t.at("tokens_per_step").get<long long>() == 8192);
  const double step = s.at("step_time_s").get<double>();
  CHECK(t.at("tokens_per_s").get<double>() == Approx(8192.0 / step));
  CHECK(t.at("tokens_per_s_per_gpu").get<double>() == Approx(8192.0 / step));  // one GPU
  // Megatron: 6 l [h (a d + 2 g d) + a d s + a d h] + 6 l h f 3 + 6 h Vp
  //   = 24 x (393,216 + 524,288 + 262,144) + 24 x 2,162,688 + 6 x 512 x 32000
  //   = 28,311,552 + 51,904,512 + 98,304,000 = 178,520,064
  const json& f = t.at("flops_per_token");
  CHECK(f.at("megatron").get<double>() == Approx(178520064.0));
  CHECK(f.at("model").get<double>() == Approx(178520064.0));  // no window: Megatron's
  // 6N + attention = 6 x 44,044,800 + 12 x 4 x 8 x 64 x 1024 = 264,268,800 + 25,165,824
  CHECK(f.at("six_n_attention").get<double>() == Approx(289434624.0));
  // torchtitan = 6 (N - 32000 x 512) + 25,165,824 = 6 x 27,660,800 + 25,165,824 = 191,130,624
  CHECK(f.at("torchtitan").get<double>() == Approx(191130624.0));
  // MFU's numerator is the model count: tflops_per_gpu = 178,520,064 x 8192 / step / 1e12
  CHECK(s.at("tflops_per_gpu").get<double>() == Approx(178520064.0 * 8192 / step / 1e12));
  fs::remove_all(d);
}

TEST_CASE("a model.gpt summary has no transformer figures", "[transformer][cli]") {
  const fs::path d = csim::test::fresh_dir("csim_transformer_", "gpt");
  const csim::test::CliResult r =
      csim::test::run_simrun({csim::test::scenario_path("gpt2_small_1xh200.json"), "-q",
                              "--summary", (d / "s.json").string()});
  REQUIRE(r.code == 0);
  CHECK_FALSE(json::parse(csim::test::read_file((d / "s.json").string())).contains("transformer"));
  fs::remove_all(d);
}
