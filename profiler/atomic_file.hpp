// Atomic file output: every writer in ClusterSim writes `PATH.tmp.<pid>` and renames it onto PATH,
// so a reader never sees a half-written file, and a failure or an interrupt leaves none behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace csim::prof {

// Writes `path` through `path.tmp.<pid>`: calls body(stream), flushes, closes, renames. If body
// throws or I/O fails, the temporary is removed and the exception propagates (I/O failures as
// std::runtime_error naming the path). The parent directory must exist.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& body);
// The same through a file descriptor (for writes at offsets: write_fully_at); the file is closed
// by the caller's return, then renamed.
void write_file_atomically_fd(const std::string& path, const std::function<void(int fd)>& body);
// pwrite(2) of N bytes at D to offset OFF of FD, retried until all are written; throws
// std::runtime_error naming PATH on failure.
void write_fully_at(int fd, const char* d, std::size_t n, std::uint64_t off,
                    const std::string& path);

// Unlinks every temporary that write_file_atomically is writing right now. Async-signal-tolerant:
// it only reads a fixed array of char buffers guarded by lock-free atomics and calls unlink(2), so
// a SIGINT/SIGTERM handler may call it before _exit(130). Returns the number removed.
int remove_inflight_temporaries() noexcept;

// How many temporaries are registered now (for tests).
int inflight_temporary_count() noexcept;

}  // namespace csim::prof
