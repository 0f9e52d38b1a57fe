#include "replay/gemm_shapes.hpp"

#include <cstdint>
#include <vector>

namespace csim::replay {
namespace {

// "[[2,3],[3,4],[]]" -> {{2,3},{3,4},{}}; false on anything else (a list nested deeper, text).
bool parse_dims(const std::string& s, std::vector<std::vector<std::int64_t>>* out) {
  std::size_t i = 0;
  auto skip = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
  };
  skip();
  if (i >= s.size() || s[i++] != '[') return false;
  for (;;) {
    skip();
    if (i < s.size() && s[i] == ']') return ++i, true;
    if (i >= s.size() || s[i] != '[') return false;
    ++i;
    std::vector<std::int64_t> dims;
    for (;;) {
      skip();
      if (i < s.size() && s[i] == ']') {
        ++i;
        break;
      }
      std::int64_t v = 0;
      bool digit = false;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
        if (v > (std::int64_t{1} << 40)) return false;
        v = v * 10 + (s[i++] - '0');
        digit = true;
      }
      if (!digit) return false;
      dims.push_back(v);
      skip();
      if (i < s.size() && s[i] == ',') ++i;
    }
    out->push_back(std::move(dims));
    skip();
    if (i < s.size() && s[i] == ',') ++i;
  }
}

}  // namespace

bool is_gemm_op(const std::string& op) {
  return op == "aten::mm" || op == "aten::addmm" || op == "aten::bmm" || op == "aten::baddbmm" ||
         op == "aten::linear";
}

bool gemm_shape_of(const std::string& op, const std::string& input_dims, core::GemmShape* out) {
  std::vector<std::vector<std::int64_t>> d;
  if (!is_gemm_op(op) || !parse_dims(input_dims, &d)) return false;
  core::GemmShape g;
  auto two = [](const std::vector<std::int64_t>& v) { return v.size() == 2; };
  auto three = [](const std::vector<std::int64_t>& v) { return v.size() == 3; };
  if (op == "aten::mm" && d.size() >= 2 && two(d[0]) && two(d[1])) {
    g.m = d[0][0], g.k = d[0][1], g.n = d[1][1];
  } else if (op == "aten::addmm" && d.size() >= 3 && two(d[1]) && two(d[2])) {
    g.m = d[1][0], g.k = d[1][1], g.n = d[2][1];
  } else if (op == "aten::bmm" && d.size() >= 2 && three(d[0]) && three(d[1])) {
    g.batch = d[0][0], g.m = d[0][1], g.k = d[0][2], g.n = d[1][2];
  } else if (op == "aten::baddbmm" && d.size() >= 3 && three(d[1]) && three(d[2])) {
    g.batch = d[1][0], g.m = d[1][1], g.k = d[1][2], g.n = d[2][2];
  } else if (op == "aten::linear" && d.size() >= 2 && !d[0].empty() && two(d[1])) {
    g.m = 1;
    for (std::size_t j = 0; j + 1 < d[0].size(); ++j) g.m *= d[0][j];
    g.k = d[0].back(), g.n = d[1][0];
  } else {
    return false;
  }
  if (g.empty()) return false;
  *out = g;
  return true;
}

}  // namespace csim::replay
