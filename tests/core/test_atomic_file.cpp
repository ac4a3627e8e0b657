// pa::core::write_file_atomically (pa/core/atomic_file.hpp): every way a write
// can fail leaves the previous file as it was and no temporary file behind, and
// the error names the path and the reason. The failures are real ones (a
// missing folder, a folder without write permission, a file-size limit the
// kernel enforces) except the full disk, simulated by a writer that stops
// half-way with ENOSPC.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pa/core/atomic_file.hpp"

using namespace pa::core;
using Catch::Matchers::ContainsSubstring;
namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A folder of its own under the system's temporary folder, removed afterwards.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "pa_atomic_file_XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path, fs::perms::owner_all, ec);
    fs::remove_all(path, ec);
  }
  std::size_t entries() const {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(path)) ++n;
    return n;
  }
};

// The error write_file_atomically throws, or "" when it did not throw.
std::string error_of(const std::string& path, const std::string& bytes, const WriteBytes& w = {}) {
  try {
    write_file_atomically(path, bytes, w);
  } catch (const FileWriteError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("atomic write: replaces the file, leaves no temporary file", "[core][files]") {
  TempDir d;
  const fs::path p = d.path / "r.json";
  write_file_atomically(p.string(), "first\n");
  CHECK(slurp(p) == "first\n");
  write_file_atomically(p.string(), "second\n");
  CHECK(slurp(p) == "second\n");
  write_file_atomically(p.string(), "");
  CHECK(slurp(p).empty());
  CHECK(d.entries() == 1);
  struct stat st{};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  const mode_t mask = ::umask(0);
  ::umask(mask);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));  // not mkstemp's 0600
  CHECK_NOTHROW(check_can_write(p.string()));
  CHECK(d.entries() == 1);
}

TEST_CASE("atomic write: a missing folder is an error naming the path", "[core][files]") {
  TempDir d;
  const std::string p = (d.path / "no_such_folder" / "r.json").string();
  const std::string e = error_of(p, "x");
  INFO(e);
  CHECK_THAT(e, ContainsSubstring(p) && ContainsSubstring("No such file"));
  CHECK_THROWS_WITH(check_can_write(p), ContainsSubstring(p) && ContainsSubstring("No such file"));
  CHECK_FALSE(fs::exists(d.path / "no_such_folder"));
}

TEST_CASE("atomic write: the path is a folder", "[core][files]") {
  TempDir d;
  fs::create_directory(d.path / "r.json");
  const fs::path inside = d.path / "r.json" / "keep";
  std::ofstream(inside) << "kept";
  CHECK_THAT(error_of((d.path / "r.json").string(), "x"), ContainsSubstring("r.json") && ContainsSubstring("folder"));
  CHECK_THROWS_WITH(check_can_write((d.path / "r.json").string()), ContainsSubstring("folder"));
  CHECK(slurp(inside) == "kept");
  CHECK(d.entries() == 1);  // no temporary file left beside it
}

TEST_CASE("atomic write: a read-only folder keeps the old file", "[core][files]") {
  TempDir d;
  const fs::path p = d.path / "r.json";
  write_file_atomically(p.string(), "old\n");
  // r-x for everyone: nobody may add a file. Root ignores folder permissions,
  // so as root the write is tried by a child process that has given up root
  // (the unprivileged user 65534): the same code, failing for the real reason.
  fs::permissions(d.path, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                              fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    const std::string e = error_of(p.string(), "new\n");
    bool check_refused = false;
    try {
      check_can_write(p.string());
    } catch (const FileWriteError& ce) {
      check_refused = std::string(ce.what()).find("Permission denied") != std::string::npos;
    }
    const bool named = e.find(p.string()) != std::string::npos && e.find("Permission denied") != std::string::npos &&
                       e.find("unchanged") != std::string::npos;
    ::_exit(named && check_refused ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  INFO("child exit 1: the write was not refused with the path and 'Permission denied'; 3: could not drop root");
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(slurp(p) == "old\n");
  CHECK(d.entries() == 1);
}

TEST_CASE("atomic write: a full disk (a failing writer) keeps the old file", "[core][files]") {
  TempDir d;
  const fs::path p = d.path / "r.json";
  write_file_atomically(p.string(), "old\n");
  // Writes half of the bytes, then fails the way write(2) does on a full disk.
  int calls = 0;
  const WriteBytes full_disk = [&](const void* data, std::size_t size, std::FILE* f) {
    ++calls;
    const std::size_t half = std::fwrite(data, 1, size / 2, f);
    errno = ENOSPC;
    return half;
  };
  const std::string e = error_of(p.string(), std::string(100000, 'x'), full_disk);
  INFO(e);
  CHECK_THAT(e, ContainsSubstring(p.string()) && ContainsSubstring("No space left on device") &&
                    ContainsSubstring("unchanged"));
  CHECK(calls == 1);
  CHECK(slurp(p) == "old\n");
  CHECK(d.entries() == 1);  // the temporary file is gone
}

TEST_CASE("atomic write: a file-size limit (the kernel refusing the bytes) keeps the old file", "[core][files]") {
  TempDir d;
  const fs::path p = d.path / "r.json";
  write_file_atomically(p.string(), "old\n");
  // RLIMIT_FSIZE makes write(2) fail with EFBIG past the limit, even for root:
  // the real write path fails, not a substitute. SIGXFSZ would kill the process.
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
  auto* const old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 4096;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  const std::string e = error_of(p.string(), std::string(1 << 20, 'x'));
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  INFO(e);
  CHECK_THAT(e, ContainsSubstring(p.string()) && ContainsSubstring("File too large"));
  CHECK(slurp(p) == "old\n");
  CHECK(d.entries() == 1);
}
