// Library kernel names (profiler/library_kernel_names.hpp; docs/trace-format.md, "Library kernel
// names"): simulated kernels named as cuBLAS, FlashAttention, ATen and Transformer Engine name
// theirs, from what a simulated trace holds (event name, kind, dtype, phase, metadata
// "kernel_names"); classified by the same name rules as a real trace's; the per-rank files
// carrying those names with the layer path in arg "op".
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>

#include "core/scenario/scenario_parser.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/library_kernel_names.hpp"
#include "profiler/op_classes.hpp"
#include "profiler/per_rank_traces.hpp"
#include "run/run.hpp"
#include "test_support.hpp"

using namespace csim;

namespace {

std::string str_arg(const prof::TraceEvent& e, const std::string& key) {
  for (const prof::Arg& a : e.args)
    if (a.key == key)
      if (const std::string* s = std::get_if<std::string>(&a.value)) return *s;
  return "";
}

// Every compute kernel of one step of SCENARIO by its event name: the library kernel's name.
std::map<std::string, std::string> names_of(const std::string& scenario) {
  const prof::Trace t =
      run::simulate(core::parse_scenario_file(test::scenario_path(scenario), {"training.steps=1"}))
          .trace;
  const auto ctx = prof::KernelNameContext::from_metadata(t.metadata);
  REQUIRE(ctx.has_value());
  std::map<std::string, std::string> out;
  for (const prof::TraceEvent& e : t.events)
    if (e.cls == prof::EventClass::kCompute && e.cat == "kernel")
      out.emplace(e.name, prof::library_kernel_name(*ctx, str_arg(e, "kind"), str_arg(e, "dtype"),
                                                    str_arg(e, "phase") == "backward", e.name));
  return out;
}

bool starts(const std::string& s, const std::string& head) {
  return s.rfind(head, 0) == 0;
}

bool has_substr(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// What tracediff's name rules make of a kernel that carries no "kind" arg (a real trace's).
std::string class_by_name(const std::string& name) {
  prof::TraceEvent e;
  e.name = name;
  e.cat = "kernel";
  e.cls = prof::EventClass::kCompute;
  return std::string(prof::op_class(e));
}

}  // namespace

TEST_CASE("torchtitan Llama 3.1 8B on H100: cuBLAS sm90 GEMMs, FlashAttention-2, ATen",
          "[kernel_names]") {
  const auto n = names_of("llama3_1_8b_8xh100_fsdp2.json");
  // A bf16 linear layer on compute capability 9.0: cuBLASLt's sm90 kernel family.
  CHECK(starts(n.at("h.0.attn.qkv.fwd"), "sm90_xmma_gemm_bf16bf16_bf16f32"));
  // SDPA's flash backend is FlashAttention-2 (docs/transformer.md).
  CHECK(starts(n.at("h.0.attn.core.fwd"), "void flash::flash_fwd_kernel"));
  CHECK(starts(n.at("h.0.attn.core.bwd"), "void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel"));
  // torchtitan's RMSNorm is a composite of ATen kernels (named after its multiply).
  CHECK(starts(n.at("h.0.ln_1.fwd"),
               "void at::native::vectorized_elementwise_kernel<4, "
               "at::native::BinaryFunctor<c10::BFloat16"));
  // torch.optim's foreach Adam.
  int optimizer = 0;
  for (const auto& [op, name] : n)
    if (starts(op, "optimizer.step")) {
      CHECK(has_substr(name, "multi_tensor_apply_kernel"));
      ++optimizer;
    }
  CHECK(optimizer > 0);
  // tracediff's name rules put them where a real trace's kernels go.
  CHECK(class_by_name(n.at("h.0.attn.qkv.fwd")) == "gemm");
  CHECK(class_by_name(n.at("h.0.attn.core.fwd")) == "attention");
  CHECK(class_by_name(n.at("h.0.ln_1.fwd")) == "elementwise");
}

TEST_CASE("Megatron with Transformer Engine on A100: ampere GEMMs, Apex's Adam", "[kernel_names]") {
  const auto n = names_of("gpt_20b_64xa100_3d.json");
  int gemm = 0, optimizer = 0;
  for (const auto& [op, name] : n) {
    if (has_substr(op, "attn.qkv.fwd")) {
      // bf16 on an A100 (compute capability 8.0): cuBLAS's ampere s16816 family.
      CHECK(starts(name, "ampere_bf16_s16816gemm_bf16"));
      ++gemm;
    }
    if (has_substr(op, "optimizer.step")) {
      CHECK(starts(name, "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor"));
      ++optimizer;
    }
  }
  CHECK(gemm > 0);
  CHECK(optimizer > 0);
}

TEST_CASE("a real trace has no kernel_names context: its names stay", "[kernel_names]") {
  CHECK_FALSE(prof::KernelNameContext::from_metadata(nlohmann::json::object()).has_value());
  prof::KernelNameContext c;
  c.compute_capability = 61;  // a GTX 1080 Ti: cuBLAS's Maxwell kernels run Pascal
  CHECK(prof::library_kernel_name(c, "gemm", "fp32", false, "fc.fwd") == "maxwell_sgemm_128x64_tn");
  CHECK(
      prof::KernelNameContext::from_metadata({{"kernel_names", c.to_json()}})->compute_capability ==
      61);
}

TEST_CASE("per-rank files name kernels as the libraries do, the layer path in arg op",
          "[kernel_names]") {
  const prof::Trace t =
      run::simulate(core::parse_scenario_file(test::scenario_path("gpt2_small_8xa100.json"),
                                              {"training.steps=1"}))
          .trace;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("csim_kernel_names_" + std::to_string(reinterpret_cast<std::uintptr_t>(&t)));
  std::filesystem::remove_all(dir);
  prof::write_per_rank_traces(t, dir.string(), prof::PerRankMirrors::kEveryRank);
  const prof::Trace r = prof::read_chrome_trace_file((dir / "rank-0.json").string());
  int kernels = 0;
  for (const prof::TraceEvent& e : r.events) {
    if (e.cat != "kernel" || e.cls != prof::EventClass::kCompute) continue;
    ++kernels;
    const std::string op = str_arg(e, "op");
    CHECK_FALSE(op.empty());  // the layer path moved to the arg
    CHECK(op != e.name);
    CHECK_FALSE(has_substr(e.name, "h."));  // the name is the library's
  }
  CHECK(kernels > 0);
  std::filesystem::remove_all(dir);
}
