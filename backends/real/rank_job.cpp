// backends/real/rank_job.hpp.
#include "backends/real/rank_job.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backends/real/byte_io.hpp"
#include "backends/real/program_codec.hpp"
#include "backends/real/wire.hpp"

namespace csim::real {
namespace {

constexpr char kMagic[8] = {'c', 's', 'i', 'm', 'r', 'a', 'n', 'k'};
constexpr std::uint32_t kVersion = 1;

}  // namespace

std::string encode_rank_job(const core::Program& program, const RankSetup& setup) {
  std::string out(kMagic, sizeof kMagic);
  ByteWriter w(&out);
  w.put(kVersion);
  w.put<std::uint32_t>(sizeof(Msg));
  w.put<std::uint32_t>(sizeof(core::Op));
  w.put(static_cast<std::uint8_t>(setup.runtime));
  w.put_vec(setup.standin_busy_ns);
  w.put(setup.time_scale);
  w.put(setup.options.emulate_gil);
  w.put(setup.heartbeat_ms);
  encode_program(program, &out);
  return out;
}

bool decode_rank_job(std::string_view bytes, core::Program* program, RankSetup* setup,
                     std::string* why) {
  if (bytes.size() < sizeof kMagic ||
      bytes.substr(0, sizeof kMagic) != std::string_view(kMagic, sizeof kMagic)) {
    *why = "not a rank job (csim-rank is started by simrun or the clustersim module, not by hand)";
    return false;
  }
  ByteReader r(bytes, sizeof kMagic);
  const auto version = r.get<std::uint32_t>();
  const auto msg_size = r.get<std::uint32_t>();
  const auto op_size = r.get<std::uint32_t>();
  if (!r.ok() || version != kVersion || msg_size != sizeof(Msg) || op_size != sizeof(core::Op)) {
    *why = "the rank job was written by another build (format " + std::to_string(version) +
           "; this csim-rank reads " + std::to_string(kVersion) +
           "): use the csim-rank built with the launcher";
    return false;
  }
  const auto runtime = r.get<std::uint8_t>();
  if (runtime > static_cast<std::uint8_t>(RankRuntime::kCuda)) r.fail();
  setup->runtime = static_cast<RankRuntime>(runtime);
  setup->standin_busy_ns = r.get_vec<TimeNs>();
  setup->time_scale = r.get<double>();
  setup->options.emulate_gil = r.get<bool>();
  setup->heartbeat_ms = r.get<int>();
  if (!r.ok()) {
    *why = "the rank job's setup is cut short or corrupt";
    return false;
  }
  std::size_t at = r.offset();
  if (!decode_program(bytes, &at, program, why)) return false;
  if (at != bytes.size()) {
    *why = "the rank job has " + std::to_string(bytes.size() - at) + " bytes after its Program";
    return false;
  }
  if (setup->runtime == RankRuntime::kStandin &&
      setup->standin_busy_ns.size() != program->ops.size()) {
    *why = "the rank job's stand-in durations do not match its Program's ops";
    return false;
  }
  return true;
}

std::vector<std::string> rank_argv(const std::string& exe, const RankArgs& a) {
  return {exe,
          "--coordinator",
          a.host + ":" + std::to_string(a.port),
          "--rank",
          std::to_string(a.rank),
          "--clock-zero-ns",
          std::to_string(a.clock_zero_ns),
          "--job-fd",
          std::to_string(a.job_fd)};
}

bool parse_rank_args(int argc, const char* const* argv, RankArgs* a, std::string* why) {
  const std::string usage =
      "usage: csim-rank --coordinator HOST:PORT --rank R --clock-zero-ns Z --job-fd FD (started "
      "by launch mode processes, not by hand)";
  auto number = [](const std::string& s, std::int64_t* out) {
    try {
      std::size_t used = 0;
      *out = std::stoll(s, &used);
      return used == s.size();
    } catch (const std::exception&) {
      return false;
    }
  };
  bool have[4] = {false, false, false, false};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    std::int64_t n = 0;
    if (k == "--coordinator") {
      const std::size_t colon = v.rfind(':');
      if (colon == std::string::npos || !number(v.substr(colon + 1), &n)) break;
      a->host = v.substr(0, colon);
      a->port = static_cast<int>(n);
      have[0] = true;
    } else if (k == "--rank" && number(v, &n)) {
      a->rank = static_cast<int>(n);
      have[1] = true;
    } else if (k == "--clock-zero-ns" && number(v, &n)) {
      a->clock_zero_ns = n;
      have[2] = true;
    } else if (k == "--job-fd" && number(v, &n)) {
      a->job_fd = static_cast<int>(n);
      have[3] = true;
    } else {
      break;
    }
  }
  if (argc != 9 || !have[0] || !have[1] || !have[2] || !have[3]) {
    *why = usage;
    return false;
  }
  return true;
}

bool read_job_fd(int fd, std::string* bytes, std::string* why) {
  bytes->clear();
  char buf[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *why = "cannot read the rank job from fd " + std::to_string(fd) + ": " + std::strerror(errno);
      return false;
    }
    if (n == 0) return true;
    bytes->append(buf, static_cast<std::size_t>(n));
    at += n;
  }
}

}  // namespace csim::real
