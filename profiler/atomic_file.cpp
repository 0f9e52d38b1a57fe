// Atomic file output and the registry of in-flight temporaries (see atomic_file.hpp).
//
// The registry is a fixed array of slots, each a char buffer plus an atomic state. A writer claims
// a free slot (kFree → kClaimed), copies the path in, then publishes it (kClaimed → kActive). A
// signal handler only unlinks kActive slots: it never allocates, locks or waits, and a slot it
// sees as kActive always holds a complete, NUL-terminated path. If every slot is taken (more than
// kSlots concurrent writers), the file is still written atomically but not registered.
#include "profiler/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "core/error.hpp"

namespace csim::prof {
namespace {

constexpr int kSlots = 64;
constexpr std::size_t kPathMax = 4096;
enum SlotState : int { kFree = 0, kClaimed = 1, kActive = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char path[kPathMax] = {};
};
static_assert(std::atomic<int>::is_always_lock_free, "signal-safe registry needs lock-free ints");

// Constant-initialised (no guard variable, no dynamic init): safe to touch from a signal handler
// at any time, even before main().
constinit std::array<Slot, kSlots> g_slots{};
std::array<Slot, kSlots>& slots() {
  return g_slots;
}

int register_temporary(const std::string& path) {
  if (path.size() + 1 > kPathMax) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    Slot& s = slots()[i];
    if (s.state.compare_exchange_strong(expected, kClaimed)) {
      std::memcpy(s.path, path.c_str(), path.size() + 1);
      s.state.store(kActive, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void unregister_temporary(int slot) {
  if (slot < 0) return;
  slots()[slot].state.store(kFree, std::memory_order_release);
}

}  // namespace

namespace {

// `path.tmp.<pid>`, registered while WRITE(tmp) writes it, then renamed onto PATH; removed when
// WRITE throws.
void through_temporary(const std::string& path,
                       const std::function<void(const std::string& tmp)>& write) {
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  const int slot = register_temporary(tmp);
  try {
    write(tmp);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      throw std::runtime_error(path + ": cannot rename temporary onto it: " + std::strerror(errno));
    }
  } catch (...) {
    std::remove(tmp.c_str());
    unregister_temporary(slot);
    throw;
  }
  unregister_temporary(slot);
}

}  // namespace

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& body) {
  through_temporary(path, [&](const std::string& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      throw std::runtime_error(path + ": cannot open '" + tmp +
                               "' for writing: " + std::strerror(errno));
    }
    body(out);
    out.flush();
    if (!out) throw std::runtime_error(path + ": write failed (disk full?)");
    out.close();
    if (out.fail()) throw std::runtime_error(path + ": close failed");
  });
}

void write_file_atomically_fd(const std::string& path, const std::function<void(int fd)>& body) {
  through_temporary(path, [&](const std::string& tmp) {
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
      throw std::runtime_error(path + ": cannot open '" + tmp +
                               "' for writing: " + std::strerror(errno));
    }
    try {
      body(fd);
    } catch (...) {
      ::close(fd);
      throw;
    }
    if (::close(fd) != 0) throw std::runtime_error(path + ": close failed");
  });
}

void write_fully_at(int fd, const char* d, std::size_t n, std::uint64_t off,
                    const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, d, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      throw std::runtime_error(
          path + ": write failed (disk full?): " + std::strerror(w < 0 ? errno : ENOSPC));
    }
    d += w;
    n -= static_cast<std::size_t>(w);
    off += static_cast<std::uint64_t>(w);
  }
}

int remove_inflight_temporaries() noexcept {
  int removed = 0;
  for (Slot& s : slots()) {
    if (s.state.load(std::memory_order_acquire) == kActive) {
      if (::unlink(s.path) == 0) ++removed;
    }
  }
  return removed;
}

namespace {

// The directory part of PATH as the OS resolves it: "." for "file.json", "/" for "/file.json".
std::string parent_of(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const std::size_t slash = p.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return p.substr(0, slash);
}

[[noreturn]] void cannot_write(const std::string& option, const std::string& path,
                               const std::string& what, int err, const std::string& hint) {
  throw InputError(option + " " + path, "", "cannot write " + what + ": " + std::strerror(err),
                   hint);
}

// Why a new entry cannot be made in DIR (which exists): the errno of creating and removing a
// registered probe file NAME there, 0 when it can.
int probe_new_file(const std::string& file) {
  const int slot = register_temporary(file);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  const int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    ::close(fd);
    ::unlink(file.c_str());
  }
  unregister_temporary(slot);
  return err == EEXIST ? 0 : err;  // a leftover of the same pid: the directory is writable
}

// The hint for a directory that is missing, not a directory, or not writable.
std::string dir_hint(const std::string& dir, int err) {
  if (err == ENOENT)
    return "the directory " + dir + " does not exist; create it first with mkdir -p " + dir;
  if (err == ENOTDIR) return "a part of " + dir + " is a file, not a directory";
  if (err == EACCES || err == EPERM || err == EROFS) return "choose a directory you can write to";
  return "choose another path";
}

}  // namespace

void check_output_file(const std::string& option, const std::string& path) {
  if (path.empty())
    throw InputError(option, "", "needs a file name", "e.g. " + option + " out.json");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    cannot_write(option, path, "the file", EISDIR,
                 "it is a directory; name a file, e.g. " + path + (path.back() == '/' ? "" : "/") +
                     "out.json");
  const std::string dir = parent_of(path);
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0) {
    const int err = errno;
    cannot_write(option, path, "the file", err, dir_hint(dir, err));
  }
  if (!S_ISDIR(dst.st_mode))
    cannot_write(option, path, "the file", ENOTDIR, dir + " is a file, not a directory");
  const std::string tmp = path + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  if (const int err = probe_new_file(tmp); err != 0)
    cannot_write(option, path, "the file", err, dir_hint(dir, err));
}

void check_output_dir(const std::string& option, const std::string& path) {
  if (path.empty())
    throw InputError(option, "", "needs a directory name", "e.g. " + option + " ranks/");
  const std::string probe_name =
      "/.csim-probe.tmp." + std::to_string(static_cast<long>(::getpid()));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      cannot_write(option, path, "into it", ENOTDIR,
                   "it is a file; name a directory (it is created if missing)");
    if (const int err = probe_new_file(path + probe_name); err != 0)
      cannot_write(option, path, "into it", err, dir_hint(path, err));
    return;
  }
  if (const int err = errno; err != ENOENT)
    cannot_write(option, path, "into it", err, dir_hint(path, err));
  // Missing: created later with its missing parents; the nearest existing ancestor must take them.
  std::string up = path;
  for (;;) {
    up = parent_of(up);
    if (::stat(up.c_str(), &st) == 0) break;
    const int err = errno;
    if (err != ENOENT || up == "." || up == "/")
      cannot_write(option, path, "into it", err, dir_hint(up, err));
  }
  if (!S_ISDIR(st.st_mode))
    cannot_write(option, path, "into it", ENOTDIR, up + " is a file, not a directory");
  if (const int err = probe_new_file(up + probe_name); err != 0)
    cannot_write(option, path, "into it", err, dir_hint(up, err));
}

int inflight_temporary_count() noexcept {
  int n = 0;
  for (Slot& s : slots()) {
    if (s.state.load(std::memory_order_acquire) == kActive) ++n;
  }
  return n;
}

}  // namespace csim::prof
