// The coordinator of the multi-process launch modes and the rank side (docs/real-execution.md,
// "Processes", "MPI").
//
// Index: [SECTION] Rank, [SECTION] Coordinator
#include "backends/real/coordinator.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "backends/real/rank_link.hpp"

namespace csim::real {
namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string describe_exit(pid_t pid, int status) {
  const std::string who = "(pid " + std::to_string(pid) + ")";
  if (WIFSIGNALED(status))
    return who + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status)) return who + " exited with status " + std::to_string(WEXITSTATUS(status));
  return who + " is gone";
}

// [SECTION] Rank ---------------------------------------------------------------------------------

}  // namespace

int run_rank(const std::string& host, int port, int rank, std::int64_t zero, const core::Program& p,
             const RuntimeFactory& factory, RealOptions options, const core::RunControl& control,
             int heartbeat_ms) {
  int code = 0;
  try {
    RankLink link(host, port, rank, p, zero, heartbeat_ms);
    bool failed = false;
    core::ExecutionResult r;
    try {
      std::unique_ptr<DeviceRuntime> rt = factory(link);
      if (!rt->reports_completions())
        throw BackendUnavailable("this device runtime cannot run in launch mode processes yet");
      RealExecutor exec(*rt, options, &link);
      r = exec.run(p, control);
    } catch (const BackendUnavailable& e) {
      // No device here (no GPU, no driver): the launch reports it as such, not as a failed run.
      link.send_error("rank " + std::to_string(rank) + ": " + e.what(), true);
      failed = true;
    } catch (const std::exception& e) {
      link.send_error("rank " + std::to_string(rank) + ": " + e.what());
      failed = true;
    }
    for (std::size_t id = 0; id < r.timings.size(); ++id) {
      const core::OpTiming& t = r.timings[id];
      const core::Op& op = p.ops[id];
      if (p.threads[static_cast<std::size_t>(op.thread)].process != rank) continue;
      if (t.ready_ns >= 0 || t.end_ns >= 0) link.send_result(static_cast<core::OpId>(id), t);
    }
    link.send_finished(!failed && r.complete, failed);
  } catch (const std::exception& e) {
    // Without a link there is no one to tell but stderr; the coordinator names this rank.
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    code = 1;
  } catch (...) {
    code = 1;
  }
  return code;
}

// [SECTION] Coordinator --------------------------------------------------------------------------

Coordinator::Coordinator(const core::Program& p, int ranks, const LaunchOptions& o,
                         LaunchReport* report)
    : program_(p),
      options_(o),
      report_(report),
      ranks_(static_cast<std::size_t>(ranks)),
      timings_(p.ops.size()) {
  expected_.assign(static_cast<std::size_t>(p.collective_instances), 0);
  arrived_.assign(expected_.size(), 0);
  last_arrival_.assign(expected_.size(), 0);
  for (const core::Op& op : p.ops)
    if (op.kind == core::OpKind::kCollective && op.instance >= 0)
      ++expected_[static_cast<std::size_t>(op.instance)];
}

void Coordinator::relay(int from, const Msg& m) {
  log_.push_back(m);
  for (std::size_t r = 0; r < ranks_.size(); ++r)
    if (static_cast<int>(r) != from && ranks_[r].fd >= 0 && ranks_[r].ready)
      send_msg(ranks_[r].fd, m);
}

void Coordinator::abort_all(int failed_rank, const std::string& why) {
  if (aborted_) return;
  aborted_ = true;
  abort_at_ns_ = steady_ns();
  if (report_->failure.empty() && failed_rank >= 0) {
    report_->failed_rank = failed_rank;
    report_->failure = why;
  }
  Msg m;
  m.type = MsgType::kAbort;
  m.a = failed_rank;
  m.set_text(why);
  relay(-1, m);
}

void Coordinator::gone(int rank) {
  RankState& st = ranks_[static_cast<std::size_t>(rank)];
  ::close(st.fd);
  st.fd = -1;
  if (st.finished) return;
  int status = 0;
  std::string how = "(pid " + std::to_string(st.reported_pid) + ") closed its connection";
  for (int i = 0; st.pid > 0 && i < 50;
       ++i) {  // the process is usually already dead: reap it for the reason
    if (::waitpid(st.pid, &status, WNOHANG) == st.pid) {
      how = describe_exit(st.pid, status);
      st.pid = -1;
      break;
    }
    ::usleep(10'000);
  }
  st.failed = true;
  abort_all(rank, "rank " + std::to_string(rank) + " " + how + " before finishing" +
                      (st.error.empty() ? "" : ": " + st.error));
}

void Coordinator::on_msg(int rank, const Msg& m, std::int64_t zero) {
  RankState& st = ranks_[static_cast<std::size_t>(rank)];
  st.last_seen_ns = steady_ns();
  switch (m.type) {
    case MsgType::kIssued:
    case MsgType::kHostDone:
    case MsgType::kDone:
      relay(rank, m);
      break;
    case MsgType::kArrive: {
      const auto i = static_cast<std::size_t>(m.a);
      last_arrival_[i] = arrived_[i] == 0 ? m.b : std::max(last_arrival_[i], m.b);
      if (++arrived_[i] == expected_[i]) {
        Msg go;
        go.type = MsgType::kGo;
        go.a = m.a;
        go.b = last_arrival_[i];
        relay(-1, go);
      }
      break;
    }
    case MsgType::kPing: {
      Msg pong;
      pong.type = MsgType::kPong;
      pong.a = m.a;
      pong.b = steady_ns() - zero;
      send_msg(st.fd, pong);
      break;
    }
    case MsgType::kClock:
      report_->clocks.push_back({rank, m.a, m.b});
      st.ready = true;
      for (const Msg& old : log_) send_msg(st.fd, old);
      break;
    case MsgType::kResult: {
      core::OpTiming& t = timings_[static_cast<std::size_t>(m.a)];
      t.ready_ns = m.v[0];
      t.gil_wait_ns = m.v[1];
      t.core_wait_ns = m.v[2];
      t.issue_end_ns = m.v[3];
      t.start_ns = m.v[4];
      t.end_ns = m.v[5];
      break;
    }
    case MsgType::kBlobWant: {
      // The first rank to ask for a shared value makes it; the others get it relayed.
      const auto key = static_cast<std::size_t>(m.a);
      if (key >= blob_maker_.size()) blob_maker_.resize(key + 1, -1);
      if (blob_maker_[key] < 0) {
        blob_maker_[key] = rank;
        Msg make;
        make.type = MsgType::kBlobMake;
        make.a = m.a;
        send_msg(st.fd, make);
      }
      break;
    }
    case MsgType::kBlob:
      relay(rank, m);
      break;
    case MsgType::kError:
      st.error = m.get_text();
      report_->device_unavailable |= m.a == 1;
      abort_all(rank, st.error);
      break;
    case MsgType::kFinished:
      st.finished = true;
      st.complete = m.a == 1;
      st.failed = m.b == 1;
      break;
    default:
      break;
  }
}

void Coordinator::loop(int& listen_fd, std::int64_t zero, const core::RunControl& control) {
  const std::int64_t start = steady_ns();
  std::map<int, int> pending;  // accepted fds not yet identified (fd -> -1)
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<int> who;  // rank per pollfd; -1 listen, -2 pending
    if (listen_fd >= 0) {
      fds.push_back({listen_fd, POLLIN, 0});
      who.push_back(-1);
    }
    for (const auto& [fd, unused] : pending) {
      fds.push_back({fd, POLLIN, 0});
      who.push_back(-2);
    }
    bool any = false;
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].fd < 0) continue;
      fds.push_back({ranks_[r].fd, POLLIN, 0});
      who.push_back(static_cast<int>(r));
      any = true;
    }
    bool connecting = false;
    for (const RankState& st : ranks_) connecting |= st.fd < 0 && !st.finished && !st.failed;
    if (!any && !connecting && pending.empty()) return;
    ::poll(fds.data(), fds.size(), 100);
    const std::int64_t now = steady_ns();
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (who[i] == -1) {
        const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) pending[fd] = -1;
        continue;
      }
      Msg m;
      if (who[i] == -2) {
        const int fd = fds[i].fd;
        pending.erase(fd);
        if (!recv_msg(fd, &m) || m.type != MsgType::kHello || m.rank < 0 ||
            m.rank >= static_cast<int>(ranks_.size())) {
          ::close(fd);
          continue;
        }
        if (options_.on_message) options_.on_message(m.rank, m.type);
        ranks_[static_cast<std::size_t>(m.rank)].fd = fd;
        ranks_[static_cast<std::size_t>(m.rank)].reported_pid = m.a;
        ranks_[static_cast<std::size_t>(m.rank)].last_seen_ns = now;
        continue;
      }
      const int r = who[i];
      if (recv_msg(fds[i].fd, &m)) {
        if (options_.on_message) options_.on_message(r, m.type);
        on_msg(r, m, zero);
      } else {
        gone(r);
      }
    }
    // A rank process that died before connecting (killed, or failed at start-up) has no
    // connection to drop: its exit is the event, reaped here, not a heartbeat timeout later.
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      RankState& st = ranks_[r];
      if (st.finished || st.failed || st.fd >= 0 || st.pid <= 0) continue;
      int status = 0;
      if (::waitpid(st.pid, &status, WNOHANG) != st.pid) continue;
      const std::string how = describe_exit(st.pid, status);
      st.pid = -1;
      st.failed = true;
      abort_all(static_cast<int>(r),
                "rank " + std::to_string(r) + " " + how + " before connecting");
    }
    // A rank that never connected, or went silent (heartbeats come from their own thread, so a
    // rank blocked in a collective still sends them), is declared failed and killed.
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      RankState& st = ranks_[r];
      if (st.finished || st.failed) continue;
      const std::int64_t since = st.fd < 0 ? start : st.last_seen_ns;
      if (now - since > static_cast<std::int64_t>(options_.heartbeat_timeout_ms) * 1'000'000) {
        st.failed = true;
        if (st.pid > 0) ::kill(st.pid, SIGKILL);
        abort_all(static_cast<int>(r),
                  "rank " + std::to_string(r) + " (pid " + std::to_string(st.reported_pid) + ") " +
                      (st.fd < 0 ? "never connected" : "stopped sending heartbeats") + " for " +
                      std::to_string(options_.heartbeat_timeout_ms) + " ms; " +
                      (st.pid > 0 ? "killed" : "declared failed"));
        if (st.fd >= 0) {
          ::close(st.fd);
          st.fd = -1;
        }
      }
    }
    if (!cancelled_ && control.cancel && control.cancel->load()) {
      cancelled_ = true;
      abort_all(-1, "interrupted");
    }
    if (aborted_ && now - abort_at_ns_ > static_cast<std::int64_t>(options_.grace_ms) * 1'000'000) {
      for (RankState& st : ranks_) {
        if (st.pid > 0 && !st.finished) ::kill(st.pid, SIGKILL);
        if (st.fd >= 0) {
          ::close(st.fd);
          st.fd = -1;
        }
        st.failed |= !st.finished;
      }
    }
    if (listen_fd >= 0) {
      bool all_connected = true;
      for (const RankState& st : ranks_) all_connected &= st.fd >= 0 || st.finished || st.failed;
      if (all_connected) {
        ::close(listen_fd);
        listen_fd = -1;
      }
    }
  }
}

core::ExecutionResult Coordinator::result() const {
  core::ExecutionResult res;
  res.timings = timings_;
  res.complete = !aborted_;
  for (const RankState& st : ranks_) res.complete &= st.finished && st.complete;
  if (!report_->failure.empty()) res.notes.push_back("incomplete: " + report_->failure);
  if (cancelled_) res.notes.push_back("incomplete: interrupted");
  return res;
}

int listen_tcp(bool all_interfaces, int backlog, int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(all_interfaces ? INADDR_ANY : INADDR_LOOPBACK);
  addr.sin_port = 0;  // any free port
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw BackendUnavailable(std::string("launcher: cannot listen on ") +
                             (all_interfaces ? "0.0.0.0" : "127.0.0.1") + ": " + why);
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

}  // namespace csim::real
