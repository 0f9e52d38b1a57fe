// docs/sweep.md, "Results file".
#include "sweep/results_io.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/input_file.hpp"
#include "profiler/atomic_file.hpp"

namespace csim::sweep {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "csim-sweep";

bool ends_with(const std::string& path, const std::string& ext) {
  return path.size() >= ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
}
bool is_csv(const std::string& path) {
  return ends_with(path, ".csv");
}
bool is_jsonl(const std::string& path) {
  return ends_with(path, ".jsonl");
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string per_gpu_text(const std::vector<GpuPeak>& g) {
  std::string s;
  for (const GpuPeak& p : g)
    s += (s.empty() ? "" : ";") + std::to_string(p.gpu) + ":" + num(p.peak_gib);
  return s;
}

std::vector<GpuPeak> parse_per_gpu(const std::string& s) {
  std::vector<GpuPeak> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    const std::size_t c = item.find(':');
    if (c == std::string::npos) continue;
    out.push_back({std::stoi(item.substr(0, c)), std::stod(item.substr(c + 1))});
  }
  return out;
}

// RFC 4180: a field with a comma, quote or newline is quoted, quotes doubled.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::vector<std::string> csv_split(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

const std::vector<std::string> kFigureColumns{
    "status",   "step_time_ms", "samples_per_s",    "mfu",  "gpus",
    "peak_gib", "usable_gib",   "peak_gib_per_gpu", "error"};

json figures_json(const VariantResult& r) {
  json per_gpu = json::array();
  for (const GpuPeak& p : r.per_gpu) per_gpu.push_back({{"gpu", p.gpu}, {"peak_gib", p.peak_gib}});
  return {{"index", r.index},
          {"status", to_string(r.status)},
          {"step_time_s", r.step_time_s},
          {"samples_per_s", r.samples_per_s},
          {"mfu", r.mfu},
          {"gpus", r.gpus},
          {"peak_gib", r.peak_gib},
          {"usable_gib", r.usable_gib},
          {"peak_gib_per_gpu", per_gpu},
          {"error", r.error}};
}

json row_json(const ResultsHeader& h, const VariantResult& r) {
  json knobs = json::object();
  for (std::size_t k = 0; k < h.keys.size(); ++k) knobs[h.keys[k]] = r.values[k];
  json j = figures_json(r);
  j["knobs"] = std::move(knobs);
  return j;
}

// The figures of a row (row_json's, without the knobs).
VariantResult figures_from_json(const json& j) {
  VariantResult r;
  r.index = j.at("index").get<std::size_t>();
  if (!parse_variant_status(j.at("status").get<std::string>(), &r.status))
    throw std::runtime_error("unknown status '" + j.at("status").get<std::string>() + "'");
  r.step_time_s = j.at("step_time_s").get<double>();
  r.samples_per_s = j.at("samples_per_s").get<double>();
  r.mfu = j.at("mfu").get<double>();
  r.gpus = j.at("gpus").get<int>();
  r.peak_gib = j.at("peak_gib").get<double>();
  r.usable_gib = j.at("usable_gib").get<double>();
  for (const json& g : j.at("peak_gib_per_gpu"))
    r.per_gpu.push_back({g.at("gpu").get<int>(), g.at("peak_gib").get<double>()});
  r.error = j.at("error").get<std::string>();
  return r;
}

[[noreturn]] void not_ours(const std::string& path, const std::string& what) {
  throw InputError(path, "", "cannot resume from this file: " + what,
                   "it was written by another sweep: pass another -o, or delete the file");
}

void check_header(const std::string& path, const ResultsHeader& got, const ResultsHeader& expect) {
  if (got.scenario != expect.scenario)
    not_ours(path, "its scenario is '" + got.scenario + "', not '" + expect.scenario + "'");
  if (got.keys != expect.keys) not_ours(path, "its knobs differ from this sweep's --grid keys");
  if (got.base != expect.base)
    not_ours(path, "its base (the --hf-config and --set applied before the grid) is " + got.base +
                       ", this sweep's " + expect.base);
}

// One JSON row (the JSON results' rows, a JSON Lines line): its figures and its knobs' values in
// the header's key order; a row that does not parse is not ours.
VariantResult row_from_json(const std::string& path, const json& j,
                            const std::vector<std::string>& keys) {
  try {
    VariantResult r = figures_from_json(j);
    for (const std::string& k : keys) r.values.push_back(j.at("knobs").at(k).get<std::string>());
    return r;
  } catch (const std::exception& e) {  // json type or key errors, unknown status
    not_ours(path, std::string("a row does not parse: ") + e.what());
  }
}

std::vector<VariantResult> read_json(const std::string& path, const std::string& text,
                                     const ResultsHeader& expect) {
  core::check_json_depth(text, path);  // docs/limits.md, "JSON nesting"
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("format", "") != kFormat)
    not_ours(path, "it is not a csim-sweep JSON file");
  ResultsHeader h;
  h.scenario = doc.value("scenario", "");
  h.base = doc.value("base", "none");
  for (const json& k : doc.value("keys", json::array())) h.keys.push_back(k.get<std::string>());
  check_header(path, h, expect);
  std::vector<VariantResult> rows;
  for (const json& j : doc.value("rows", json::array())) {
    rows.push_back(row_from_json(path, j, h.keys));
  }
  return rows;
}

// The sidecar of a CSV or JSON Lines file (results_sidecar_path): the header as JSON.
ResultsHeader read_sidecar(const std::string& path) {
  const std::string side = results_sidecar_path(path);
  std::ifstream in(side, std::ios::binary);
  if (!in) not_ours(path, "its provenance file " + side + " is missing");
  std::stringstream ss;
  ss << in.rdbuf();
  const json doc = json::parse(ss.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("format", "") != kFormat)
    not_ours(path, side + " is not a csim-sweep provenance file");
  ResultsHeader h;
  h.scenario = doc.value("scenario", "");
  h.base = doc.value("base", "none");
  for (const json& k : doc.value("keys", json::array())) h.keys.push_back(k.get<std::string>());
  return h;
}

std::vector<VariantResult> read_jsonl(const std::string& path, std::istream& in,
                                      const ResultsHeader& expect) {
  const ResultsHeader h = read_sidecar(path);
  check_header(path, h, expect);
  std::vector<VariantResult> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) not_ours(path, "a row does not parse: " + line.substr(0, 80));
    rows.push_back(row_from_json(path, j, h.keys));
  }
  return rows;
}

std::vector<VariantResult> read_csv(const std::string& path, std::istream& in,
                                    const ResultsHeader& expect) {
  std::string line;
  ResultsHeader h = read_sidecar(path);
  if (!std::getline(in, line)) not_ours(path, "no column line");
  const std::vector<std::string> cols = csv_split(line);
  if (cols.size() != 1 + expect.keys.size() + kFigureColumns.size() || cols[0] != "index")
    not_ours(path, "its columns differ from this sweep's");
  if (!std::equal(expect.keys.begin(), expect.keys.end(), cols.begin() + 1))
    not_ours(path, "its knobs differ from this sweep's --grid keys");
  check_header(path, h, expect);
  std::vector<VariantResult> rows;
  const std::size_t nk = h.keys.size();
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> f = csv_split(line);
    if (f.size() != cols.size())
      not_ours(path, "a row has " + std::to_string(f.size()) + " fields");
    try {
      VariantResult r;
      r.index = std::stoull(f[0]);
      r.values.assign(f.begin() + 1, f.begin() + 1 + static_cast<long>(nk));
      const std::size_t b = 1 + nk;
      if (!parse_variant_status(f[b], &r.status)) not_ours(path, "unknown status '" + f[b] + "'");
      r.step_time_s = std::stod(f[b + 1]) * 1e-3;
      r.samples_per_s = std::stod(f[b + 2]);
      r.mfu = std::stod(f[b + 3]);
      r.gpus = std::stoi(f[b + 4]);
      r.peak_gib = std::stod(f[b + 5]);
      r.usable_gib = std::stod(f[b + 6]);
      r.per_gpu = parse_per_gpu(f[b + 7]);
      r.error = f[b + 8];
      rows.push_back(std::move(r));
    } catch (const std::logic_error&) {  // stoi / stod on a damaged field
      not_ours(path, "a row does not parse: " + line.substr(0, 80));
    }
  }
  return rows;
}

double sort_value(const VariantResult& r, SortKey key) {
  switch (key) {
    case SortKey::kThroughput:
      return -r.samples_per_s;
    case SortKey::kStepTime:
      return r.step_time_s;
    case SortKey::kMfu:
      return -r.mfu;
    case SortKey::kMemory:
      return r.peak_gib;
    case SortKey::kIndex:
      return 0;
  }
  return 0;
}

int status_rank(VariantStatus s) {
  return s == VariantStatus::kOk ? 0 : s == VariantStatus::kOom ? 1 : 2;
}

}  // namespace

bool parse_sort_key(const std::string& text, SortKey* out) {
  const std::pair<const char*, SortKey> keys[] = {{"throughput", SortKey::kThroughput},
                                                  {"step_time", SortKey::kStepTime},
                                                  {"mfu", SortKey::kMfu},
                                                  {"memory", SortKey::kMemory},
                                                  {"index", SortKey::kIndex}};
  for (const auto& [name, key] : keys)
    if (text == name) {
      *out = key;
      return true;
    }
  return false;
}

void sort_results(std::vector<VariantResult>& rows, SortKey key) {
  std::sort(rows.begin(), rows.end(), [key](const VariantResult& a, const VariantResult& b) {
    if (status_rank(a.status) != status_rank(b.status))
      return status_rank(a.status) < status_rank(b.status);
    if (a.status == VariantStatus::kOk || a.status == VariantStatus::kOom) {
      const double va = sort_value(a, key), vb = sort_value(b, key);
      if (va != vb) return va < vb;
    }
    return a.index < b.index;
  });
}

std::string base_fingerprint(const std::vector<std::string>& overrides) {
  if (overrides.empty()) return "none";
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a, 64-bit offset basis and prime
  for (const std::string& o : overrides) {
    for (const char c : o + "\n") {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

void write_results(const std::string& path, const ResultsHeader& h,
                   const std::vector<VariantResult>& rows) {
  json meta = {{"format", kFormat},   {"scenario", h.scenario},
               {"keys", h.keys},      {"variants_total", h.variants_total},
               {"done", rows.size()}, {"complete", h.complete},
               {"base", h.base}};
  prof::write_file_atomically(path, [&](std::ostream& os) {
    if (is_jsonl(path)) {
      for (const VariantResult& r : rows) os << row_json(h, r).dump() << '\n';
      return;
    }
    if (is_csv(path)) {
      os << "index";
      for (const std::string& k : h.keys) os << ',' << csv_field(k);
      for (const std::string& c : kFigureColumns) os << ',' << c;
      os << '\n';
      for (const VariantResult& r : rows) {
        os << r.index;
        for (const std::string& v : r.values) os << ',' << csv_field(v);
        os << ',' << to_string(r.status) << ',' << num(r.step_time_s * 1e3) << ','
           << num(r.samples_per_s) << ',' << num(r.mfu) << ',' << r.gpus << ',' << num(r.peak_gib)
           << ',' << num(r.usable_gib) << ',' << per_gpu_text(r.per_gpu) << ','
           << csv_field(r.error) << '\n';
      }
      return;
    }
    json doc = meta;
    json out = json::array();
    for (const VariantResult& r : rows) out.push_back(row_json(h, r));
    doc["rows"] = std::move(out);
    os << doc.dump(2) << '\n';
  });
  // CSV and JSON Lines hold rows only (pandas.read_csv / read_json(lines=True) read them as they
  // are): the header goes to the sidecar, written after the rows so that a sidecar saying
  // complete never comes before its rows.
  if (is_csv(path) || is_jsonl(path))
    prof::write_file_atomically(results_sidecar_path(path),
                                [&](std::ostream& os) { os << meta.dump(2) << '\n'; });
}

std::string results_sidecar_path(const std::string& path) {
  return path + ".meta.json";
}

std::string rows_to_text(const std::vector<VariantResult>& rows) {
  json a = json::array();
  for (const VariantResult& r : rows) {
    json j = figures_json(r);
    j["values"] = r.values;
    a.push_back(std::move(j));
  }
  return a.dump();
}

std::vector<VariantResult> rows_from_text(const std::string& text) {
  std::vector<VariantResult> rows;
  for (const json& j : json::parse(text)) {
    VariantResult r = figures_from_json(j);
    r.values = j.at("values").get<std::vector<std::string>>();
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<VariantResult> read_results(const std::string& path, const ResultsHeader& expect) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  if (is_csv(path)) return read_csv(path, in, expect);
  if (is_jsonl(path)) return read_jsonl(path, in, expect);
  std::stringstream ss;
  ss << in.rdbuf();
  return read_json(path, ss.str(), expect);
}

}  // namespace csim::sweep
