// The launcher's messages between the coordinator (the launching process) and its ranks
// (docs/real-execution.md, "Processes"): fixed-size records over a loopback TCP connection, so a
// reader never has to parse. Both ends are the same build (the rank job's header checks it,
// rank_job.hpp; MPI ranks are one simrun), so the layout needs no versioning of its own.
#pragma once

#include <cstdint>
#include <string>

namespace csim::real {

enum class MsgType : std::int32_t {
  kHello = 1,  // rank -> coordinator: a = pid
  kIssued,     // a = op: enqueued (its events exist) — relayed to every rank
  kHostDone,   // a = op: a host op finished — relayed
  kDone,       // a = op: a stream op finished — relayed
  kArrive,     // a = collective instance, b = start ns (coordinator clock)
  kGo,         // coordinator -> ranks: a = instance, b = last arrival ns
  kPing,       // rank -> coordinator: a = rank clock ns at send
  kPong,       // coordinator -> rank: a = the ping's a, b = coordinator clock ns
  kHeartbeat,  // rank -> coordinator, every heartbeat interval
  kResult,     // rank -> coordinator: a = op, v[0..5] = ready, gil_wait, core_wait, issue_end,
               // start, end (coordinator clock)
  kClock,      // rank -> coordinator: a = offset ns (rank - coordinator), b = uncertainty ns
  kFinished,   // rank -> coordinator: a = 1 complete, 0 stopped early; b = 1 if it failed
  kError,      // rank -> coordinator: text = the error (one line, truncated); a = 1: no device
  kAbort,      // coordinator -> ranks: a = the rank that failed or -1 (cancel), text = why
  kBlobWant,   // rank -> coordinator: a = key of a shared value (an NCCL unique id per group)
  kBlobMake,   // coordinator -> the first rank that wanted key a: make it and send kBlob
  kBlob,       // a = key, b = length, text = the value's raw bytes (<= sizeof text) — relayed
};

struct Msg {
  MsgType type = MsgType::kHello;
  std::int32_t rank = -1;
  std::int64_t a = 0, b = 0;
  std::int64_t v[6] = {0, 0, 0, 0, 0, 0};
  char text[160] = {};
  void set_text(const std::string& s);  // NUL-terminated, truncated to sizeof text - 1
  std::string get_text() const;
  bool set_bytes(const std::string& s);  // raw, length in b; false if it does not fit
  std::string get_bytes() const;
};

// Whole-record I/O on a blocking socket; false on EOF or error (the peer is gone).
bool send_msg(int fd, const Msg& m);
bool recv_msg(int fd, Msg* m);

}  // namespace csim::real
