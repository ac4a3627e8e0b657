// Write, then rename: see pa/core/atomic_file.hpp.
#include "pa/core/atomic_file.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace pa::core {

namespace {

FileWriteError write_error(const std::string& path, const std::string& what, int err) {
  return FileWriteError("cannot write '" + path + "': " + what + ": " + std::strerror(err ? err : EIO) +
                        " (the previous file, if any, is unchanged)");
}

// A fresh temporary name beside `path` (mkstemp: never a stale or another
// writer's file); returns the open descriptor.
int make_temporary(const std::string& path, std::string& tmp) {
  tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) throw write_error(path, "cannot create a temporary file beside it", errno);
  return fd;
}

void refuse_folder(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) throw write_error(path, "it is a folder", EISDIR);
}

}  // namespace

void check_can_write(const std::string& path) {
  refuse_folder(path);
  std::string tmp;
  ::close(make_temporary(path, tmp));
  std::remove(tmp.c_str());
}

namespace {

// The steps both forms share: a fresh temporary beside `path`, `fill` writes
// it (returns 0 or the errno of a failed write), then flush, fsync, close and
// rename; on any failure the temporary is removed and `path` is untouched.
void replace_file(const std::string& path, const std::function<int(std::FILE*)>& fill) {
  refuse_folder(path);
  std::string tmp;
  const int fd = make_temporary(path, tmp);
  std::FILE* f = ::fdopen(fd, "wb");
  if (!f) {
    const int err = errno;
    ::close(fd);
    std::remove(tmp.c_str());
    throw write_error(path, "fdopen", err);
  }
  int err = 0;
  try {
    err = fill(f);
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (!err && std::fflush(f) != 0) err = errno ? errno : EIO;
  if (!err && ::fsync(::fileno(f)) != 0) err = errno;
  if (std::fclose(f) != 0 && !err) err = errno ? errno : EIO;
  if (err) {
    std::remove(tmp.c_str());
    throw write_error(path, "writing " + tmp, err);
  }
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::chmod(tmp.c_str(), 0666 & ~mask);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    throw write_error(path, "renaming " + tmp + " onto it", err);
  }
}

}  // namespace

void write_file_atomically(const std::string& path, std::string_view bytes, const WriteBytes& write) {
  replace_file(path, [&](std::FILE* f) {
    errno = 0;
    const std::size_t n = write ? write(bytes.data(), bytes.size(), f) : std::fwrite(bytes.data(), 1, bytes.size(), f);
    return n == bytes.size() ? 0 : (errno ? errno : EIO);
  });
}

void write_file_atomically_streamed(const std::string& path, const ProduceFile& produce) {
  replace_file(path, [&](std::FILE* f) {
    errno = 0;
    produce(f);
    return std::ferror(f) ? (errno ? errno : EIO) : 0;
  });
}

}  // namespace pa::core
