// golden_refresh: regenerate the golden outputs listed in traces/goldens.txt and print what
// changed (line counts and, per golden, step time and peak memory before -> after).
//   golden_refresh [REPO_ROOT]        (scripts/refresh-goldens.sh builds and runs it)
#include <cstdio>
#include <iostream>
#include <sstream>

#include "core/error.hpp"
#include "profiler/atomic_file.hpp"
#include "profiler/chrome_trace_reader.hpp"
#include "profiler/summary.hpp"
#include "run/golden.hpp"

namespace {

std::string slurp(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return {};
  std::string s;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  std::fclose(f);
  return s;
}

// Step time and the largest per-GPU peak of a golden's text, whichever kind it is.
std::string headline(const std::string& text, bool full_trace) {
  if (text.empty()) return "(none)";
  try {
    double step_s = 0, peak = 0;
    if (full_trace) {
      const csim::prof::Summary s =
          csim::prof::summarize(csim::prof::read_chrome_trace_string(text, "golden"));
      step_s = s.step_time_s;
      for (const auto& g : s.per_gpu) peak = std::max(peak, static_cast<double>(g.peak_bytes));
    } else {
      const nlohmann::json j = nlohmann::json::parse(text);
      step_s = j.value("step_time_s", 0.0);
      for (const auto& g : j["per_gpu"]) peak = std::max(peak, g.value("peak_bytes", 0.0));
    }
    char buf[128];
    std::snprintf(buf, sizeof buf, "step %.3f ms, max peak %.1f MiB", step_s * 1e3,
                  peak / (1024.0 * 1024.0));
    return buf;
  } catch (const std::exception&) {
    return "(unreadable)";
  }
}

int count_lines_differing(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  int diff = 0;
  while (true) {
    const bool ga = static_cast<bool>(std::getline(sa, la));
    const bool gb = static_cast<bool>(std::getline(sb, lb));
    if (!ga && !gb) break;
    if (ga != gb || la != lb) ++diff;
  }
  return diff;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : ".";
  try {
    int changed = 0;
    const auto cases = csim::run::read_golden_list(root + "/traces/goldens.txt");
    for (const auto& c : cases) {
      const std::string path = root + "/traces/" + c.golden;
      const std::string before = slurp(path);
      const std::string after = csim::run::render_golden(c, root + "/scenarios");
      if (before == after) {
        std::cout << "unchanged  " << c.golden << "\n";
        continue;
      }
      ++changed;
      csim::prof::write_file_atomically(path, [&](std::ostream& os) { os << after; });
      std::cout << (before.empty() ? "created    " : "changed    ") << c.golden << ": "
                << count_lines_differing(before, after) << " lines differ; "
                << headline(before, c.full_trace) << " -> " << headline(after, c.full_trace)
                << "\n";
    }
    std::cout << changed << " of " << cases.size() << " goldens rewritten\n";
    return 0;
  } catch (const csim::InputError& e) {
    std::cerr << "golden_refresh: " << e.what() << "\n";
    return 2;
  }
}
