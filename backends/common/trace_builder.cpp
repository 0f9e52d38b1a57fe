// [SECTION] index: lanes, host events, device events, flows, steps, memory counters, metadata.
#include "backends/common/trace_builder.hpp"
#include "backends/common/trace_parts.hpp"

#include "backends/common/cuda_sync_plan.hpp"
#include "backends/common/kineto_names.hpp"
#include "core/error.hpp"
#include "core/lowering/optimizer_memory.hpp"
#include "core/model/fp8_recipe.hpp"
#include "core/model/moe_routing.hpp"
#include "core/model/mtp_layers.hpp"
#include "core/model/transformer_flops.hpp"
#include "core/program/step_spans.hpp"
#include "profiler/huge_pages.hpp"
#include "profiler/library_kernel_names.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace csim::backend {
namespace {

using core::Op;
using core::OpId;
using core::OpKind;
using prof::EventClass;

// Kineto's lane of synchronisation records that have no stream (docs/trace-format.md, "Lanes").
constexpr int kCudaSyncTid = -1;

prof::LaneRole lane_role(core::StreamRole r) {
  switch (r) {
    case core::StreamRole::kCompute:
      return prof::LaneRole::kCompute;
    case core::StreamRole::kComm:
      return prof::LaneRole::kComm;
    case core::StreamRole::kCopy:
      return prof::LaneRole::kCopy;
  }
  return prof::LaneRole::kOther;
}

// A string argument's text, whatever form the builder holds it in (the FormattedSink keeps the
// form: docs/trace-format.md, "Plain strings").
std::string_view view_of(std::string_view s) {
  return s;
}
std::string_view view_of(prof::PlainStr s) {
  return s.view();
}
std::string_view view_of(prof::FlaggedStr s) {
  return s.s;
}

// Sets the fields of an event made in place (tr.events.emplace_back()). Its strings are empty:
// constructed and moved in (assign() on an empty string takes basic_string's general replace
// path; docs/trace-format.md, "Building speed").
template <class Name>
void set_event(prof::TraceEvent& e, int pid, int tid, TimeNs ts_ns, TimeNs dur_ns, const Name& name,
               prof::PlainStr cat, EventClass cls, std::int64_t op_id, std::int64_t correlation) {
  e.pid = pid;
  e.tid = tid;
  e.ts_ns = ts_ns;
  e.dur_ns = dur_ns;
  e.name = std::string(view_of(name));
  e.cat = std::string(cat.view());
  e.cls = cls;
  e.op_id = op_id;
  e.correlation = correlation;
}

// The two sinks the builder writes its events and flows to (docs/trace-format.md, "Formatting
// while building"); the rest of the trace (processes, threads, counters, metadata) goes to rest()
// in both. An event is begin(), its args in order, end().
//
// TraceSink: into a prof::Trace (every reader of the trace: per-rank files, --expand-mirrors, real
// runs, the summary, the GUI, the tests).
class TraceSink {
 public:
  explicit TraceSink(prof::Trace& tr) : tr_(tr) {}
  prof::Trace& rest() { return tr_; }
  bool wants_rest() const { return true; }
  static constexpr bool kReserves = true;
  void reserve(std::size_t events, std::size_t flows) {
    tr_.events.reserve(tr_.events.size() + events);
    tr_.flows.reserve(tr_.flows.size() + flows);
    prof::advise_huge_pages(tr_.events);
    prof::advise_huge_pages(tr_.flows);
  }
  // NARGS: the args that follow (reserved once).
  template <class Name>
  void begin(int pid, int tid, TimeNs ts_ns, TimeNs dur_ns, const Name& name, prof::PlainStr cat,
             EventClass cls, std::int64_t op_id, std::int64_t correlation, std::size_t nargs) {
    e_ = &tr_.events.emplace_back();  // made in place, no temporary to move
    set_event(*e_, pid, tid, ts_ns, dur_ns, name, cat, cls, op_id, correlation);
    if (nargs) e_->args.reserve(nargs);
  }
  // The key's length known at compile time (no strlen); the key and the value constructed once,
  // the arg moved in (default-constructing it in place and assigning both costs more: variant's
  // emplace of a string goes through a temporary variant).
  template <class V>
  void arg(prof::PlainStr key, const V& value) {
    if constexpr (std::is_same_v<V, std::int64_t> || std::is_same_v<V, double>) {
      e_->args.push_back(
          prof::Arg{std::string(key.view()), prof::ArgValue(std::in_place_type<V>, value)});
    } else {
      e_->args.push_back(
          prof::Arg{std::string(key.view()),
                    prof::ArgValue(std::in_place_type<std::string>, view_of(value))});
    }
  }
  // A string arg from a C string (an enum's spelling), without a temporary std::string.
  void str_arg(prof::PlainStr key, const char* value) {
    e_->args.push_back(
        prof::Arg{std::string(key.view()), prof::ArgValue(std::in_place_type<std::string>, value)});
  }
  void end() {}
  void flow(std::int64_t id, prof::PlainStr name, int from_pid, int from_tid, TimeNs from_ts_ns,
            int to_pid, int to_tid, TimeNs to_ts_ns) {
    tr_.flows.push_back({id, std::string(name.view()), std::string(name.view()), from_pid, from_tid,
                         from_ts_ns, to_pid, to_tid, to_ts_ns});
  }

 private:
  prof::Trace& tr_;
  prof::TraceEvent* e_ = nullptr;
};

// FormattedSink: each event and flow formatted into its Chrome-trace line as it comes
// (prof::FormattedTrace), for a run whose trace is only written (simrun -o).
class FormattedSink {
 public:
  explicit FormattedSink(prof::FormattedTrace& ft) : ft_(ft) {}
  prof::Trace& rest() { return ft_.rest; }
  // False when the events are produced again to be written (prof::FormattedTrace::stream_from):
  // the counters and metadata are not made again.
  bool wants_rest() const { return ft_.wants_rest(); }
  static constexpr bool kReserves = false;  // lines are not held
  template <class Name>
  void begin(int pid, int tid, TimeNs ts_ns, TimeNs dur_ns, const Name& name, prof::PlainStr cat,
             EventClass cls, std::int64_t op_id, std::int64_t correlation, std::size_t) {
    ft_.begin_event(pid, tid, ts_ns, dur_ns, name, cat, cls, op_id, correlation);
  }
  template <class V>
  void arg(prof::PlainStr key, const V& value) {
    static_assert(std::is_same_v<V, std::int64_t> || std::is_same_v<V, double> ||
                  std::is_same_v<V, std::string> || std::is_same_v<V, prof::PlainStr> ||
                  std::is_same_v<V, prof::FlaggedStr>);
    ft_.arg(key, value);
  }
  void str_arg(prof::PlainStr key, const char* value) { ft_.arg(key, std::string_view(value)); }
  void end() { ft_.end_event(); }
  void flow(std::int64_t id, prof::PlainStr name, int from_pid, int from_tid, TimeNs from_ts_ns,
            int to_pid, int to_tid, TimeNs to_ts_ns) {
    ft_.add_flow(id, name, name, from_pid, from_tid, from_ts_ns, to_pid, to_tid, to_ts_ns);
  }

 private:
  prof::FormattedTrace& ft_;
};

// An event without args.
template <class Sink, class Name>
void add_event(Sink& sink, int pid, int tid, TimeNs ts_ns, TimeNs dur_ns, const Name& name,
               prof::PlainStr cat, EventClass cls, std::int64_t op_id, std::int64_t correlation) {
  sink.begin(pid, tid, ts_ns, dur_ns, name, cat, cls, op_id, correlation, 0);
  sink.end();
}

// Whether each op's name needs no JSON escaping (prof::PlainStr), from its interned pattern,
// checked once per pattern (3,772 for GPT-3 175B at batch 1,536, against 443,199 ops): a structured
// name's field is written in decimal, which JSON does not escape, in place of the pattern's one
// core::kNameField byte (docs/trace-format.md, "Plain strings").
class PlainNames {
 public:
  explicit PlainNames(const core::StringPool& names) : patterns_(names.size()) {
    for (std::size_t i = 0; i < patterns_.size(); ++i) {
      Pattern& pat = patterns_[i];
      for (const char ch : names.pattern(core::NameId{static_cast<std::uint32_t>(i), -1})) {
        if (ch == core::kNameField) {
          ++pat.field_bytes;
        } else if (!prof::json_plain({&ch, 1})) {
          pat.rest_plain = false;
        }
      }
    }
  }
  // The field's byte is replaced when the id has a field (>= 0); a second one, or one in a plain
  // name, stays and is escaped.
  bool plain(core::NameId id) const {
    const Pattern& pat = patterns_[id.index];
    return pat.rest_plain && pat.field_bytes == (id.field >= 0 ? 1 : 0);
  }

 private:
  struct Pattern {
    bool rest_plain = true;  // no byte JSON escapes, core::kNameField aside
    int field_bytes = 0;
  };
  std::vector<Pattern> patterns_;
};

// The spellings of the enums the events carry as args (core::to_string), each looked up and
// checked plain once per value rather than on every event.
class EnumSpellings {
 public:
  template <class E>
  prof::FlaggedStr of(E e) {
    static_assert(sizeof(E) == 1, "a table of 256 entries per enum");
    Entry& x = table<E>()[static_cast<std::size_t>(e)];
    if (!x.known) {
      x.text = core::to_string(e);
      x.plain = prof::json_plain(x.text);
      x.known = true;
    }
    return {x.text, x.plain};
  }

 private:
  struct Entry {
    std::string_view text;
    bool plain = false, known = false;
  };
  using Table = std::array<Entry, 256>;
  template <class E>
  Table& table() {
    if constexpr (std::is_same_v<E, core::Phase>) {
      return phase_;
    } else if constexpr (std::is_same_v<E, core::ComputeKind>) {
      return compute_kind_;
    } else if constexpr (std::is_same_v<E, core::Dtype>) {
      return dtype_;
    } else {
      static_assert(std::is_same_v<E, core::CopyKind>, "an enum without a table here");
      return copy_kind_;
    }
  }
  Table phase_{}, compute_kind_{}, dtype_{}, copy_kind_{};
};

// How many events and flows the op loop of build_trace makes (its branches, counted): the vectors
// are reserved to these.
struct OpEventCount {
  std::size_t events = 0, flows = 0;
};
OpEventCount count_op_events(const core::Program& p, const std::vector<core::OpTiming>& timing,
                             const CudaSyncPlan& sync) {
  OpEventCount n;
  for (const Op& op : p.ops) {
    const core::OpTiming& t = timing[op.id];
    if (t.end_ns < 0) continue;
    if (sync.host_wait_on[op.id] != core::kNoOp) n.events += 2;
    if (t.gil_wait_ns > 0) ++n.events;
    if (op.kind == OpKind::kHostWork) {
      ++n.events;
      continue;
    }
    if (op.kind == OpKind::kMarker || op.kind == OpKind::kAlloc || op.kind == OpKind::kFree)
      continue;
    n.events += (op.python_ns > 0 ? 1 : 0) + 2 * sync.stream_waits[op.id].size() +
                (op.dispatch_ns > 0 ? 1 : 0) + (sync.record_corr[op.id] >= 0 ? 1 : 0) + 1;
    if (op.dispatch_ns > 0) ++n.flows;
  }
  for (const Op& op : p.ops) {
    if (op.stream < 0 || timing[op.id].start_ns < 0) continue;
    for (const core::Dep& d : op.deps) {
      const Op& src = p.ops[d.op];
      if (d.kind == core::DepKind::kStreamWaits && src.stream >= 0 && src.gpu != op.gpu &&
          timing[d.op].end_ns >= 0)
        ++n.flows;
    }
  }
  return n;
}

// A collective's group args (PyTorch's record_param_comms, docs/trace-format.md "Kineto
// conventions") and NCCL kernel names, formatted once per group and per (kind, dtype, algorithm)
// instead of once per op.
class GroupArgs {
 public:
  struct Group {
    int size = 0;
    std::string id, description, ranks;  // "Process Group Name", "... Description", "... Ranks"
  };
  explicit GroupArgs(const core::Program& p)
      : p_(p), groups_(p.groups.size()), known_(p.groups.size(), 0) {}
  // -1 (a collective simulated elsewhere, core/program/program_slice.hpp): no group, "[]".
  const Group& of(int group) {
    if (group < 0) {
      if (none_.ranks.empty()) {
        none_.id = "-1";
        none_.ranks = "[]";
      }
      return none_;
    }
    Group& g = groups_[static_cast<std::size_t>(group)];
    if (!known_[static_cast<std::size_t>(group)]) {
      known_[static_cast<std::size_t>(group)] = 1;
      const core::CommGroup& cg = p_.groups[static_cast<std::size_t>(group)];
      g.size = static_cast<int>(cg.gpus.size());
      g.id = std::to_string(group);
      g.description = cg.name;
      g.ranks = "[";
      for (std::size_t i = 0; i < cg.gpus.size(); ++i)
        g.ranks += (i ? ", " : "") + std::to_string(cg.gpus[i]);
      g.ranks += "]";
    }
    return g;
  }
  const std::string& kernel_name(core::CollectiveKind k, core::Dtype d, core::CollectiveAlgo algo) {
    const auto key =
        std::make_tuple(static_cast<int>(k), static_cast<int>(d), static_cast<int>(algo));
    if (auto it = kernel_names_.find(key); it != kernel_names_.end()) return it->second;
    return kernel_names_.emplace(key, nccl_kernel_name(k, d, algo)).first->second;
  }

 private:
  const core::Program& p_;
  std::vector<Group> groups_;
  std::vector<char> known_;
  Group none_;
  std::map<std::tuple<int, int, int>, std::string> kernel_names_;
};

// The ProfilerStep#N spans per GPU, on the GPU's first host thread (its training loop, as
// profiler.step() marks it): from the loop reaching the step's first op to the end of the step's
// last op on that GPU. Other threads' early starts (data-loader workers prefetching later
// batches) do not move the start; they still count for the end.
// core/program/step_spans.cpp computes them (sweeps read the step time from the same spans).
template <class Sink>
void step_annotations(Sink& sink, const core::Program& p,
                      const std::vector<core::StepSpan>& step_spans) {
  std::map<int, int> first_thread_of_gpu;
  for (const core::ThreadDesc& t : p.threads) first_thread_of_gpu.emplace(t.gpu, t.id);
  for (const core::StepSpan& ss : step_spans) {
    add_event(sink, ss.gpu, host_tid(first_thread_of_gpu[ss.gpu]), ss.start_ns,
              ss.end_ns - ss.start_ns, "ProfilerStep#" + std::to_string(ss.step), "user_annotation",
              EventClass::kAnnotation, -1, -1);
  }
}

}  // namespace

namespace detail {

// [SECTION] Parts shared with the summary input (backends/common/run_summary.cpp)

void add_gpu_processes(prof::Trace& tr, const core::Program& p, const core::MemoryReport& mem) {
  std::map<int, int> rank_of;  // gpu -> rank (position in active_gpus)
  for (std::size_t i = 0; i < p.active_gpus.size(); ++i)
    rank_of[p.active_gpus[i]] = static_cast<int>(i);
  std::map<int, Bytes> capacity;
  for (const core::GpuMemory& g : mem.gpus) capacity[g.gpu] = g.capacity_bytes;
  for (int g : p.active_gpus) {
    // Rank symmetry: a mirrored GPU has no ops of its own; its representative stands for it.
    if (p.symmetry.enabled() && p.symmetry.weight_of_gpu[g] == 0) continue;
    prof::ProcessInfo pi;
    pi.pid = g;
    pi.node = g / p.gpus_per_node;
    pi.gpu = g;
    pi.rank = rank_of[g];
    pi.name = prof::gpu_process_name(g, p.gpus_per_node);
    pi.capacity_bytes = capacity[g];
    pi.sort_index = g;
    tr.processes.push_back(pi);
  }
}

// The ProfilerStep#N spans (step_annotations above), into a prof::Trace.
void add_step_annotations(prof::Trace& tr, const core::Program& p,
                          const std::vector<core::StepSpan>& step_spans) {
  TraceSink sink(tr);
  step_annotations(sink, p, step_spans);
}

// The "memory" counter: allocated bytes per GPU, in total and by category, one sample per change.
void add_allocated_counters(prof::Trace& tr, const core::MemoryReport& mem) {
  for (const core::GpuMemory& g : mem.gpus) {
    for (const core::MemorySample& m : g.samples) {
      prof::CounterSample& c = tr.counters.emplace_back();
      c.pid = g.gpu;
      c.name = "memory";
      c.ts_ns = m.t_ns;
      c.values.reserve(1 + core::kNumMemCategories);
      c.values.push_back({"allocated", static_cast<double>(m.total)});
      for (int k = 0; k < core::kNumMemCategories; ++k) {
        c.values.push_back({core::to_string(static_cast<core::MemCategory>(k)),
                            static_cast<double>(m.by_category[k])});
      }
    }
  }
}

// Memory counters: allocated bytes per GPU, in total and by category.
void add_memory_counters(prof::Trace& tr, const core::MemoryReport& mem) {
  // [SECTION] Memory counters: allocated bytes per GPU, in total and by category.
  std::size_t samples = 0;
  for (const core::GpuMemory& g : mem.gpus) samples += g.samples.size();
  for (const core::GpuAllocatorTimeline& g : mem.allocator.gpus) samples += g.samples.size();
  tr.counters.reserve(tr.counters.size() + samples);
  add_allocated_counters(tr, mem);
  // Caching allocator (docs/memory.md; docs/trace-format.md "Events"): reserved bytes next to the
  // allocated ones, in a counter of its own so that viewers stacking the "memory" series by
  // category do not stack it.
  for (const core::GpuAllocatorTimeline& g : mem.allocator.gpus) {
    for (const core::AllocatorSample& m : g.samples) {
      prof::CounterSample c;
      c.pid = g.gpu;
      c.name = prof::kReservedMemoryCounter;
      c.ts_ns = m.t_ns;
      c.values.reserve(5);
      c.values.push_back({"reserved", static_cast<double>(m.reserved_bytes)});
      c.values.push_back({"allocated_blocks", static_cast<double>(m.allocated_bytes)});
      c.values.push_back(
          {"cached_free", static_cast<double>(m.reserved_bytes - m.allocated_bytes)});
      c.values.push_back({"largest_free_block", static_cast<double>(m.largest_free_block_bytes)});
      c.values.push_back({"segments", static_cast<double>(m.segments)});
      tr.counters.push_back(std::move(c));
    }
  }
}

// The run's facts that pick its kernels' library names (prof::library_kernel_name).
prof::KernelNameContext kernel_name_context(const core::Scenario& s) {
  prof::KernelNameContext c;
  c.compute_capability = s.cluster.gpu.compute_capability;
  c.framework = core::to_string(s.training.framework);
  for (const core::LayerSpec& l : s.model.layers)
    if (l.kind == core::ComputeKind::kAttention &&
        l.fused_attention.kernel != core::AttentionKernel::kEager) {
      c.attention = core::to_string(l.fused_attention.kernel);
      break;
    }
  if (s.model.transformer_config.layers > 0)
    c.norm = s.model.transformer_config.norm == core::NormKind::kRmsNorm ? "rmsnorm" : "layernorm";
  else if (s.model.source == "gpt")
    c.norm = "layernorm";
  if (s.training.precision == core::Precision::kFp8)
    c.fp8_recipe = core::fp8_traits(s.training.fp8.recipe).key;
  c.optimizer = s.training.optimizer == core::OptimizerKind::kAdam ? "adam" : "sgd";
  c.compile = s.training.compile;
  c.fused_rmsnorm = s.training.fused_rmsnorm;
  c.torch_optim = core::runs_torch_optim(s);
  c.for_loop = s.training.pytorch_version < 200;
  return c;
}

void add_metadata(prof::Trace& tr, const core::Scenario& s, const core::Program& p,
                  const core::ExecutionResult& r, const core::MemoryReport& mem) {
  std::map<int, int> rank_of;  // gpu -> rank (position in active_gpus)
  for (std::size_t i = 0; i < p.active_gpus.size(); ++i)
    rank_of[p.active_gpus[i]] = static_cast<int>(i);
  nlohmann::json& md = tr.metadata;
  md["scenario"] = {{"name", s.name}, {"description", s.description}, {"file", s.file}};
  md["strategy"] = {{"kind", core::to_string(s.strategy.kind)},
                    {"label", p.strategy_label},
                    {"device_ids", s.strategy.device_ids}};
  if (s.strategy.kind == core::StrategyKind::kDataParallel)
    md["strategy"]["output_device"] = s.strategy.output_device;
  md["backend"] = r.backend;
  md["measured"] = r.measured;
  md["complete"] = r.complete;
  if (!r.complete) md["steps_completed"] = completed_steps(p, r);
  md["samples_per_step"] = p.samples_per_step;
  md["steps"] = p.steps;
  md["cluster"] = {{"nodes", s.cluster.nodes},
                   {"gpus_per_node", s.cluster.gpus_per_node},
                   {"gpu", s.cluster.gpu.name},
                   {"intra", core::to_string(s.cluster.intra.kind)}};
  // A board power cap and the compute factor it gave (docs/cost-model.md, "Power limit").
  if (s.cluster.gpu_power_limit_w > 0) {
    md["cluster"]["gpu_power_limit_w"] = s.cluster.gpu_power_limit_w;
    md["cluster"]["compute_clock_factor"] = s.cluster.gpu.compute_clock_factor;
  }
  md["model"] = {{"name", s.model.name},
                 {"params", s.model.total_params()},
                 {"layers", s.model.layers.size()}};
  md["precision"] = core::to_string(s.training.precision);
  // What names the kernels as their libraries do (docs/trace-format.md, "Library kernel names").
  md["kernel_names"] = kernel_name_context(s).to_json();
  // MFU/HFU inputs (docs/program.md, "FLOPs utilisation"; docs/summary.md, "MFU and HFU").
  md["model_flops_per_step"] = p.model_flops_per_step;
  md["hardware_flops_per_step"] = p.hardware_flops_per_step;
  md["peak_flops_per_gpu"] = s.cluster.gpu.peak_flops_per_s(
      core::precision_bytes(s.training.precision, s.training.amp_dtype).compute);
  // The general decoder block only (model.transformer, model.hf_config; older models' metadata is
  // unchanged): tokens per step and the per-token FLOPs counts (docs/summary.md, "Tokens and
  // FLOPs per token"; docs/transformer.md, "FLOPs per token").
  if (s.model.transformer_config.layers > 0) {
    const core::FlopsPerToken f = core::transformer_flops_per_token(s.model);
    md["transformer"] = {
        {"params", s.model.total_params()},
        {"seq_len", s.model.transformer_config.seq_len},
        {"tokens_per_step", p.samples_per_step * s.model.transformer_config.seq_len},
        {"flops_per_token",
         {{"model", f.model},
          {"six_n_attention", f.six_n_attention},
          {"megatron", f.megatron},
          {"torchtitan", f.torchtitan}}}};
    // A mixture of experts: the parameters a token uses (docs/transformer.md, "Mixture of
    // experts"); absent for dense models.
    if (s.model.active_params() != s.model.total_params())
      md["transformer"]["active_params"] = s.model.active_params();
    // Multi-token prediction: the depths' own parameters, of the above (docs/transformer.md,
    // "Multi-token prediction"); absent without them.
    if (const core::MtpParams mtp = core::mtp_params(s.model); mtp.total > 0)
      md["transformer"]["mtp"] = {{"params", mtp.total}, {"active_params", mtp.active}};
    // Expert parallelism: what the routing samples amount to (docs/summary.md, "Routing").
    const core::ParallelSpec& ps = s.strategy.parallel;
    if (s.model.transformer_config.moe.any() && ps.ep > 1) {
      static constexpr std::array<const char*, 4> kKinds = {"balanced", "zipf", "dirichlet",
                                                            "histogram"};
      const core::RoutingStats st =
          core::routing_stats(s.model.transformer_config, ps.ep, ps.micro_batches);
      md["transformer"]["moe_routing"] = {
          {"kind", kKinds[static_cast<std::size_t>(s.model.transformer_config.moe.routing.kind)]},
          {"ep", ps.ep},
          {"samples", st.samples},
          {"tokens_per_expert_max_over_mean", st.expert_max_over_mean},
          {"worst_tokens_per_expert_max_over_mean", st.worst_expert_max_over_mean},
          {"tokens_per_ep_rank_max_over_mean", st.rank_max_over_mean},
          {"worst_tokens_per_ep_rank_max_over_mean", st.worst_rank_max_over_mean},
          {"busiest_ep_rank_count", st.busiest_rank_count}};
      const core::MoeConfig& moe = s.model.transformer_config.moe;
      if (moe.capacity_factor > 0) {
        md["transformer"]["moe_routing"]["capacity_factor"] = moe.capacity_factor;
        md["transformer"]["moe_routing"]["dropped_token_share"] = st.dropped;
        md["transformer"]["moe_routing"]["worst_dropped_token_share"] = st.worst_dropped;
      }
    }
  }
  // First-step and steady-state peaks per GPU (docs/memory.md): the summary reports the larger.
  nlohmann::json peaks = nlohmann::json::array();
  for (const core::GpuMemory& g : mem.gpus) {
    peaks.push_back({{"gpu", g.gpu},
                     {"first_step_peak_bytes", g.first_step_peak_bytes},
                     {"steady_state_peak_bytes", g.steady_peak_bytes},
                     {"projected", g.steady_projected}});
  }
  md["memory_peaks"] = peaks;
  if (mem.oom) {
    md["oom"] = {{"gpu", mem.oom->gpu},
                 {"op", mem.oom->op_name},
                 {"shortfall_bytes", mem.oom->shortfall_bytes},
                 {"at_ns", mem.oom->at_ns},
                 {"requested_bytes", mem.oom->requested_bytes},
                 {"capacity_bytes", mem.oom->capacity_bytes},
                 {"would_be_peak_bytes", mem.oom->would_be_peak_bytes},
                 {"over_capacity_bytes", mem.oom->over_capacity_bytes},
                 {"steady_state", mem.oom->steady_state},
                 {"allocator", mem.oom->allocator}};
    if (mem.oom->allocator) {
      md["oom"]["expandable_segments"] = mem.oom->expandable_segments;
      md["oom"]["reserved_bytes"] = mem.oom->reserved_bytes;
      md["oom"]["segment_bytes"] = mem.oom->segment_bytes;
      md["oom"]["allocated_bytes"] = mem.oom->allocated_bytes;
    }
  } else {
    md["oom"] = nullptr;
  }
  // Caching allocator (docs/memory.md): its OOM (reserved + the new segment > usable memory after
  // releasing the cache, which fragmentation can cause before allocated bytes reach capacity) and
  // every torch.cuda.empty_cache() with what it released.
  if (mem.allocator.oom) {
    const core::AllocatorOom& o = *mem.allocator.oom;
    md["allocator_oom"] = {{"gpu", o.gpu},
                           {"op", o.op_name},
                           {"requested_bytes", o.requested_bytes},
                           {"segment_bytes", o.segment_bytes},
                           {"reserved_bytes", o.reserved_bytes},
                           {"allocated_bytes", o.allocated_bytes},
                           {"capacity_bytes", o.capacity_bytes},
                           {"at_ns", o.at_ns},
                           {"expandable_segments", o.expandable},
                           {"verdict", mem.oom && mem.oom->allocator}};
    if (o.expandable_peak_reserved_bytes >= 0) {
      md["allocator_oom"]["expandable_peak_reserved_bytes"] = o.expandable_peak_reserved_bytes;
      md["allocator_oom"]["expandable_oom"] = o.expandable_oom;
    }
  } else {
    md["allocator_oom"] = nullptr;
  }
  nlohmann::json empties = nlohmann::json::array();
  for (const core::GpuAllocatorTimeline& g : mem.allocator.gpus) {
    for (const core::EmptyCacheEffect& e : g.empty_cache) {
      empties.push_back({{"gpu", g.gpu},
                         {"step", e.step},
                         {"at_ns", e.t_ns},
                         {"released_bytes", e.released_bytes},
                         {"reserved_after_bytes", e.reserved_after_bytes},
                         {"allocated_bytes", e.allocated_bytes}});
    }
  }
  if (!empties.empty()) md["empty_cache"] = empties;
  std::vector<std::string> warnings = s.warnings;
  warnings.insert(warnings.end(), p.warnings.begin(), p.warnings.end());
  md["warnings"] = warnings;
  md["notes"] = r.notes;
  if (p.symmetry.enabled()) {
    // docs/trace-format.md, "Metadata": which simulated GPU stands for how many active GPUs.
    // Each mirrored GPU as [gpu, rank, representative GPU]: the representative is the image of the
    // GPU under the mirror that maps the GPU onto a simulated one.
    nlohmann::json mirrors = nlohmann::json::array();
    int simulated = 0;
    for (int g : p.active_gpus) {
      if (p.symmetry.weight_of_gpu[g] > 0) {
        ++simulated;
        continue;
      }
      int rep = -1;
      for (const std::vector<int>& img : p.symmetry.images) {
        if (img[g] >= 0 && p.symmetry.weight_of_gpu[img[g]] > 0) {
          rep = img[g];
          break;
        }
      }
      mirrors.push_back({g, rank_of[g], rep});
    }
    md["rank_symmetry"] = {
        {"active_gpus", p.active_gpus.size()}, {"simulated_gpus", simulated}, {"mirrors", mirrors}};
  }
}

}  // namespace detail

namespace {

// What the builder derives from the timings before its events: made once per trace, so that a
// streamed trace's second build (prof::FormattedTrace::stream_from) does not make it again.
struct BuildPrep {
  CudaSyncPlan sync;
  std::vector<core::StepSpan> step_spans;
};
// `count` counts the plan's two passes over the ops and the step spans' one: the first three
// quarters of "building the trace".
BuildPrep build_prep(const core::Program& p, const core::ExecutionResult& r,
                     core::ProgressCount& count) {
  // Stream and host dependencies become CUDA events as Kineto records them with
  // enable_cuda_sync_events (cuda_sync_plan.hpp); the ProfilerStep#N spans
  // (core/program/step_spans.hpp).
  return {plan_cuda_sync(p, r.timings, static_cast<std::int64_t>(p.ops.size()) + 1, &count),
          core::step_spans(p, r.timings, &count)};
}

// build_trace's body, into either sink: the one builder of both paths.
// `count` counts the ops visited (docs/limits.md, "Progress").
template <class Sink>
void build_into(Sink& sink, const core::Scenario& s, const core::Program& p,
                const core::ExecutionResult& r, const core::MemoryReport& mem,
                const BuildPrep& prep, core::ProgressCount& count) {
  prof::Trace& tr = sink.rest();
  tr.base_ns = 0;
  tr.world_size = static_cast<int>(p.active_gpus.size());
  const auto& timing = r.timings;

  // [SECTION] Lanes: one process per active GPU; its host threads, then its streams.
  detail::add_gpu_processes(tr, p, mem);
  std::map<int, int> first_thread_of_gpu;
  for (const core::ThreadDesc& t : p.threads) {
    const core::ProcessDesc& proc = p.processes[t.process];
    prof::ThreadInfo ti;
    ti.pid = t.gpu;
    ti.tid = host_tid(t.id);
    ti.name = t.name + " [" + proc.name + (proc.has_gil ? ", GIL" : "") + "]";
    ti.role = prof::LaneRole::kHost;
    ti.sort_index = t.id;
    tr.threads.push_back(ti);
    first_thread_of_gpu.emplace(t.gpu, t.id);
  }
  for (const core::StreamDesc& st : p.streams) {
    prof::ThreadInfo ti;
    ti.pid = st.gpu;
    ti.tid = stream_tid(st.id);
    ti.name = "stream " + std::to_string(st.id) + " " + st.name;
    ti.role = lane_role(st.role);
    ti.sort_index = 1000 + st.id;
    tr.threads.push_back(ti);
  }

  // [SECTION] Host and device events (about three events and one flow per op: reserve once).
  // Names, categories and args follow Kineto and NCCL (backends/common/kineto_names.hpp;
  // docs/trace-format.md, "Kineto conventions"); stream and host dependencies become CUDA
  // events as Kineto records them with enable_cuda_sync_events (cuda_sync_plan.hpp).
  const CudaSyncPlan& sync = prep.sync;
  // The ProfilerStep#N spans (drawn below): a host wait on a GPU's loop thread starts no earlier
  // than its op's step there, so it nests in that step's annotation.
  const std::vector<core::StepSpan>& step_spans = prep.step_spans;
  std::map<std::pair<int, int>, TimeNs> step_start;  // (gpu, step) -> start
  for (const core::StepSpan& ss : step_spans) step_start[{ss.gpu, ss.step}] = ss.start_ns;
  std::int64_t next_corr = sync.next_corr;
  std::vector<char> sync_lane(p.active_gpus.empty()
                                  ? 0
                                  : static_cast<std::size_t>(*std::max_element(
                                        p.active_gpus.begin(), p.active_gpus.end())) +
                                        1,
                              0);
  // The events and flows counted first, so that each vector is allocated once: growing a vector
  // of a million events moves every one of them (docs/trace-format.md, "Building speed").
  if constexpr (Sink::kReserves) {
    const OpEventCount n = count_op_events(p, timing, sync);
    sink.reserve(n.events + step_spans.size(), n.flows);
  }
  GroupArgs group_args(p);
  const PlainNames plain_names(p.names);
  EnumSpellings spell;
  std::string name_buf;
  for (const Op& op : p.ops) {
    count.add();
    const core::OpTiming& t = timing[op.id];
    if (t.end_ns < 0) continue;  // not run (cancelled)
    const int pid = p.threads[op.thread].gpu;
    const int htid = host_tid(op.thread);
    // The op's name, read once into a buffer the loop reuses (Program::append_name;
    // docs/program.md, "Names"): no allocation per op.
    name_buf.clear();
    p.append_name(op, name_buf);
    const std::string& name = name_buf;
    const prof::FlaggedStr name_text{name, plain_names.plain(op.name)};
    if (const OpId src = sync.host_wait_on[op.id]; src != core::kNoOp) {
      // The thread blocked on a GPU op of its process: cudaEventSynchronize until it was ready,
      // and Kineto's "Event Sync" on the producer's GPU (no stream: tid and stream -1) when the
      // wait ended. Args as CUPTI's synchronisation record, the record's correlation resolved.
      const std::int64_t c = next_corr++;
      TimeNs from = sync.host_wait_from[op.id];
      if (const auto first = first_thread_of_gpu.find(pid);
          first != first_thread_of_gpu.end() && first->second == op.thread) {
        if (const auto st = step_start.find({pid, op.step}); st != step_start.end())
          from = std::min(std::max(from, st->second), t.ready_ns);
      }
      add_event(sink, pid, htid, from, t.ready_ns - from, prof::PlainStr("cudaEventSynchronize"),
                "cuda_runtime", EventClass::kHost, -1, c);
      const Op& so = p.ops[src];
      const int gpu = p.streams[so.stream].gpu;
      if (static_cast<std::size_t>(gpu) < sync_lane.size()) sync_lane[gpu] = 1;
      sink.begin(gpu, kCudaSyncTid, t.ready_ns, 0, prof::PlainStr("Event Sync"), "cuda_sync",
                 EventClass::kOther, -1, c, 5);
      sink.arg("cuda_sync_kind", prof::PlainStr("Event Sync"));
      sink.arg("stream", std::int64_t{-1});
      sink.arg("wait_on_stream", static_cast<std::int64_t>(stream_tid(so.stream)));
      sink.arg("wait_on_cuda_event_record_corr_id", sync.record_corr[src]);
      sink.arg("wait_on_cuda_event_id", sync.record_event[src]);
      sink.end();
    }
    if (t.gil_wait_ns > 0) {
      add_event(sink, pid, htid, t.ready_ns, t.gil_wait_ns, prof::PlainStr("GIL wait"), "gil_wait",
                EventClass::kGilWait, op.id, -1);
    }
    const std::int64_t corr = op.id + 1;
    if (op.kind == OpKind::kHostWork) {
      sink.begin(pid, htid, t.start_ns, t.end_ns - t.start_ns, name_text, "cpu_op",
                 EventClass::kHost, op.id, -1, 1);
      sink.arg("phase", spell.of(op.phase));
      sink.end();
      continue;
    }
    if (op.kind == OpKind::kMarker || op.kind == OpKind::kAlloc || op.kind == OpKind::kFree)
      continue;
    // Python part (GIL held), then the dispatch + launch call (GIL released): the stream waits
    // first, the launch, then the event record, sharing the dispatch time.
    // Real runs: the launch call spans from the measured end of the Python part to the measured
    // issue end (the dispatch and the real enqueue), so the device op, enqueued inside it, cannot
    // start before it; simulated runs: the last dispatch_ns of the issue.
    const TimeNs dispatch_start = t.python_start_ns >= 0
                                      ? std::min(t.python_start_ns + op.python_ns, t.issue_end_ns)
                                      : t.issue_end_ns - op.dispatch_ns;
    if (op.python_ns > 0) {
      sink.begin(pid, htid, dispatch_start - op.python_ns, op.python_ns, name_text, "cpu_op",
                 EventClass::kHost, op.id, -1, 1);
      sink.arg("phase", spell.of(op.phase));
      sink.end();
    }
    const std::vector<OpId>& waits = sync.stream_waits[op.id];
    const bool records = sync.record_corr[op.id] >= 0;
    const TimeNs call_ns =
        sync_call_ns(op.dispatch_ns, static_cast<int>(waits.size()) + (records ? 1 : 0));
    const core::StreamDesc& st = p.streams[op.stream];
    TimeNs launch_start = dispatch_start;
    // Several waits of one op are waited one after the other by the stream (each
    // cudaStreamWaitEvent is a stream command): their spans tile, none overlaps the previous one.
    TimeNs prev_wait_end = std::numeric_limits<TimeNs>::min();
    for (const OpId src : waits) {
      // cudaStreamWaitEvent on the host, and on this stream the span it waited: from the stream
      // becoming free (or the call) to the producer's end, ending before this op starts so that
      // it sorts before it and nests with the stream's kernels.
      const std::int64_t c = next_corr++;
      add_event(sink, pid, htid, launch_start, call_ns, prof::PlainStr("cudaStreamWaitEvent"),
                "cuda_runtime", EventClass::kHost, op.id, c);
      const TimeNs wait_end = std::min(
          std::max({sync.stream_free_ns[op.id], launch_start, timing[src].end_ns, prev_wait_end}),
          t.start_ns - 1);
      const TimeNs wait_start =
          std::min(std::max({sync.stream_free_ns[op.id], launch_start, prev_wait_end}), wait_end);
      prev_wait_end = wait_end;
      sink.begin(st.gpu, stream_tid(st.id), wait_start, wait_end - wait_start,
                 prof::PlainStr("Stream Wait Event"), "cuda_sync", EventClass::kOther, -1, c, 4);
      sink.arg("cuda_sync_kind", prof::PlainStr("Stream Wait Event"));
      sink.arg("wait_on_stream", static_cast<std::int64_t>(stream_tid(p.ops[src].stream)));
      sink.arg("wait_on_cuda_event_record_corr_id", sync.record_corr[src]);
      sink.arg("wait_on_cuda_event_id", sync.record_event[src]);
      sink.end();
      launch_start += call_ns;
    }
    const TimeNs launch_end = t.issue_end_ns - (records ? call_ns : 0);
    const LaunchCall call = launch_call(op.kind);
    if (op.dispatch_ns > 0) {
      add_event(sink, pid, htid, launch_start, launch_end - launch_start, call.name, call.cat,
                EventClass::kHost, op.id, corr);
    }
    if (records) {
      add_event(sink, pid, htid, launch_end, t.issue_end_ns - launch_end,
                prof::PlainStr("cudaEventRecord"), "cuda_runtime", EventClass::kHost, op.id,
                sync.record_corr[op.id]);
    }
    // The device event: its name, category and class by kind, then its args.
    const int dev_pid = st.gpu, dev_tid = stream_tid(st.id);
    const TimeNs dur_ns = t.end_ns - t.start_ns;
    // The args after the kind's own (below): reserved with them, so the vector is allocated once.
    const std::size_t tail_args = (op.fixed_ns >= 0 ? 1 : 0) + 1 + (op.batch >= 0 ? 1 : 0) + 1;
    if (op.kind == OpKind::kCompute) {
      sink.begin(dev_pid, dev_tid, t.start_ns, dur_ns, name_text, "kernel", EventClass::kCompute,
                 op.id, corr, 4 + tail_args);
      sink.arg("kind", spell.of(op.compute_kind));
      sink.arg("dtype", spell.of(op.dtype));
      sink.arg("flops", op.flops);
      sink.arg("bytes", static_cast<std::int64_t>(op.bytes));
    } else if (op.kind == OpKind::kCopy) {
      // Kineto's memcpy name and args: bytes, and bytes per ns (= GB/s) over the copy's duration.
      const double gbps =
          dur_ns > 0 ? static_cast<double>(op.bytes) / static_cast<double>(dur_ns) : 0.0;
      sink.begin(dev_pid, dev_tid, t.start_ns, dur_ns, kineto_memcpy_name(op.copy_kind),
                 "gpu_memcpy", EventClass::kCopy, op.id, corr,
                 4 + (op.peer_gpu >= 0 ? 1 : 0) + tail_args);
      sink.arg("bytes", static_cast<std::int64_t>(op.bytes));
      sink.arg("memory bandwidth (GB/s)", gbps);
      sink.arg("copy_kind", spell.of(op.copy_kind));
      sink.arg("op", name_text);
      if (op.peer_gpu >= 0) sink.arg("src_device", static_cast<std::int64_t>(op.peer_gpu));
    } else {
      // A collective simulated elsewhere (core/program/program_slice.hpp) has no group here.
      const GroupArgs::Group& g = group_args.of(op.group);
      // The algorithm and protocol the executor recorded (the simulator's plan); where it could
      // not know them, the op's own forced algorithm, if any.
      const core::CollectiveAlgo algo = t.algo != core::CollectiveAlgo::kAuto ? t.algo : op.algo;
      const core::NcclProto proto = t.proto;
      const MsgNelems nel = msg_nelems(op.collective, op.dtype, op.bytes, g.size);
      const char* algo_name = nccl_algo_name(algo);
      const char* proto_name = nccl_proto_name(proto);
      sink.begin(
          dev_pid, dev_tid, t.start_ns, dur_ns,
          group_args.kernel_name(op.collective, op.dtype, algo), "kernel",
          EventClass::kCommunication, op.id, corr,
          12 + (algo_name ? 1 : 0) + (proto_name ? 1 : 0) + (op.root >= 0 ? 1 : 0) + tail_args);
      // PyTorch's record_param_comms args, as in ../shared/fixtures/kineto/nccl_data.json.gz.
      sink.arg("Collective name", torch_collective_name(op.collective));
      sink.arg("In msg nelems", nel.in);
      sink.arg("Out msg nelems", nel.out);
      sink.arg("Group size", static_cast<std::int64_t>(g.size));
      sink.arg("dtype", torch_dtype_name(op.dtype));
      sink.arg("In split size", prof::PlainStr("[]"));
      sink.arg("Out split size", prof::PlainStr("[]"));
      sink.arg("Process Group Name", g.id);
      sink.arg("Process Group Description", g.description);
      sink.arg("Process Group Ranks", g.ranks);
      sink.arg("bytes", static_cast<std::int64_t>(op.bytes));
      sink.arg("op", name_text);
      if (algo_name) sink.str_arg("algorithm", algo_name);
      if (proto_name) sink.str_arg("protocol", proto_name);
      if (op.root >= 0) sink.arg("root", static_cast<std::int64_t>(op.root));
    }
    if (op.fixed_ns >= 0)
      sink.arg("simulated_elsewhere_ns", static_cast<std::int64_t>(op.fixed_ns));
    sink.arg("phase", spell.of(op.phase));
    if (op.batch >= 0) sink.arg("batch", op.batch);
    sink.arg("step", static_cast<std::int64_t>(op.step));
    sink.end();
    if (op.dispatch_ns > 0)
      sink.flow(corr, "ac2g", pid, htid, launch_start, dev_pid, dev_tid, t.start_ns);
  }
  // The lane of Kineto's stream-less synchronisation records ("Event Sync": tid -1).
  for (std::size_t g = 0; g < sync_lane.size(); ++g) {
    if (!sync_lane[g]) continue;
    prof::ThreadInfo ti;
    ti.pid = static_cast<int>(g);
    ti.tid = kCudaSyncTid;
    ti.name = "cuda sync (host waits)";
    ti.role = prof::LaneRole::kOther;
    ti.sort_index = 999;
    tr.threads.push_back(ti);
  }

  // [SECTION] Cross-GPU dependency flows (a stream waiting for another GPU's op).
  std::int64_t flow_id = static_cast<std::int64_t>(p.ops.size()) + 1;
  for (const Op& op : p.ops) {
    if (op.stream < 0 || timing[op.id].start_ns < 0) continue;
    for (const core::Dep& d : op.deps) {
      const Op& src = p.ops[d.op];
      if (d.kind != core::DepKind::kStreamWaits || src.stream < 0 || src.gpu == op.gpu ||
          timing[d.op].end_ns < 0)
        continue;
      // The flow leaves the producer's slice at its last nanosecond (slices are half-open, as in
      // Perfetto's slice stack, so its end instant belongs to no slice; a zero-length producer is
      // left at its start) and enters the consumer at its start.
      const TimeNs from = std::max(timing[d.op].start_ns, timing[d.op].end_ns - 1);
      sink.flow(flow_id++, "dependency", src.gpu, stream_tid(src.stream), from, op.gpu,
                stream_tid(op.stream), timing[op.id].start_ns);
    }
  }

  // [SECTION] ProfilerStep#N spans per GPU (detail::add_step_annotations).
  step_annotations(sink, p, step_spans);

  count.finish();
  if (!sink.wants_rest()) return;

  // [SECTION] Memory counters: allocated bytes per GPU, in total and by category.
  detail::add_memory_counters(tr, mem);

  // [SECTION] Metadata
  detail::add_metadata(tr, s, p, r, mem);
}

}  // namespace

prof::Trace build_trace(const core::Scenario& s, const core::Program& p,
                        const core::ExecutionResult& r, const core::MemoryReport& mem,
                        core::Progress* progress) {
  prof::Trace tr;
  TraceSink sink(tr);
  // Four passes over the ops: the sync plan's two, the step spans, then the events
  // (docs/limits.md, "Progress").
  core::ProgressCount count(progress, "building the trace",
                            4 * static_cast<std::int64_t>(p.ops.size()), "op passes");
  const BuildPrep prep = build_prep(p, r, count);
  build_into(sink, s, p, r, mem, prep, count);
  return tr;
}

namespace {

// The producer of a streamed trace's events, both builds: the same sink over the same inputs.
// Each build counts its ops into `count` when given, else into a phase "writing the trace" of
// `progress` (when given).
prof::FormattedTrace::Producer producer_of(const core::Scenario& s, const core::Program& p,
                                           const core::ExecutionResult& r,
                                           const core::MemoryReport& mem,
                                           std::shared_ptr<const BuildPrep> prep,
                                           core::Progress* progress,
                                           core::ProgressCount* count = nullptr) {
  return [&s, &p, &r, &mem, prep = std::move(prep), progress, count](prof::FormattedTrace& into) {
    FormattedSink sink(into);
    core::ProgressCount writing;
    if (!count)
      writing = core::ProgressCount(progress, "writing the trace",
                                    static_cast<std::int64_t>(p.ops.size()), "ops");
    build_into(sink, s, p, r, mem, *prep, count ? *count : writing);
  };
}

}  // namespace

prof::FormattedTrace build_formatted_trace(const core::Scenario& s, const core::Program& p,
                                           const core::ExecutionResult& r,
                                           const core::MemoryReport& mem,
                                           core::Progress* progress) {
  // Streamed (docs/trace-format.md, "Streaming the text"): built once now to count each line's
  // bytes and fill `rest`, and again when written (formatted_trace_producer), each line formatted
  // into its place in the file. The sync plan and step spans are kept for the second build (already
  // in memory: making them again cost as much CPU as keeping them costs memory).
  prof::FormattedTrace ft;
  core::ProgressCount count(progress, "building the trace",
                            4 * static_cast<std::int64_t>(p.ops.size()), "op passes");
  auto prep = std::make_shared<const BuildPrep>(build_prep(p, r, count));
  ft.stream_from(producer_of(s, p, r, mem, prep, progress, &count), prep);
  return ft;
}

prof::FormattedTrace::Producer formatted_trace_producer(
    const prof::FormattedTrace& ft, const core::Scenario& s, const core::Program& p,
    const core::ExecutionResult& r, const core::MemoryReport& mem, core::Progress* progress) {
  auto prep = std::static_pointer_cast<const BuildPrep>(ft.producer_state());
  CSIM_ASSERT_MSG(prep != nullptr, "formatted_trace_producer: not a build_formatted_trace trace");
  return producer_of(s, p, r, mem, std::move(prep), progress);
}

int completed_steps(const core::Program& p, const core::ExecutionResult& r) {
  std::vector<char> missing(static_cast<std::size_t>(std::max(p.steps, 0)) + 1, 0);
  for (const Op& op : p.ops) {
    if (op.step > 0 && op.step <= p.steps && r.timings[op.id].end_ns < 0) missing[op.step] = 1;
  }
  int k = 0;
  while (k < p.steps && !missing[k + 1]) ++k;
  return k;
}

int keep_completed_steps(const core::Program& p, core::ExecutionResult* r) {
  const int k = completed_steps(p, *r);
  for (const Op& op : p.ops) {
    if (op.step > k) r->timings[op.id] = core::OpTiming{};
  }
  return k;
}

}  // namespace csim::backend
