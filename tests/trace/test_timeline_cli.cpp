// pa-lab timeline, run as a user runs it: a timeline file exported to JSON
// that a strict reader accepts, and every wrong command line (missing or
// unreadable file, bad flag, recording asked for) refused with pa-lab's usage
// status and a message naming the flag, the value and what is accepted.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <unistd.h>
#include <vector>

#include "pa/trace/timeline_file.hpp"
#include "pa/trace/trace_file.hpp"
#include "run_tool.hpp"
#include "strict_json.hpp"
#include "timeline_samples.hpp"
#include "trace_samples.hpp"

namespace fs = std::filesystem;
using namespace pa::trace;
using namespace pa::trace::testing;
using Catch::Matchers::ContainsSubstring;

namespace {

// pa-lab's exit statuses (cli/commands.hpp).
constexpr int kOk = 0, kFail = 1, kUsage = 3;

int run_lab(const std::string& args, std::string& out) { return pa::test::run_tool(PA_LAB_EXE, args, out); }

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

TEST_CASE("pa-lab timeline exports a timeline file as valid JSON, one event per span", "[trace][timeline][cli]") {
  const fs::path dir = fs::temp_directory_path() / ("pa_timeline_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string patl = (dir / "run.patl").string(), json = (dir / "run.json").string();
  write_timeline(patl, sample_timeline(40));
  std::string out;
  REQUIRE(run_lab("timeline --from '" + patl + "' -o '" + json + "'", out) == kOk);
  INFO(out);
  CHECK_THAT(out, ContainsSubstring("wrote " + json + ": 40 spans") && ContainsSubstring("5 SMs") &&
                      ContainsSubstring("ui.perfetto.dev") && ContainsSubstring("overhead"));
  const pa::test::JsonValue doc = pa::test::StrictJson::parse(read_text(json));
  int complete = 0;
  for (const auto& e : doc.at("traceEvents").items) complete += e.at("ph").text == "X";
  CHECK(complete == 40);

  // A timeline whose tracer overflowed is exported, with a warning.
  TimelineData over = sample_timeline(3);
  over.header.dropped_spans = 5;
  write_timeline(patl, over);
  REQUIRE(run_lab("timeline --from '" + patl + "' --output '" + json + "'", out) == kOk);
  CHECK_THAT(out, ContainsSubstring("warning") && ContainsSubstring("dropped 5 spans"));
  fs::remove_all(dir);
}

TEST_CASE("pa-lab timeline refuses wrong command lines and files, saying what is accepted", "[trace][timeline][cli]") {
  const fs::path dir = fs::temp_directory_path() / ("pa_timeline_cli_bad_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string good = (dir / "good.patl").string(), trace = (dir / "a.patrace").string();
  write_timeline(good, sample_timeline(3));
  write_trace(trace, sample_trace(2));
  const std::string out_json = (dir / "o.json").string(), out_patl = (dir / "o.patl").string();
  struct Case {
    std::string args;
    int status;
    std::vector<std::string> must_say;
  };
  const std::vector<Case> cases = {
      {"timeline --from " + (dir / "missing.patl").string() + " -o " + out_json, kUsage,
       {"option --from", "cannot open timeline", "missing.patl", "No such file"}},
      {"timeline --from " + dir.string() + " -o " + out_json, kUsage, {"option --from", "is a directory"}},
      {"timeline --from /dev/zero -o " + out_json, kUsage, {"option --from", "not a regular file", "a .patl file"}},
      {"timeline --from " + trace + " -o " + out_json, kFail,
       {"error", trace, "not a pa-lab timeline", "PALTIMEL"}},
      {"timeline --from " + good + " -o " + (dir / "no_such_folder" / "o.json").string(), kUsage,
       {"option -o / --output", "no_such_folder/o.json", "No such file"}},
      {"timeline --from " + good + " -o " + out_json + " --bogus 1", kUsage,
       {"unknown option --bogus", "pa-lab timeline --help"}},
      {"timeline -o " + out_json, kUsage, {"--from FILE.patl is required"}},
      {"timeline --from " + good, kUsage, {"-o FILE (or --output FILE) is required"}},
      {"timeline --from " + good + " --from " + good + " -o " + out_json, kUsage, {"option --from given twice"}},
      {"timeline --from", kUsage, {"option --from needs a value"}},
      {"timeline " + good, kUsage, {"unexpected argument", "options are --name value"}},
      {"timeline --stage nope -o " + out_patl, kUsage, {"option --stage", "unknown stage 'nope'", "timed:"}},
      {"timeline --stage qk --context-lens 10 -o " + out_patl, kUsage,
       {"stage qk", "cannot be timed in this build", "timed:"}},
      {"timeline --stage optimized --context-lens 10", kUsage, {"-o FILE.patl (or --output FILE.patl) is required"}},
      {"timeline --stage optimized --from " + good + " -o " + out_patl, kUsage,
       {"--from and --stage do not go together"}},
      {"timeline --stage optimized --heads 0 -o " + out_patl, kUsage, {"--heads"}},
      {"timeline --stage cascade_merge --context-lens 64 -o " + out_patl, kUsage,
       {"--stage cascade_merge", "--prefix-len P > 0"}},
      {"timeline --stage cascade_merge --prefix-len 32 --suffix-lens 1,2 --seqs 3 -o " + out_patl, kUsage,
       {"--suffix-lens lists 2 lengths", "3 sequences"}},
      {"timeline --stage cascade_merge --prefix-len 7 --suffix-lens 1 -o " + out_patl, kUsage,
       {"--prefix-len", "7", "multiple of block_size"}},
      {"timeline --stage v2_partition --splits 2 -o " + out_patl, kUsage,
       {"--splits", "stage optimized only", "stage v2_partition has no splits"}},
  };
  int ran = 0;
  for (const Case& c : cases) {
    std::string out;
    INFO("pa-lab " << c.args);
    const int status = run_lab(c.args, out);
    INFO(out);
    CHECK(status == c.status);
    CHECK_THAT(out, ContainsSubstring("pa-lab timeline"));
    for (const std::string& s : c.must_say) CHECK_THAT(out, ContainsSubstring(s));
    ++ran;
  }
  CHECK(ran == 20);
  CHECK_FALSE(fs::exists(out_json));  // no case wrote anything
  CHECK_FALSE(fs::exists(out_patl));

  std::string help;
  CHECK(run_lab("timeline --help", help) == kOk);
  CHECK_THAT(help, ContainsSubstring("--from FILE") && ContainsSubstring("ui.perfetto.dev") &&
                       ContainsSubstring("--stage NAME") && ContainsSubstring("timed:") &&
                       ContainsSubstring("--context-lens") && ContainsSubstring("--prefix-len") &&
                       ContainsSubstring("--suffix-lens"));
  CHECK(run_lab("--help", help) == kOk);
  CHECK_THAT(help, ContainsSubstring("timeline") && ContainsSubstring("Perfetto"));
  fs::remove_all(dir);
}
