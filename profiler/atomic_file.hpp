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

// [SECTION] Output paths checked before any work (docs/limits.md, "Output paths")
//
// A tool checks every output the user named before it reads, simulates or writes anything, so a
// path that cannot be written fails in milliseconds with exit 2 and one line, instead of after the
// whole run with an internal error. OPTION is the option that named the path ("-o", "--summary"),
// PATH as given. Both throw csim::InputError("OPTION PATH", "", "cannot write ...: <strerror>",
// hint) and leave nothing behind.

// A file that write_file_atomically will write: PATH is not a directory, and its directory exists
// and accepts a new file. The directory is probed by creating (O_EXCL) and removing the very
// temporary the writer will use, PATH.tmp.<pid>, registered like one: a read-only file system,
// permissions, ACLs and a file where the directory should be answer as they will when writing.
void check_output_file(const std::string& option, const std::string& path);

// A directory the tool creates if needed (mkdir -p) and writes files into (simrun --per-rank):
// PATH is a directory that accepts a new file, or does not exist and its nearest existing
// ancestor is a directory that accepts a new entry. Nothing is created.
void check_output_dir(const std::string& option, const std::string& path);

}  // namespace csim::prof
