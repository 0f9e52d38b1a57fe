// A rank's side of the launcher protocol (docs/real-execution.md, "Processes").
#include "backends/real/rank_link.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "backends/real/device_runtime.hpp"

namespace csim::real {

void Msg::set_text(const std::string& s) {
  const std::size_t n = std::min(s.size(), sizeof text - 1);
  std::memcpy(text, s.data(), n);
  text[n] = '\0';
}

std::string Msg::get_text() const {
  return std::string(text, strnlen(text, sizeof text));
}

bool Msg::set_bytes(const std::string& s) {
  if (s.size() > sizeof text) return false;
  std::memcpy(text, s.data(), s.size());
  b = static_cast<std::int64_t>(s.size());
  return true;
}

std::string Msg::get_bytes() const {
  return std::string(text, static_cast<std::size_t>(std::clamp<std::int64_t>(b, 0, sizeof text)));
}

bool send_msg(int fd, const Msg& m) {
  const char* p = reinterpret_cast<const char*>(&m);
  std::size_t left = sizeof m;
  while (left > 0) {
    const ssize_t n = ::send(fd, p, left, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

bool recv_msg(int fd, Msg* m) {
  char* p = reinterpret_cast<char*>(m);
  std::size_t left = sizeof *m;
  while (left > 0) {
    const ssize_t n = ::recv(fd, p, left, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

namespace {

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RankLink::RankLink(const std::string& host, int port, int rank, const core::Program& program,
                   std::int64_t clock_zero_ns, int heartbeat_ms)
    : rank_(rank), clock_zero_ns_(clock_zero_ns), heartbeat_ms_(heartbeat_ms) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
      rc != 0 || found == nullptr)
    throw BackendUnavailable("rank " + std::to_string(rank) + " cannot resolve the coordinator " +
                             where + ": " + ::gai_strerror(rc));
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    ::freeaddrinfo(found);
    throw BackendUnavailable(std::string("rank socket: ") + std::strerror(errno));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const int connected = ::connect(fd_, found->ai_addr, found->ai_addrlen);
  const int connect_errno = errno;
  ::freeaddrinfo(found);
  if (connected != 0) {
    ::close(fd_);
    throw BackendUnavailable("rank " + std::to_string(rank) + " cannot reach the coordinator at " +
                             where + ": " + std::strerror(connect_errno));
  }
  issued_.assign(program.ops.size(), 0);
  host_done_.assign(program.ops.size(), 0);
  done_.assign(program.ops.size(), 0);
  go_at_.assign(static_cast<std::size_t>(program.collective_instances), -1);
  Msg hello;
  hello.type = MsgType::kHello;
  hello.rank = rank;
  hello.a = ::getpid();
  send(hello);
  // Clock offset by ping-pong (NTP's method on one link): offset = (t_send + t_recv)/2 - t_coord,
  // uncertainty = RTT/2; the ping with the smallest RTT of 8 is kept.
  TimeNs best_rtt = -1;
  for (int i = 0; i < 8; ++i) {
    Msg ping;
    ping.type = MsgType::kPing;
    ping.rank = rank;
    ping.a = steady_ns() - clock_zero_ns;
    send(ping);
    Msg pong;
    if (!recv_msg(fd_, &pong) || pong.type != MsgType::kPong)
      throw BackendUnavailable("rank " + std::to_string(rank) +
                               ": coordinator gone during clock sync");
    const TimeNs back = steady_ns() - clock_zero_ns;
    const TimeNs rtt = back - pong.a;
    if (best_rtt < 0 || rtt < best_rtt) {
      best_rtt = rtt;
      offset_ns_ = (pong.a + back) / 2 - pong.b;
    }
  }
  Msg clock;
  clock.type = MsgType::kClock;
  clock.rank = rank;
  clock.a = offset_ns_;
  clock.b = best_rtt / 2;
  send(clock);
  reader_ = std::thread([this] { read_loop(); });
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
}

RankLink::~RankLink() {
  stop_ = true;
  cv_.notify_all();
  ::shutdown(fd_, SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
  ::close(fd_);
}

void RankLink::send(const Msg& m) {
  std::lock_guard<std::mutex> lk(send_mu_);
  send_msg(fd_, m);  // a failure shows up as EOF in read_loop
}

void RankLink::read_loop() {
  Msg m;
  while (recv_msg(fd_, &m)) {
    std::function<void(const std::string&)> cb;
    std::string why;
    {
      std::lock_guard<std::mutex> lk(mu_);
      switch (m.type) {
        case MsgType::kIssued:
          issued_[m.a] = 1;
          break;
        case MsgType::kHostDone:
          issued_[m.a] = host_done_[m.a] = 1;
          break;
        case MsgType::kDone:
          done_[m.a] = 1;
          break;
        case MsgType::kGo:
          go_at_[static_cast<std::size_t>(m.a)] = m.b;
          break;
        case MsgType::kBlob:
          blobs_[static_cast<int>(m.a)] = m.get_bytes();
          break;
        case MsgType::kBlobMake:
          blobs_to_make_.insert(static_cast<int>(m.a));
          break;
        case MsgType::kAbort:
          if (!aborted_) {
            aborted_ = true;
            abort_reason_ = m.get_text();
            cb = abort_cb_;
            why = abort_reason_;
          }
          break;
        default:
          break;
      }
    }
    cv_.notify_all();
    if (cb) {
      std::lock_guard<std::mutex> cl(cb_mu_);
      if (abort_cb_live_) cb(why);
    }
  }
  // The coordinator is gone: nothing this rank waits for can come any more.
  std::function<void(const std::string&)> cb;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!aborted_ && !stop_) {
      aborted_ = true;
      abort_reason_ = "lost the connection to the coordinator";
      cb = abort_cb_;
    }
  }
  cv_.notify_all();
  if (cb) {
    std::lock_guard<std::mutex> cl(cb_mu_);
    if (abort_cb_live_) cb(abort_reason_);
  }
}

void RankLink::heartbeat_loop() {
  Msg hb;
  hb.type = MsgType::kHeartbeat;
  hb.rank = rank_;
  while (!stop_) {
    send(hb);
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(heartbeat_ms_), [&] { return stop_.load(); });
  }
}

bool RankLink::wait_issued(core::OpId op, bool host_done) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return aborted_ || (issued_[op] && (!host_done || host_done_[op])); });
  return !aborted_;
}

bool RankLink::wait_done(core::OpId op) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return aborted_ || done_[op]; });
  return !aborted_;
}

void RankLink::publish_issued(core::OpId op, bool host_done) {
  Msg m;
  m.type = host_done ? MsgType::kHostDone : MsgType::kIssued;
  m.rank = rank_;
  m.a = op;
  send(m);
}

void RankLink::publish_done(core::OpId op) {
  Msg m;
  m.type = MsgType::kDone;
  m.rank = rank_;
  m.a = op;
  send(m);
}

TimeNs RankLink::arrive(int instance, TimeNs start_ns) {
  Msg m;
  m.type = MsgType::kArrive;
  m.rank = rank_;
  m.a = instance;
  m.b = start_ns - offset_ns_;
  send(m);
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return aborted_ || go_at_[static_cast<std::size_t>(instance)] >= 0; });
  if (aborted_) return -1;
  return go_at_[static_cast<std::size_t>(instance)] + offset_ns_;
}

std::string RankLink::shared_blob(int key, const std::function<std::string()>& make) {
  Msg want;
  want.type = MsgType::kBlobWant;
  want.rank = rank_;
  want.a = key;
  send(want);
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return aborted_ || blobs_.count(key) || blobs_to_make_.count(key); });
  if (aborted_)
    throw DeviceError("rank " + std::to_string(rank_) +
                      ": run aborted while waiting for shared "
                      "value " +
                      std::to_string(key) + " (" + abort_reason_ + ")");
  if (const auto it = blobs_.find(key); it != blobs_.end()) return it->second;
  lk.unlock();
  const std::string value = make();  // outside the lock: it may take a while (ncclGetUniqueId)
  Msg m;
  m.type = MsgType::kBlob;
  m.rank = rank_;
  m.a = key;
  if (!m.set_bytes(value))
    throw DeviceError("shared value " + std::to_string(key) + " has " +
                      std::to_string(value.size()) + " bytes; the launcher carries at most " +
                      std::to_string(sizeof m.text));
  send(m);
  lk.lock();
  blobs_[key] = value;
  return value;
}

void RankLink::on_abort(std::function<void(const std::string&)> f) {
  // Waits for a callback in flight, so that clearing it (f empty) guarantees no later call.
  std::lock_guard<std::mutex> cl(cb_mu_);
  bool already = false;
  std::string why;
  {
    std::lock_guard<std::mutex> lk(mu_);
    abort_cb_live_ = static_cast<bool>(f);
    abort_cb_ = f;
    already = aborted_ && f;
    why = abort_reason_;
  }
  // An abort that came before the callback was set (this rank was still starting, decoding its
  // job, when another rank failed or the run was cancelled) is delivered now: the reader thread
  // delivers each abort once, to the callback set at the time, and this one had none.
  if (already) f(why);
}

bool RankLink::aborted() const {
  std::lock_guard<std::mutex> lk(mu_);
  return aborted_;
}

std::string RankLink::abort_reason() const {
  std::lock_guard<std::mutex> lk(mu_);
  return abort_reason_;
}

void RankLink::send_error(const std::string& what, bool device_unavailable) {
  Msg m;
  m.type = MsgType::kError;
  m.a = device_unavailable ? 1 : 0;
  m.rank = rank_;
  m.set_text(what);
  send(m);
}

void RankLink::send_result(core::OpId op, const core::OpTiming& t) {
  Msg m;
  m.type = MsgType::kResult;
  m.rank = rank_;
  m.a = op;
  auto conv = [this](TimeNs v) { return v < 0 ? v : v - offset_ns_; };
  m.v[0] = conv(t.ready_ns);
  m.v[1] = t.gil_wait_ns;
  m.v[2] = t.core_wait_ns;
  m.v[3] = conv(t.issue_end_ns);
  m.v[4] = conv(t.start_ns);
  m.v[5] = conv(t.end_ns);
  send(m);
}

void RankLink::send_finished(bool complete, bool failed) {
  Msg m;
  m.type = MsgType::kFinished;
  m.rank = rank_;
  m.a = complete ? 1 : 0;
  m.b = failed ? 1 : 0;
  send(m);
}

}  // namespace csim::real
