// A collective's kind, size and group from the CPU ops around its launch (docs/replay.md,
// "Collectives"; the rules in collective_info.hpp).
#include "replay/collective_info.hpp"

#include <algorithm>
#include <cctype>

#include "replay/record_fields.hpp"

namespace csim::replay {
namespace {

bool starts(const std::string& s, const char* p) {
  return s.rfind(p, 0) == 0;
}
bool has(const std::string& s, const char* w) {
  return s.find(w) != std::string::npos;
}

std::int64_t elements(const std::vector<std::int64_t>& shape) {
  if (shape.empty()) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (std::int64_t{1} << 50) / d)) return 0;
    n *= d;
  }
  return n;
}

// The entries of an "Input type" list ("[\"float\",\"\",\"Scalar\"]").
std::vector<std::string> parse_types(const std::string& json) {
  std::vector<std::string> out;
  std::string cur;
  bool in = false;
  for (char c : json) {
    if (c == '"') {
      if (in) out.push_back(cur);
      cur.clear();
      in = !in;
    } else if (in) {
      cur += c;
    }
  }
  return out;
}

core::Dtype dtype_of_bytes(Bytes b, const std::string& type) {
  if (has(type, "BFloat16") || has(type, "bf16")) return core::Dtype::kBf16;
  if (b == 2) return core::Dtype::kFp16;
  return core::Dtype::kFp32;
}

}  // namespace

bool is_wait_op(const Record& r) {
  return (r.name == "record_param_comms" && r.collective_name == "wait") ||
         (starts(r.name, "c10d") && has(r.name, "wait"));
}

bool is_comm_op(const Record& r) {
  if (is_wait_op(r)) return false;
  return r.name == "record_param_comms" || starts(r.name, "nccl:") || starts(r.name, "c10d::");
}

std::vector<std::vector<std::int64_t>> parse_dims(const std::string& json) {
  std::vector<std::vector<std::int64_t>> out;
  int depth = 0;
  std::int64_t x = -1;
  for (char c : json) {
    if (c == '[') {
      if (++depth == 2) out.emplace_back();
    } else if (c == ']' || c == ',') {
      if (x >= 0 && depth == 2) out.back().push_back(x);
      x = -1;
      if (c == ']') --depth;
    } else if (c >= '0' && c <= '9') {
      x = (x < 0 ? 0 : x * 10) + (c - '0');
      if (x > (std::int64_t{1} << 50)) return {};
    } else if (c != ' ') {
      return {};
    }
  }
  return depth == 0 ? out : std::vector<std::vector<std::int64_t>>{};
}

Bytes input_type_bytes(const std::string& t) {
  if (t == "float" || t == "int" || t == "unsigned int") return 4;
  if (t == "double" || t == "long" || t == "long int" || t == "int64_t" ||
      t == "c10::complex<float>")
    return 8;
  if (has(t, "Half") || has(t, "BFloat16") || t == "short") return 2;
  if (t == "signed char" || t == "unsigned char" || t == "bool" || t == "char" || has(t, "Float8"))
    return 1;
  return 0;
}

Bytes kernel_type_bytes(const std::string& k) {
  // ncclKernel_AllReduce_RING_LL_Sum_float(...), ncclDevKernel_AllReduce_Sum_f32_RING_LL
  const std::string n = k.substr(0, k.find('('));
  for (const auto& [w, b] : std::initializer_list<std::pair<const char*, Bytes>>{{"_bfloat16", 2},
                                                                                 {"_bf16", 2},
                                                                                 {"_half", 2},
                                                                                 {"_f16", 2},
                                                                                 {"_float", 4},
                                                                                 {"_f32", 4},
                                                                                 {"_double", 8},
                                                                                 {"_f64", 8},
                                                                                 {"_int64_t", 8},
                                                                                 {"_i64", 8},
                                                                                 {"_u64", 8},
                                                                                 {"_int32_t", 4},
                                                                                 {"_i32", 4},
                                                                                 {"_u32", 4},
                                                                                 {"_int8_t", 1},
                                                                                 {"_uint8_t", 1},
                                                                                 {"_i8", 1},
                                                                                 {"_u8", 1}}) {
    const std::size_t at = n.find(w);
    if (at == std::string::npos) continue;
    const char next = at + std::string(w).size() < n.size() ? n[at + std::string(w).size()] : '_';
    if (next == '_' || next == '(') return b;
  }
  return 0;
}

CollectiveInfo collective_info(const std::vector<const Record*>& ops, const std::string& kernel,
                               int world) {
  CollectiveInfo c;
  const Record *rpc = nullptr, *nccl = nullptr, *c10d = nullptr;
  for (const Record* r : ops) {
    if (rpc == nullptr && r->name == "record_param_comms" && !is_wait_op(*r)) rpc = r;
    if (nccl == nullptr && starts(r->name, "nccl:")) nccl = r;
    if (c10d == nullptr && starts(r->name, "c10d::")) c10d = r;
  }
  // Kind: the Collective name, else the nccl:<op> / c10d::<op> name, else the kernel's.
  std::string kind_name = rpc != nullptr ? rpc->collective_name : "";
  if (kind_name.empty() && nccl != nullptr) kind_name = nccl->name.substr(5);
  if (kind_name.empty() && c10d != nullptr) kind_name = c10d->name.substr(6);
  c.kind = collective_kind(kind_name, kernel);
  // Group: Group size / Process Group Ranks, read.
  if (rpc != nullptr) {
    c.ranks = rpc->pg_ranks;
    if (rpc->group_size >= 1) c.group_size = static_cast<int>(rpc->group_size);
    if (c.group_size < 1 && !c.ranks.empty()) c.group_size = static_cast<int>(c.ranks.size());
    if (c.ranks.empty() && c.group_size > 1 && rpc->rank_start >= 0 && rpc->rank_stride >= 1)
      for (int i = 0; i < c.group_size; ++i)
        c.ranks.push_back(static_cast<int>(rpc->rank_start + i * rpc->rank_stride));
    if (static_cast<int>(c.ranks.size()) != c.group_size) c.ranks.clear();
    if (c.group_size >= 1) c.group_source = GroupSource::kRead;
    if (!rpc->pg_name.empty()) c.group_key = "pg " + rpc->pg_name;
  }
  // Size: In / Out msg nelems x dtype, read.
  if (rpc != nullptr && rpc->in_nelems >= 0) {
    c.dtype = dtype_of(rpc->dtype);
    c.bytes = std::max(rpc->in_nelems, rpc->out_nelems) * dtype_bytes(rpc->dtype);
    c.size_source = SizeSource::kRecordParamComms;
  } else {
    // Inferred: the largest tensor of the nccl:<op> (its input; an all-gather's shard times the
    // group), else of the c10d::<op> (which lists output and input), in bytes of its Input type
    // or the kernel name's type.
    auto largest = [](const Record* r, Bytes* elem, std::string* type) {
      if (r == nullptr) return std::int64_t{0};
      const auto dims = parse_dims(r->input_dims);
      const auto types = parse_types(r->input_types);
      std::int64_t best = 0;
      for (std::size_t i = 0; i < dims.size(); ++i) {
        const std::int64_t n = elements(dims[i]);
        if (n <= best) continue;
        best = n;
        *type = i < types.size() ? types[i] : "";
        *elem = input_type_bytes(*type);
      }
      return best;
    };
    Bytes elem = 0;
    std::string type;
    std::int64_t n = largest(c10d, &elem, &type);
    const bool from_c10d = n > 0;
    if (!from_c10d) n = largest(nccl, &elem, &type);
    if (elem == 0) elem = kernel_type_bytes(kernel);
    // An all-gather's c10d op lists [output, input]: the group is their ratio.
    if (c.group_size < 1 && c10d != nullptr && c.kind == core::CollectiveKind::kAllGather) {
      const auto dims = parse_dims(c10d->input_dims);
      if (dims.size() >= 2 && elements(dims[1]) > 0 && elements(dims[0]) % elements(dims[1]) == 0 &&
          elements(dims[0]) / elements(dims[1]) > 1) {
        c.group_size = static_cast<int>(elements(dims[0]) / elements(dims[1]));
        c.group_source = GroupSource::kAllGatherRatio;
      }
    }
    if (n > 0 && elem > 0) {
      if (!from_c10d && c.kind == core::CollectiveKind::kAllGather && c.group_size > 1)
        n *= c.group_size;  // nccl:_all_gather_base holds the shard
      c.bytes = n * elem;
      c.dtype = dtype_of_bytes(elem, type);
      c.size_source = SizeSource::kInputDims;
    }
  }
  if (c.group_size < 1 && world >= 1) {
    c.group_size = world;
    c.group_source = GroupSource::kWorld;
  }
  if (c.group_key.empty() && !c.ranks.empty()) {
    c.group_key = "ranks";
    for (int r : c.ranks) {
      c.group_key += ' ';  // appended in two steps: GCC 12's -Wrestrict misreads " " + string
      c.group_key += std::to_string(r);
    }
  }
  if (c.group_key.empty() && c.group_size >= 1) {
    c.group_key = "size ";
    c.group_key += std::to_string(c.group_size);
  }
  return c;
}

}  // namespace csim::replay
