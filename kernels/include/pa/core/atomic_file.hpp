// Writing a file so that a failure never loses the one already there. Every
// file the lab writes for keeps (traces, benchmark results, screenshots) goes
// through write_file_atomically: the bytes go to a new temporary file in the
// same folder (so the rename cannot cross file systems), are flushed to disk,
// and only then replace the target by rename(2), which is atomic on POSIX file
// systems. A reader sees the old file or the new one, never half of either.
// Plain C++; tests/core/test_atomic_file.cpp covers a missing folder, a
// read-only folder, a folder where the file should be, a full disk and a
// file-size limit.
#pragma once
#include <cstddef>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace pa::core {

// Why a write failed: the message names the target path, the step that failed
// and the system's reason, and says that the previous file is unchanged.
class FileWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes the bytes to an open temporary file; returns how many it wrote (fewer
// than `size` is a failure, with errno saying why). The default is std::fwrite;
// tests pass one that fails like a full disk.
using WriteBytes = std::function<std::size_t(const void* data, std::size_t size, std::FILE* f)>;

// Replaces `path` with `bytes`, or throws FileWriteError leaving `path` as it
// was and no temporary file behind. The new file gets the usual permissions
// (0666 less the umask), not the temporary file's private 0600.
void write_file_atomically(const std::string& path, std::string_view bytes, const WriteBytes& write = {});

// The same for a file too large to hold in memory first (a timeline's JSON
// export): `produce` writes it to the open temporary file in pieces. A write
// error there (std::ferror) or an exception from `produce` leaves `path` as it
// was and no temporary file behind; the exception propagates unchanged.
using ProduceFile = std::function<void(std::FILE* f)>;
void write_file_atomically_streamed(const std::string& path, const ProduceFile& produce);

// Throws what write_file_atomically would when `path`'s folder is missing or
// does not take new files, or `path` is a folder: a command that runs for
// minutes checks first. Creates and removes a temporary file; `path` itself is
// not touched.
void check_can_write(const std::string& path);

}  // namespace pa::core
