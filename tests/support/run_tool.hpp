// Running one of the lab's command-line tools from a test, as a user runs it:
// through the shell, stdin closed, stdout and stderr captured together (the
// order a user sees them). Leak reports are off for the child: under the
// sanitizer build they would be mixed into the output the test checks.
#pragma once
#include <cstdio>
#include <string>
#include <sys/wait.h>

#include <catch2/catch_test_macros.hpp>

namespace pa::test {

// Returns the exit status (-1 if the tool did not exit) and sets `out`.
inline int run_tool(const std::string& exe, const std::string& args, std::string& out) {
  const std::string cmd = "ASAN_OPTIONS=detect_leaks=0 '" + exe + "' " + args + " 2>&1 </dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  out.clear();
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace pa::test
