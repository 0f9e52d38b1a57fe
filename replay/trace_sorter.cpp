#include "replay/trace_sorter.hpp"

#include <algorithm>

namespace csim::replay {

SortedTrace sort_trace(TokenizedTrace t) {
  SortedTrace s;
  s.meta = std::move(t.meta);
  s.stats = t.stats;
  s.records = std::move(t.records);
  std::stable_sort(s.records.begin(), s.records.end(), [](const Record& a, const Record& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.seq < b.seq;
  });
  for (std::size_t i = 0; i < s.records.size(); ++i) {
    const Record& r = s.records[i];
    switch (r.cat) {
      case Cat::kCpuOp:
      case Cat::kPython:
      case Cat::kAnnotation:
        s.stats.add(Stat::cpu_ops);
        s.host[{r.pid, r.tid}].push_back(i);
        break;
      case Cat::kRuntime:
        s.stats.add(Stat::runtime_calls);
        s.host[{r.pid, r.tid}].push_back(i);
        break;
      case Cat::kKernel:
      case Cat::kMemcpy:
      case Cat::kMemset: {
        s.stats.add(r.cat == Cat::kKernel   ? Stat::kernels
                    : r.cat == Cat::kMemcpy ? Stat::memcpys
                                            : Stat::memsets);
        // Kineto writes the device as pid and the stream as tid; args say it again.
        const std::int64_t dev = r.device >= 0 ? r.device : r.pid;
        const std::int64_t stream = r.stream >= 0 ? r.stream : r.tid;
        s.gpu[{dev, stream}].push_back(i);
        if (r.correlation >= 0) s.gpu_by_correlation[r.correlation].push_back(i);
        break;
      }
      case Cat::kMemory:
        s.stats.add(Stat::memory_events);
        s.memory.push_back(i);
        break;
      case Cat::kSync:
        s.stats.add(Stat::cuda_sync_events);
        s.sync.push_back(i);
        break;
    }
  }
  return s;
}

}  // namespace csim::replay
