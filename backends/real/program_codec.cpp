// backends/real/program_codec.hpp. The fields in declaration order (core/program/program.hpp); a
// field added there must be added here, which the size checks below make a compile error.
#include "backends/real/program_codec.hpp"

#include "backends/real/byte_io.hpp"

namespace csim::real {
namespace {

using core::Op;
using core::Program;

// Op packs into 168 bytes and RankSymmetry / Program hold what is written below: a new field
// changes a size and stops the build here until it is encoded.
static_assert(sizeof(Op) == 168, "a new Op field: encode and decode it below");
static_assert(sizeof(core::Dep) == 8 && sizeof(core::NameId) == 8);

template <typename E>
void put_enum(ByteWriter& w, E e) {
  w.put(static_cast<std::uint8_t>(e));
}
// An enum value below `count`, else the reader fails (no Program holds it).
template <typename E>
E get_enum(ByteReader& r, int count) {
  const std::uint8_t v = r.get<std::uint8_t>();
  if (v >= count) r.fail();
  return static_cast<E>(v);
}

void encode_op(ByteWriter& w, const Op& op) {
  w.put(op.id);
  w.put(op.thread);
  w.put(op.stream);
  w.put(op.gpu);
  w.put(op.step);
  put_enum(w, op.kind);
  put_enum(w, op.phase);
  put_enum(w, op.compute_kind);
  put_enum(w, op.dtype);
  w.put(op.name.index);
  w.put(op.name.field);
  w.put(op.python_ns);
  w.put(op.dispatch_ns);
  w.put<std::uint64_t>(op.deps.size());
  for (const core::Dep& d : op.deps) {
    w.put(d.op);
    put_enum(w, d.kind);
  }
  w.put(op.flops);
  w.put(op.max_efficiency);
  w.put(op.gemm.batch);
  w.put(op.gemm.m);
  w.put(op.gemm.n);
  w.put(op.gemm.k);
  w.put(op.bytes);
  put_enum(w, op.gemm_pass);
  put_enum(w, op.copy_kind);
  put_enum(w, op.collective);
  put_enum(w, op.algo);
  w.put(op.peer_gpu);
  w.put(op.group);
  w.put(op.root);
  w.put(op.instance);
  put_enum(w, op.mem_category);
  w.put(op.record_stream);
  w.put(op.fixed_ns);
  w.put(op.batch);
}

void decode_op(ByteReader& r, Op* op) {
  op->id = r.get<core::OpId>();
  op->thread = r.get<int>();
  op->stream = r.get<int>();
  op->gpu = r.get<int>();
  op->step = r.get<int>();
  op->kind = get_enum<core::OpKind>(r, 7);
  op->phase = get_enum<core::Phase>(r, core::kNumPhases);
  op->compute_kind = get_enum<core::ComputeKind>(r, 4);
  op->dtype = get_enum<core::Dtype>(r, 5);
  op->name.index = r.get<std::uint32_t>();
  op->name.field = r.get<std::int32_t>();
  op->python_ns = r.get<TimeNs>();
  op->dispatch_ns = r.get<TimeNs>();
  op->deps.resize(r.get_count(sizeof(core::OpId) + 1));
  for (core::Dep& d : op->deps) {
    d.op = r.get<core::OpId>();
    d.kind = get_enum<core::DepKind>(r, 2);
  }
  op->flops = r.get<double>();
  op->max_efficiency = r.get<double>();
  op->gemm.batch = r.get<std::int64_t>();
  op->gemm.m = r.get<std::int64_t>();
  op->gemm.n = r.get<std::int64_t>();
  op->gemm.k = r.get<std::int64_t>();
  op->bytes = r.get<Bytes>();
  op->gemm_pass = get_enum<core::GemmPass>(r, 4);
  op->copy_kind = get_enum<core::CopyKind>(r, 5);
  op->collective = get_enum<core::CollectiveKind>(r, 9);
  op->algo = get_enum<core::CollectiveAlgo>(r, core::kNumCollectiveAlgos);
  op->peer_gpu = r.get<int>();
  op->group = r.get<int>();
  op->root = r.get<int>();
  op->instance = r.get<int>();
  op->mem_category = get_enum<core::MemCategory>(r, core::kNumMemCategories);
  op->record_stream = r.get<bool>();
  op->fixed_ns = r.get<TimeNs>();
  op->batch = r.get<std::int64_t>();
}

}  // namespace

void encode_program(const Program& p, std::string* out) {
  ByteWriter w(out);
  w.put_str(p.strategy_label);
  w.put(p.world_gpus);
  w.put(p.gpus_per_node);
  w.put_vec(p.active_gpus);
  w.put(p.steps);
  w.put(p.samples_per_step);
  w.put<std::uint64_t>(p.processes.size());
  for (const core::ProcessDesc& d : p.processes) {
    w.put(d.id);
    w.put(d.node);
    w.put_str(d.name);
    w.put(d.has_gil);
  }
  w.put<std::uint64_t>(p.threads.size());
  for (const core::ThreadDesc& d : p.threads) {
    w.put(d.id);
    w.put(d.process);
    w.put(d.gpu);
    w.put_str(d.name);
  }
  w.put<std::uint64_t>(p.streams.size());
  for (const core::StreamDesc& d : p.streams) {
    w.put(d.id);
    w.put(d.gpu);
    put_enum(w, d.role);
    w.put_str(d.name);
  }
  w.put<std::uint64_t>(p.groups.size());
  for (const core::CommGroup& g : p.groups) {
    w.put(g.id);
    w.put_vec(g.gpus);
    w.put_str(g.name);
  }
  // The names before the ops: patterns in id order (id 0, "", is every pool's own).
  w.put<std::uint64_t>(p.names.size());
  for (std::size_t i = 1; i < p.names.size(); ++i)
    w.put_str(p.names.pattern(core::NameId{static_cast<std::uint32_t>(i), -1}));
  w.put<std::uint64_t>(p.ops.size());
  for (const Op& op : p.ops) encode_op(w, op);
  w.put<std::uint64_t>(p.warnings.size());
  for (const std::string& s : p.warnings) w.put_str(s);
  w.put<std::uint64_t>(p.symmetry.images.size());
  for (const std::vector<int>& image : p.symmetry.images) w.put_vec(image);
  w.put_vec(p.symmetry.weight_of_gpu);
  w.put(p.expandable_segments);
  w.put(p.collective_instances);
  w.put(p.model_flops_per_step);
  w.put(p.hardware_flops_per_step);
}

bool decode_program(std::string_view bytes, std::size_t* offset, Program* p, std::string* why) {
  ByteReader r(bytes, *offset);
  *p = Program{};
  p->strategy_label = r.get_str();
  p->world_gpus = r.get<int>();
  p->gpus_per_node = r.get<int>();
  p->active_gpus = r.get_vec<int>();
  p->steps = r.get<int>();
  p->samples_per_step = r.get<std::int64_t>();
  // Each record below is at least 8 bytes (its string's count), which bounds the counts.
  p->processes.resize(r.get_count(8));
  for (core::ProcessDesc& d : p->processes) {
    d.id = r.get<int>();
    d.node = r.get<int>();
    d.name = r.get_str();
    d.has_gil = r.get<bool>();
  }
  p->threads.resize(r.get_count(8));
  for (core::ThreadDesc& d : p->threads) {
    d.id = r.get<int>();
    d.process = r.get<int>();
    d.gpu = r.get<int>();
    d.name = r.get_str();
  }
  p->streams.resize(r.get_count(8));
  for (core::StreamDesc& d : p->streams) {
    d.id = r.get<int>();
    d.gpu = r.get<int>();
    d.role = get_enum<core::StreamRole>(r, 3);
    d.name = r.get_str();
  }
  p->groups.resize(r.get_count(8));
  for (core::CommGroup& g : p->groups) {
    g.id = r.get<int>();
    g.gpus = r.get_vec<int>();
    g.name = r.get_str();
  }
  const std::size_t names = r.get_count(8);
  for (std::size_t i = 1; i < names && r.ok(); ++i) {
    // A pattern holds kNameField (it is interned with a field, which the ops carry); a plain
    // name does not. Ids come back in first-interned order, the encoded order.
    const std::string s = r.get_str();
    const bool pattern = s.find(core::kNameField) != std::string::npos;
    if (p->names.intern(s, pattern ? 0 : -1).index != i) r.fail();
  }
  p->ops.resize(r.get_count(sizeof(Op) / 2));
  for (Op& op : p->ops) {
    decode_op(r, &op);
    if (op.name.index >= p->names.size()) r.fail();
    if (!r.ok()) break;
  }
  p->warnings.resize(r.get_count(8));
  for (std::string& s : p->warnings) s = r.get_str();
  p->symmetry.images.resize(r.get_count(8));
  for (std::vector<int>& image : p->symmetry.images) image = r.get_vec<int>();
  p->symmetry.weight_of_gpu = r.get_vec<int>();
  p->expandable_segments = r.get<bool>();
  p->collective_instances = r.get<int>();
  p->model_flops_per_step = r.get<double>();
  p->hardware_flops_per_step = r.get<double>();
  if (!r.ok()) {
    *why = "the Program's bytes are cut short or corrupt (at byte " + std::to_string(r.offset()) +
           " of " + std::to_string(bytes.size()) + ")";
    return false;
  }
  *offset = r.offset();
  return true;
}

}  // namespace csim::real
