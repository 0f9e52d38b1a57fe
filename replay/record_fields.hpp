// What a Kineto record's fields mean for the Program (docs/replay.md, "Host time", "Durations",
// "Collectives"): the time a host thread spends inside CPU ops, a collective's element size, kind
// and type, a memcpy's direction.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/program/program.hpp"

namespace csim::replay {

// The union of a thread's CPU-op intervals, merged, with prefix sums: covered(c, a) is the time in
// [c, a) spent inside some CPU op (ATen), the rest of a gap being Python or idle.
class Coverage {
 public:
  void add(TimeNs b, TimeNs e) { raw_.push_back({b, e}); }
  void finish();
  TimeNs covered(TimeNs c, TimeNs a) const { return upto(a) - upto(c); }

 private:
  TimeNs upto(TimeNs t) const;  // covered time before t
  std::vector<std::pair<TimeNs, TimeNs>> raw_, iv_;
  std::vector<TimeNs> prefix_;
};

// Bytes per element of record_param_comms' dtype ("Float" 4, "BFloat16" 2, ...; unknown: 4).
Bytes dtype_bytes(const std::string& d);
core::Dtype dtype_of(const std::string& d);
// The collective record_param_comms' "Collective name" names, else the NCCL kernel's name.
core::CollectiveKind collective_kind(const std::string& coll, const std::string& kernel);
// A memcpy's direction from its name ("Memcpy HtoD (Pinned -> Device)").
core::CopyKind copy_kind(const std::string& name);

}  // namespace csim::replay
