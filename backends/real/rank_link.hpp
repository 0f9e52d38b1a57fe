// A rank's connection to the coordinator in a multi-process run (docs/real-execution.md,
// "Processes"): what it needs from the other ranks (which of their ops were issued or finished,
// collective rendezvous) and what it tells them, plus heartbeats and the clock offset.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backends/real/wire.hpp"
#include "core/program/executor.hpp"
#include "core/program/program.hpp"

namespace csim::real {

class RankLink {
 public:
  // Connects to host:port (an IPv4 address or a host name), says hello, measures the clock offset
  // (min-RTT ping-pong, see docs/real-execution.md, "Clocks"), then starts the reader and heartbeat
  // threads.
  RankLink(const std::string& host, int port, int rank, const core::Program& program,
           std::int64_t clock_zero_ns, int heartbeat_ms);
  ~RankLink();

  int rank() const { return rank_; }
  std::int64_t clock_zero_ns() const { return clock_zero_ns_; }  // this rank's steady-clock origin
  TimeNs clock_offset_ns() const {
    return offset_ns_;
  }  // this rank's clock minus the coordinator's

  // Waits for an op of another rank; false when the run was aborted first.
  bool wait_issued(core::OpId op, bool host_done);
  bool wait_done(core::OpId op);
  void publish_issued(core::OpId op, bool host_done);
  void publish_done(core::OpId op);
  // Collective rendezvous across ranks: returns the last member's arrival (this rank's clock,
  // relative to clock zero), or -1 when aborted.
  TimeNs arrive(int instance, TimeNs start_ns);

  // A value every rank that asks for `key` shares (an NCCL unique id per communicator group):
  // the first rank to ask runs `make` and the coordinator relays its result to the others. Throws
  // DeviceError when the run is aborted first or the value exceeds the message's text field.
  std::string shared_blob(int key, const std::function<std::string()>& make);

  // Called (from the reader thread) when the coordinator aborts the run; at once (from this call)
  // when it was aborted before.
  void on_abort(std::function<void(const std::string&)> f);
  bool aborted() const;
  std::string abort_reason() const;

  void send_error(const std::string& what, bool device_unavailable = false);
  void send_result(core::OpId op, const core::OpTiming& t);  // converted to the coordinator clock
  void send_finished(bool complete, bool failed);

 private:
  void read_loop();
  void heartbeat_loop();
  void send(const Msg& m);

  int fd_ = -1, rank_ = 0;
  std::int64_t clock_zero_ns_ = 0;
  TimeNs offset_ns_ = 0;
  std::mutex send_mu_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char> issued_, host_done_, done_;
  std::vector<TimeNs> go_at_;         // per instance: last arrival (coordinator clock), -1 until GO
  std::map<int, std::string> blobs_;  // shared values received
  std::set<int> blobs_to_make_;       // keys the coordinator asked this rank to make
  bool aborted_ = false;
  std::string abort_reason_;
  std::function<void(const std::string&)> abort_cb_;
  std::mutex cb_mu_;            // held while the abort callback runs
  bool abort_cb_live_ = false;  // guarded by cb_mu_ and mu_
  std::atomic<bool> stop_{false};
  int heartbeat_ms_ = 200;
  std::thread reader_, heartbeat_;
};

}  // namespace csim::real
