// Stage 1: file -> records (docs/replay.md, "Stages"). One pass over traceEvents with simdjson's
// DOM; the event's category and phase pick which args are read.
#include "replay/kineto_tokenizer.hpp"

#include <zlib.h>

#include <simdjson.h>
#include <cmath>
#include <limits>
#include <string_view>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace csim::replay {
namespace {

namespace dom = simdjson::dom;

const char* const kHint =
    "simrun replay reads PyTorch-profiler traces (torch.profiler ... export_chrome_trace), "
    "plain or .json.gz";

std::string read_maybe_gzip(const std::string& path) {
  core::check_input_file(path, "trace file", kHint);
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) throw InputError(path, "", "cannot open the trace file", kHint);
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  const bool bad = n < 0 || (err != Z_OK && err != Z_STREAM_END);
  const std::string why = bad ? msg : "";
  gzclose(f);
  if (bad) throw InputError(path, "", "corrupt gzip data: " + why, kHint);
  return out;
}

// A JSON number as int64 nanoseconds from microseconds (Chrome trace "ts"/"dur" are µs; Kineto
// writes integers, or µs with three decimals since PyTorch 2.0). Integers convert exactly.
bool us_to_ns(dom::element v, TimeNs* out) {
  std::int64_t i = 0;
  if (v.get_int64().get(i) == simdjson::SUCCESS) {
    if (i > std::numeric_limits<TimeNs>::max() / 1000 ||
        i < std::numeric_limits<TimeNs>::min() / 1000)
      return false;
    *out = i * 1000;
    return true;
  }
  double d = 0;
  if (v.get_double().get(d) != simdjson::SUCCESS || !std::isfinite(d)) return false;
  const double ns = d * 1000.0;
  if (!(std::fabs(ns) < 9.0e18)) return false;
  *out = static_cast<TimeNs>(std::llround(ns));
  return true;
}

// An int arg (ints, or doubles holding an integer); false when present but not a number.
bool int_arg(dom::object args, const char* key, std::int64_t* out, bool* present) {
  dom::element v;
  *present = args[key].get(v) == simdjson::SUCCESS;
  if (!*present) return true;
  std::int64_t i = 0;
  if (v.get_int64().get(i) == simdjson::SUCCESS) {
    *out = i;
    return true;
  }
  double d = 0;
  if (v.get_double().get(d) == simdjson::SUCCESS && std::isfinite(d) && std::fabs(d) < 9.0e18) {
    *out = static_cast<std::int64_t>(d);
    return true;
  }
  std::string_view s;  // some exporters write ids as strings
  if (v.get_string().get(s) == simdjson::SUCCESS) {
    std::int64_t x = 0;
    bool any = false;
    for (char c : s) {
      if (c < '0' || c > '9' || x > std::numeric_limits<std::int64_t>::max() / 10 - 10)
        return false;
      x = x * 10 + (c - '0');
      any = true;
    }
    if (any) *out = x;
    return any;
  }
  return false;
}

// "Process Group Ranks": a JSON list of ints, or (PyTorch 2.2-2.4) the list's text "[0, 1]".
std::vector<int> ranks_arg(dom::object args) {
  std::vector<int> out;
  dom::element v;
  if (args["Process Group Ranks"].get(v) != simdjson::SUCCESS) return out;
  dom::array a;
  std::string_view s;
  if (v.get_array().get(a) == simdjson::SUCCESS) {
    for (dom::element x : a) {
      std::int64_t i = 0;
      if (x.get_int64().get(i) != simdjson::SUCCESS || i < 0 || i >= (1 << 24)) return {};
      out.push_back(static_cast<int>(i));
    }
  } else if (v.get_string().get(s) == simdjson::SUCCESS) {
    std::int64_t x = -1;
    for (char c : s) {
      if (c >= '0' && c <= '9') {
        x = (x < 0 ? 0 : x * 10) + (c - '0');
        if (x >= (1 << 24)) return {};
      } else {
        if (x >= 0) out.push_back(static_cast<int>(x));
        x = -1;
      }
    }
    if (x >= 0) out.push_back(static_cast<int>(x));
  }
  return out;
}

std::string str_arg(dom::object args, const char* key) {
  std::string_view s;
  if (args[key].get_string().get(s) == simdjson::SUCCESS) return std::string(s);
  return {};
}

bool category_of(std::string_view cat, Cat* out) {
  if (cat == "cpu_op" || cat == "Operator") {
    *out = Cat::kCpuOp;
  } else if (cat == "python_function") {
    *out = Cat::kPython;
  } else if (cat == "user_annotation") {
    *out = Cat::kAnnotation;
  } else if (cat == "cuda_runtime" || cat == "cuda_driver" || cat == "Runtime") {
    *out = Cat::kRuntime;
  } else if (cat == "kernel" || cat == "Kernel") {
    *out = Cat::kKernel;
  } else if (cat == "gpu_memcpy" || cat == "Memcpy") {
    *out = Cat::kMemcpy;
  } else if (cat == "gpu_memset" || cat == "Memset") {
    *out = Cat::kMemset;
  } else if (cat == "cuda_sync") {
    *out = Cat::kSync;
  } else {
    return false;
  }
  return true;
}

void read_meta(dom::object root, TraceMeta* m) {
  dom::array props;
  if (root["deviceProperties"].get_array().get(props) == simdjson::SUCCESS) {
    for (dom::element p : props) {
      std::string_view name;
      if (p["name"].get_string().get(name) == simdjson::SUCCESS) {
        m->gpu_name = std::string(name);
        break;
      }
    }
  }
  dom::object dist;
  if (root["distributedInfo"].get_object().get(dist) == simdjson::SUCCESS) {
    std::int64_t v = 0;
    if (dist["rank"].get_int64().get(v) == simdjson::SUCCESS && v >= 0 && v < (1 << 24))
      m->rank = static_cast<int>(v);
    if (dist["world_size"].get_int64().get(v) == simdjson::SUCCESS && v > 0 && v < (1 << 24))
      m->world_size = static_cast<int>(v);
  }
}

// One traceEvents entry; false when it is skipped (counted in stats).
bool read_event(dom::element e, std::int64_t seq, Record* r, ImportStats& st) {
  dom::object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) {
    st.add(Stat::not_an_object);
    return false;
  }
  std::string_view ph, cat, name;
  if (obj["ph"].get_string().get(ph) != simdjson::SUCCESS) {
    st.add(Stat::missing_field);
    return false;
  }
  if (ph == "M" || ph == "s" || ph == "f" || ph == "t") {
    st.add(Stat::metadata_events);
    return false;
  }
  if (obj["cat"].get_string().get(cat) != simdjson::SUCCESS) cat = {};
  if (obj["name"].get_string().get(name) != simdjson::SUCCESS) {
    st.add(Stat::missing_field);
    return false;
  }
  const bool memory = ph == "i" && name == "[memory]";
  if (ph != "X" && !memory) {
    st.add(Stat::unknown_phase);
    return false;
  }
  if (memory) {
    r->cat = Cat::kMemory;
  } else if (!category_of(cat, &r->cat)) {
    st.add(Stat::unknown_category);
    return false;
  }
  r->name = std::string(name);
  r->seq = seq;
  dom::element ts, dur, pid, tid;
  if (obj["ts"].get(ts) != simdjson::SUCCESS || obj["pid"].get(pid) != simdjson::SUCCESS ||
      obj["tid"].get(tid) != simdjson::SUCCESS ||
      (!memory && obj["dur"].get(dur) != simdjson::SUCCESS)) {
    st.add(Stat::missing_field);
    return false;
  }
  if (!us_to_ns(ts, &r->ts_ns) || (!memory && !us_to_ns(dur, &r->dur_ns))) {
    st.add(Stat::bad_timestamp);
    return false;
  }
  if (r->dur_ns < 0) {
    st.add(Stat::negative_duration);
    return false;
  }
  // pid/tid: numbers, or strings (Kineto writes "Spans" lanes, ROCm some names): hashed to an id
  auto id_of = [](dom::element v, std::int64_t* out) {
    if (v.get_int64().get(*out) == simdjson::SUCCESS) return true;
    std::string_view s;
    if (v.get_string().get(s) != simdjson::SUCCESS) return false;
    *out = static_cast<std::int64_t>(std::hash<std::string_view>{}(s)&0x3fffffffffffffffull);
    return true;
  };
  if (!id_of(pid, &r->pid) || !id_of(tid, &r->tid)) {
    st.add(Stat::missing_field);
    return false;
  }
  dom::object args;
  if (obj["args"].get_object().get(args) != simdjson::SUCCESS) return true;
  bool present = false, ok = true;
  ok &= int_arg(args, "correlation", &r->correlation, &present);
  ok &= int_arg(args, "External id", &r->external_id, &present);
  if (r->cat == Cat::kKernel || r->cat == Cat::kMemcpy || r->cat == Cat::kMemset ||
      r->cat == Cat::kSync) {
    ok &= int_arg(args, "device", &r->device, &present);
    ok &= int_arg(args, "stream", &r->stream, &present);
    ok &= int_arg(args, "bytes", &r->bytes, &present);
    ok &= int_arg(args, "wait_on_stream", &r->wait_on_stream, &present);
    ok &= int_arg(args, "wait_on_cuda_event_record_corr_id", &r->wait_record_corr, &present);
  } else if (r->cat == Cat::kMemory) {
    ok &= int_arg(args, "Bytes", &r->bytes, &present);
    ok &= int_arg(args, "Total Allocated", &r->total_allocated, &present);
    ok &= int_arg(args, "Device Id", &r->device, &present);
    ok &= int_arg(args, "Device Type", &r->device_type, &present);
  } else if (r->cat == Cat::kCpuOp || r->cat == Cat::kAnnotation) {  // nccl:* may be either
    if (name == "record_param_comms" || name.find("nccl:") == 0 || name.find("c10d::") == 0) {
      r->collective_name = str_arg(args, "Collective name");
      r->dtype = str_arg(args, "dtype");
      r->pg_name = str_arg(args, "Process Group Name");
      r->pg_ranks = ranks_arg(args);
      ok &= int_arg(args, "In msg nelems", &r->in_nelems, &present);
      ok &= int_arg(args, "Out msg nelems", &r->out_nelems, &present);
      ok &= int_arg(args, "Group size", &r->group_size, &present);
      ok &= int_arg(args, "Global rank start", &r->rank_start, &present);
      ok &= int_arg(args, "Global rank stride", &r->rank_stride, &present);
      dom::element types;
      if (args["Input type"].get(types) == simdjson::SUCCESS)
        r->input_types = simdjson::minify(types);
    }
    dom::element dims;
    if (args["Input Dims"].get(dims) == simdjson::SUCCESS) r->input_dims = simdjson::minify(dims);
  }
  if (!ok) st.add(Stat::bad_arg);
  return true;
}

}  // namespace

TokenizedTrace tokenize_string(const std::string& json, const std::string& name) {
  core::check_json_depth(json, name);
  TokenizedTrace t;
  t.meta.file = name;
  dom::parser parser;
  dom::element root;
  const simdjson::padded_string padded(json);
  if (const auto err = parser.parse(padded).get(root); err != simdjson::SUCCESS)
    throw InputError(name, "", std::string("not JSON: ") + simdjson::error_message(err), kHint);
  dom::object obj;
  dom::array events;
  if (root.get_array().get(events) == simdjson::SUCCESS) {
    // the JSON Array Format: a bare list of events
  } else if (root.get_object().get(obj) != simdjson::SUCCESS ||
             obj["traceEvents"].get_array().get(events) != simdjson::SUCCESS) {
    throw InputError(name, "traceEvents", "no traceEvents array: not a Chrome trace", kHint);
  } else {
    read_meta(obj, &t.meta);
  }
  std::int64_t seq = 0;
  for (dom::element e : events) {
    t.stats.add(Stat::events_read);
    Record r;
    if (read_event(e, seq++, &r, t.stats)) t.records.push_back(std::move(r));
  }
  return t;
}

TokenizedTrace tokenize_file(const std::string& path) {
  return tokenize_string(read_maybe_gzip(path), path);
}

}  // namespace csim::replay
