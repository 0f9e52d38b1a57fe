// DeepSpeed ZeRO-3's keys (core/scenario/parse_parallel.hpp; docs/scenario.md, "DeepSpeed ZeRO-3";
// lowering in core/lowering/zero3_fetch.cpp). DeepSpeed's own names and defaults
// (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig), sizes in elements:
//   stage3_prefetch_bucket_size          5e7  elements gathered ahead per fetch
//   stage3_max_live_parameters           1e9  gathered elements beyond which nothing is prefetched
//   stage3_max_reuse_distance            1e9  a module's parameters used again within this many
//                                             elements of the trace are not released
//   stage3_param_persistence_threshold   1e5  modules this small keep their parameters gathered
//   reduce_bucket_size                   5e8  gradient elements per reduce-scatter
//   overlap_comm                         true under stage 3: gathers and reductions on their own
//                                        streams (false: on the compute stream)
// and one key of ours, the DeepSpeed release line (not a DeepSpeed key: its releases differ):
//   zero3_fetch                          "async" (0.6.0 on, the default) or "synchronous" (0.3.13
//                                        to 0.5.10: every fetch synchronizes the device)
#include "core/scenario/parse_parallel.hpp"

namespace csim::core::parse {

void validate_zero3(const ParallelInput& in, ParallelSpec& ps) {
  Ctx& ctx = in.ctx;
  const Obj& o = in.o;
  static const char* const kKeys[] = {"stage3_prefetch_bucket_size",
                                      "stage3_max_live_parameters",
                                      "stage3_max_reuse_distance",
                                      "stage3_param_persistence_threshold",
                                      "reduce_bucket_size",
                                      "overlap_comm",
                                      "zero3_fetch"};
  const bool zero3 = in.kind == StrategyKind::kZero && ps.zero_stage == 3;
  for (const char* key : kKeys) {
    if (o.has(key) && !zero3) {
      ctx.fail(o.at(key),
               std::string(key) +
                   " is a DeepSpeed ZeRO-3 key: it needs strategy.kind zero with "
                   "zero_stage 3",
               "set \"kind\": \"zero\" and \"zero_stage\": 3 (stages 1 and 2 reduce per unit)");
    }
  }
  if (!zero3) return;
  // Sizes are element counts, often written 5e7 in DeepSpeed configs: numbers, not only integers.
  const auto numel = [&](const char* key, std::int64_t def) {
    return static_cast<std::int64_t>(o.number(key, static_cast<double>(def), 0.0, 1e15));
  };
  Zero3Spec& z = ps.zero3;
  z.prefetch_bucket_numel = numel("stage3_prefetch_bucket_size", z.prefetch_bucket_numel);
  z.max_live_numel = numel("stage3_max_live_parameters", z.max_live_numel);
  z.max_reuse_distance_numel = numel("stage3_max_reuse_distance", z.max_reuse_distance_numel);
  z.persistence_threshold_numel =
      numel("stage3_param_persistence_threshold", z.persistence_threshold_numel);
  z.reduce_bucket_numel = numel("reduce_bucket_size", z.reduce_bucket_numel);
  if (z.reduce_bucket_numel < 1) {
    ctx.fail(o.at("reduce_bucket_size"), "reduce_bucket_size must be at least 1 element",
             "DeepSpeed's default is 5e8");
  }
  z.overlap_comm = o.boolean("overlap_comm", true);
  z.fetch = static_cast<Zero3Fetch>(o.choice("zero3_fetch", {"async", "synchronous"}, 0));
  // The older switch: prefetch false is DeepSpeed's stage3_prefetch_bucket_size 0.
  if (!ps.prefetch) {
    if (o.has("stage3_prefetch_bucket_size") && z.prefetch_bucket_numel > 0) {
      ctx.fail_conflict({o.at("prefetch"), o.at("stage3_prefetch_bucket_size")},
                        "prefetch false contradicts a non-zero stage3_prefetch_bucket_size",
                        "give one of them (prefetch false = stage3_prefetch_bucket_size 0)");
    }
    z.prefetch_bucket_numel = 0;
  }
}

}  // namespace csim::core::parse
