// pa-lab's --layout and --page-table, run as a user runs them: a stage
// refuses the forms its kernels do not read (nhd and hnd: stages 5 and 8
// read them; CSR tables: stages 1-5 and 8) before a GPU is asked for (so
// these pass on a machine without one), `trace` traces each stage over the
// forms it reads, refuses the rest by name and takes the default form given
// explicitly as a no-op, `list` and the help say which stage reads what. Bad
// names are in test_bad_flags.cpp's table. One test runs stages 5 and 8 on
// hnd + CSR on a GPU (skipped without one).
#include <catch2/catch_test_macros.hpp>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_skip.hpp"
#include "run_tool.hpp"

namespace fs = std::filesystem;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// pa-lab's exit statuses (cli/commands.hpp).
constexpr int kOk = 0, kNoGpu = 2, kUsage = 3;

int lab(const std::string& args, std::string& out) { return pa::test::run_tool(PA_LAB_EXE, args, out); }

// The no-GPU message's words (cli/no_gpu.hpp): a refusal must come before it.
bool says_no_gpu(const std::string& out) {
  return has(out, "built without CUDA") || has(out, "no CUDA driver or GPU") || has(out, "cannot be used");
}

// The line of `out` that starts with `start`, or "".
std::string line_starting(const std::string& out, const std::string& start) {
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(start, 0) == 0) return l;
  return "";
}

const char* kSmall = "--heads 8 --kv-heads 2 --context-lens 1,17,100 --seed 1";

}  // namespace

TEST_CASE("pa-lab run: stages refuse the layouts and tables they do not read before any GPU work", "[cli][layout]") {
  struct Case {
    const char* stage;
    const char* flags;
    std::vector<std::string> must_say;
  };
  const std::vector<Case> cases = {
      {"q_to_smem", "--layout nhd",
       {"option --layout nhd: stage q_to_smem cannot read a KV cache in layout nhd", "(accepted for this stage: vllm)",
        "nhd is read by stages 5 and 8: pa-lab run --stage optimized --layout nhd"}},
      {"3", "--layout hnd", {"option --layout hnd: stage softmax cannot read", "(accepted for this stage: vllm)"}},
      {"lv", "--layout hnd", {"stage lv cannot read a KV cache in layout hnd", "accepted for this stage: vllm"}},
      {"v2_partition", "--page-table csr",
       {"option --page-table csr: stage v2_partition cannot read a csr page table",
        "(accepted for this stage: padded)", "csr is read by stages 1-5 and 8",
        "pa-lab run --stage optimized --page-table csr"}},
      {"v2_partition", "--layout nhd", {"option --layout nhd: stage v2_partition", "accepted for this stage: vllm"}},
      // Both: the layout is named first, and the suggestion keeps both flags.
      {"cascade_merge", "--prefix-len 16 --layout hnd --page-table csr",
       {"option --layout hnd: stage cascade_merge", "accepted for this stage: vllm",
        "pa-lab run --stage optimized --layout hnd --page-table csr"}},
      {"qk", "--layout nhd --page-table padded", {"option --layout nhd: stage qk", "--stage optimized --layout nhd"}},
  };
  for (const Case& c : cases) {
    const std::string args = std::string("run --stage ") + c.stage + " " + c.flags + " " + kSmall;
    std::string out;
    const int rc = lab(args, out);
    INFO("pa-lab " << args << "\n" << out);
    CHECK(rc == kUsage);
    CHECK(has(out, "pa-lab run: "));
    for (const auto& part : c.must_say) CHECK(has(out, part));
    CHECK_FALSE(says_no_gpu(out));
    CHECK(line_starting(out, "stage:").empty());  // the report never started
  }
}

TEST_CASE("pa-lab run: the default form is accepted by every stage, the others by the stages that read them",
          "[cli][layout]") {
  // Without a GPU these end at the GPU check (exit 2), with one they run
  // (exit 0): either way the command line was accepted, never exit 3.
  for (const std::string& args :
       {std::string("run --stage qk --layout vllm --page-table padded --iters 0 ") + kSmall,
        std::string("run --stage v2_partition --layout vllm --iters 0 ") + kSmall,
        std::string("run --stage optimized --layout nhd --iters 0 ") + kSmall,
        std::string("run --stage v1 --layout hnd --page-table csr --iters 0 ") + kSmall,
        std::string("run --stage qk --page-table csr --iters 0 ") + kSmall,
        std::string("run --stage optimized --layout hnd --page-table csr --iters 0 ") + kSmall,
        std::string("run --stage 8 --page-table csr --iters 0 ") + kSmall}) {
    std::string out;
    const int rc = lab(args, out);
    INFO("pa-lab " << args << "\n" << out);
    CHECK((rc == kOk || rc == kNoGpu));
    if (rc == kNoGpu) CHECK(says_no_gpu(out));
    if (rc == kOk) CHECK(has(out, "PASS"));
  }
}

TEST_CASE("pa-lab run --stage optimized: a token-row fp8 cache is refused as a problem, without a GPU",
          "[cli][layout]") {
  // nhd and hnd hold 16-bit elements: ProblemSpec::validate refuses the
  // problem itself, in every build, before any GPU or kernel question.
  const std::string args = std::string("run --stage optimized --layout hnd --kv-dtype fp8 --iters 0 ") + kSmall;
  std::string out;
  const int rc = lab(args, out);
  INFO("pa-lab " << args << "\n" << out);
  CHECK(rc == kUsage);
  CHECK(has(out, "option --layout: invalid problem: kv_layout hnd with kv_dtype fp8_e4m3"));
  CHECK(has(out, "accepted: nhd and hnd with a 16-bit cache"));
  CHECK_FALSE(says_no_gpu(out));
}

TEST_CASE("pa-lab run --devices refuses another cache form (context parallelism shards vLLM's)", "[cli][layout]") {
  const std::string args = std::string("run --stage optimized --devices 2 --layout hnd --page-table csr ") + kSmall;
  std::string out;
  const int rc = lab(args, out);
  INFO("pa-lab " << args << "\n" << out);
  CHECK(rc == kUsage);
  CHECK(has(out, "options --layout hnd --page-table csr with --devices"));
  CHECK(has(out, "accepted with --devices: --layout vllm, --page-table padded"));
}

TEST_CASE("pa-lab trace: each stage over the forms it reads; the rest refused before any file",
          "[cli][layout]") {
  const fs::path dir = fs::temp_directory_path() / "pa_cli_cache_form";
  fs::create_directories(dir);
  const std::string file = (dir / "t.patrace").string();
  fs::remove(file);
  struct Refused {
    const char* flags;
    std::string must_say;
  };
  for (const Refused& r :
       {Refused{"--stage qk --layout hnd",
                "option --layout hnd: stage 2 (qk) cannot read a cache in layout hnd with padded page tables"},
        Refused{"--stage v2_partition --page-table csr",
                "option --page-table csr: stage 6 (v2_partition) cannot read a cache in layout vllm with csr page "
                "tables"}}) {
    const std::string args = std::string("trace ") + r.flags + " --source model " + kSmall + " -o " + file;
    std::string out;
    const int rc = lab(args, out);
    INFO("pa-lab " << args << "\n" << out);
    CHECK(rc == kUsage);
    CHECK(has(out, "pa-lab trace: " + r.must_say));
    CHECK(has(out, "pa-lab trace --stage optimized"));
    CHECK_FALSE(fs::exists(file));
  }
  // Stages 5 and 8 over nhd and hnd, and over a CSR table, stage 2 over a
  // CSR table: a trace whose header keeps the form.
  int traced = 0;
  for (const char* l : {"--stage optimized --layout nhd", "--stage optimized --layout hnd",
                        "--stage optimized --page-table csr", "--stage optimized --layout hnd --page-table csr",
                        "--stage warp_reduce --layout nhd", "--stage warp_reduce --layout hnd --page-table csr",
                        "--stage qk --page-table csr"}) {
    const std::string args = std::string("trace ") + l + " --source model " + kSmall + " -o " + file;
    std::string out;
    const int rc = lab(args, out);
    INFO("pa-lab " << args << "\n" << out);
    REQUIRE(rc == kOk);
    REQUIRE(fs::exists(file));
    CHECK(has(line_starting(out, "wrote "), " events"));
    fs::remove(file);
    ++traced;
  }
  CHECK(traced == 7);
  // The default form given explicitly: the same trace as without the flags.
  std::string first_lines[2];
  int i = 0;
  for (const char* extra : {"", "--layout vllm --page-table padded "}) {
    const std::string args = std::string("trace --stage qk ") + extra + "--source model " + kSmall + " -o " + file;
    std::string out;
    const int rc = lab(args, out);
    INFO("pa-lab " << args << "\n" << out);
    REQUIRE(rc == kOk);
    REQUIRE(fs::exists(file));
    first_lines[i++] = line_starting(out, "wrote ");
    fs::remove(file);
  }
  CHECK(has(first_lines[0], " events"));
  CHECK(first_lines[0] == first_lines[1]);
  fs::remove_all(dir);
}

TEST_CASE("pa-lab list shows the layouts and page tables and the stages that read them", "[cli][layout]") {
  std::string out;
  REQUIRE(lab("list", out) == kOk);
  INFO(out);
  CHECK(has(out, "KV cache layouts (pa-lab run --layout NAME; default vllm):"));
  CHECK(has(out, "page tables (pa-lab run --page-table NAME; default padded):"));
  struct Row {
    const char* start;
    const char* readers;
    const char* shape;
  };
  for (const Row& r : {Row{"  vllm ", "stages 1-8", "K [pages, kv_heads, head/x, page, x]"},
                       Row{"  nhd ", "stages 5 and 8", "[pages, 2, page, kv_heads, head]"},
                       Row{"  hnd ", "stages 5 and 8", "[pages, 2, kv_heads, page, head]"},
                       Row{"  padded ", "stages 1-8", "block_tables [seqs, max_blocks_per_seq]"},
                       Row{"  csr ", "stages 1-5 and 8", "indptr [seqs + 1], indices, last_page_len"}}) {
    const std::string line = line_starting(out, r.start);
    INFO("row " << r.start << ": " << line);
    CHECK(has(line, r.readers));
    CHECK(has(line, r.shape));
  }
  CHECK(has(out, "traces (pa-lab trace) cover every layout and page table a stage reads"));
  CHECK(has(out, "multi-level cascade (pa-lab run --stage cascade_merge --levels G:T,...)"));
  // After the stages, before the configurations.
  CHECK(out.find("KV cache layouts") > out.find("8 optimized"));
}

TEST_CASE("pa-lab run --help and trace --help document --layout and --page-table", "[cli][layout]") {
  std::string run, trace;
  REQUIRE(lab("run --help", run) == kOk);
  REQUIRE(lab("trace --help", trace) == kOk);
  INFO(run);
  CHECK(has(run, "--layout vllm|nhd|hnd"));
  CHECK(has(run, "--page-table padded|csr"));
  CHECK(has(run, "vllm: stages 1-8; nhd: stages 5 and 8; hnd: stages 5 and 8"));
  CHECK(has(run, "padded: stages 1-8; csr: stages 1-5 and 8"));
  INFO(trace);
  CHECK(has(trace, "--layout L, --page-table T"));
  CHECK(has(trace, "stages warp_reduce and optimized are"));
  CHECK(has(trace, "both page tables (padded, csr: the kv_indptr"));
}

TEST_CASE("pa-lab run --stage optimized and v1 on hnd with CSR tables pass against the reference",
          "[cli][layout][gpu]") {
  PA_REQUIRE_GPU();
  struct Form {
    const char* flags;
    const char* layout;
    const char* table;
  };
  for (const Form& f : {Form{"--stage optimized --layout hnd --page-table csr", "layout hnd", "page table csr"},
                        Form{"--stage optimized --layout nhd", "layout nhd", "page table padded"},
                        Form{"--stage v1 --layout hnd --page-table csr", "layout hnd", "page table csr"},
                        Form{"--stage warp_reduce --layout nhd", "layout nhd", "page table padded"}}) {
    const std::string args = std::string("run ") + f.flags + " --iters 0 " + kSmall;
    std::string out;
    const int rc = lab(args, out);
    INFO("pa-lab " << args << "\n" << out);
    CHECK(rc == kOk);
    CHECK(has(out, "check (vs CPU reference, float64)"));  // ": " for stage 8, a new line for stage 5
    CHECK(has(out, "\nPASS\n"));
    const std::string cache = line_starting(out, "cache:   ");
    CHECK(has(cache, f.layout));
    CHECK(has(cache, f.table));
  }
}
