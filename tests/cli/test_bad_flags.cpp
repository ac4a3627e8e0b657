// Every command-line tool given a bad value: pa-lab, pa-bench and pa-viewer
// exit with their usage status and a message that names the flag, the value
// and what is accepted. One table, run against the real binaries (no GPU and
// no window needed: each case is refused before either is touched). Where
// pa-bench is not built (no CUDA), its cases run through the same parser
// pa-bench calls (cli/bench_options.hpp) and check the same message.
#include <catch2/catch_test_macros.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <vector>

#include "bench_options.hpp"
#include "run_tool.hpp"

namespace fs = std::filesystem;

namespace {

enum class Tool { lab, bench, viewer };

struct BadFlag {
  Tool tool;
  std::string args;                   // after the program name; {OUT} is a writable folder
  std::vector<std::string> must_say;  // the flag, the value, what is accepted
};

// pa-lab's usage status (cli/commands.hpp kExitUsage); pa-bench and pa-viewer exit 2.
constexpr int kLabUsage = 3, kOtherUsage = 2;

const std::vector<BadFlag>& cases() {
  static const std::vector<BadFlag> t = {
      // pa-lab: the problem flags (through `trace`, which needs no GPU) and each command's own.
      {Tool::lab, "trace --stage qk --head-size 7", {"--head-size", "7", "64, 80, 96, 112, 128, 192, 256"}},
      {Tool::lab, "trace --stage qk --head-size -1", {"--head-size", "-1", "out of range", "64, 80, 96"}},
      {Tool::lab, "trace --stage qk --head-size 99999999999", {"--head-size", "99999999999", "64, 80, 96"}},
      {Tool::lab, "trace --stage qk --head-size 12x", {"--head-size", "'12x'", "not an integer", "64, 80, 96"}},
      {Tool::lab, "trace --stage qk --block-size 1.5", {"--block-size", "'1.5'", "not an integer", "{8, 16, 32}"}},
      {Tool::lab, "trace --stage qk --heads 0", {"--heads", "0", "1 .. 2147483647"}},
      {Tool::lab, "trace --stage qk --heads abc", {"--heads", "'abc'", "accepted: 1 .. 2147483647"}},
      {Tool::lab, "trace --stage qk --heads ''", {"--heads", "''", "accepted: 1 .. 2147483647"}},
      {Tool::lab, "trace --stage qk --heads 8 --kv-heads 3", {"--kv-heads", "num_kv_heads 3", "dividing num_heads"}},
      {Tool::lab, "trace --stage qk --block-size 7", {"--block-size", "7", "{8, 16, 32}"}},
      {Tool::lab, "trace --stage qk --threads 64", {"--threads", "64", "{128}"}},
      {Tool::lab, "trace --stage qk --threads x", {"--threads", "'x'", "{128}"}},
      {Tool::lab, "trace --stage qk --dtype fp8", {"--dtype", "'fp8'", "fp32, fp16, bf16"}},
      {Tool::lab, "trace --stage qk --kv-dtype fp4", {"--kv-dtype", "'fp4'", "fp8_e4m3, fp8_e5m2"}},
      {Tool::lab, "trace --stage qk --dtype fp32 --kv-dtype fp8", {"--kv-dtype", "fp32", "fp16 or bf16"}},
      {Tool::lab, "trace --stage qk --kv-dtype fp8 --k-scale -1", {"--k-scale", "'-1'", "finite number > 0"}},
      {Tool::lab, "trace --stage qk --kv-dtype fp8 --v-scale inf", {"--v-scale", "'inf'", "finite number > 0"}},
      {Tool::lab, "trace --stage qk --k-scale 0.5", {"--k-scale", "fp8 cache", "fp8_e4m3 or fp8_e5m2"}},
      {Tool::lab, "trace --stage nope", {"--stage", "'nope'", "q_to_smem"}},
      {Tool::lab, "trace --stage qk --spread 3abc", {"--spread", "'3abc'", "a finite number > 0"}},
      {Tool::lab, "trace --stage qk --spread nan", {"--spread", "'nan'", "is not a number", "a finite number > 0"}},
      {Tool::lab, "trace --stage qk --spread -1", {"--spread", "-1", "a finite value > 0"}},
      {Tool::lab, "trace --stage qk --context-lens 1,,2", {"--context-lens", "'1,,2'", "e.g. 1,17,100"}},
      {Tool::lab, "trace --stage qk --context-lens 0", {"--context-lens", "context_lens[0] = 0", ">= 1"}},
      {Tool::lab, "trace --stage qk --context-lens 5,-3", {"--context-lens", "context_lens[1] = -3", ">= 1"}},
      {Tool::lab, "trace --stage qk --seqs 3 --context-lens 1,2", {"--seqs 3", "--context-lens", "2 lengths"}},
      {Tool::lab, "trace --stage qk --context-len 5 --context-lens 5", {"--context-lens", "--context-len", "not both"}},
      {Tool::lab, "trace --stage qk --partition-size 7", {"--partition-size", "7", "multiple of block_size"}},
      {Tool::lab, "trace --stage cascade_merge --prefix-len 7", {"--prefix-len", "7", "multiple of block_size"}},
      {Tool::lab, "trace --stage cascade_merge --context-len 40 --prefix-len 64",
       {"--prefix-len", "64", "no longer than every context"}},
      {Tool::lab, "trace --stage qk --extra-q-stride -3", {"--extra-q-stride", "-3", "0 .. 2147483647"}},
      {Tool::lab, "trace --stage qk --seed -5", {"--seed", "-5", "0 .. 9223372036854775807"}},
      {Tool::lab, "trace --stage qk --seqs 1000000 --context-len 16000000",
       {"--context-lens / --context-len", "blocks", "< 2^31"}},
      {Tool::lab, "trace --stage qk --seqs 2000 --context-len 1000000 --heads 64 --kv-heads 64",
       {"--seqs", "host memory", "half of this machine's memory"}},
      {Tool::lab, "trace --stage qk --heads 1 --heads 2", {"--heads", "twice"}},
      {Tool::lab, "trace --stage qk --source cloud", {"--source", "'cloud'", "auto, gpu, model"}},
      {Tool::lab, "trace --stage qk --select 0,x", {"--select", "'x'", "seq,head"}},
      {Tool::lab, "trace --stage qk --select 99,0", {"--select", "'99,0'", "seq 0 .. 3"}},
      {Tool::lab, "trace --stage qk --bogus 1", {"--bogus", "unknown option", "--help"}},
      {Tool::lab, "trace --stage qk --output {OUT}/no_such_folder/t.patrace",
       {"--output", "no_such_folder/t.patrace", "No such file"}},
      {Tool::lab, "run --stage qk --head-size 7", {"--head-size", "7", "64, 80, 96"}},
      {Tool::lab, "run --stage softmax --iters -1", {"--iters", "-1", "0 .. 2147483647"}},
      {Tool::lab, "run --stage cascade_merge --seqs 8 --levels 3:10,1:5", {"--levels", "3:10,1:5", "groups of 3",
                                                                            "G dividing the 8 requests"}},
      {Tool::lab, "run --stage cascade_merge --seqs 8 --levels 8:x", {"--levels", "item '8:x'", "accepted: G:T"}},
      {Tool::lab, "run --stage cascade_merge --seqs 2 --levels 1:1,1:1,1:1,1:1,1:1,1:1,1:1,1:1,1:1",
       {"--levels", "9 levels", "at most 8 levels"}},
      {Tool::lab, "run --stage cascade_merge --seqs 8 --levels 8:64,1:5 --prefix-len 16",
       {"--levels", "excludes --prefix-len"}},
      {Tool::lab, "run --stage cascade_merge --prefix-len 32 --prefix-kernel nope",
       {"--prefix-kernel", "'nope'", "mma_4warps"}},
      {Tool::lab, "run --stage optimized --devices 0", {"--devices", "0", "1..8"}},
      {Tool::lab, "run --stage optimized --devices 2,9", {"--devices", "9", "1..8"}},
      {Tool::lab, "run --stage optimized --devices 2 --shard-policy diagonal",
       {"--shard-policy", "'diagonal'", "contiguous, round_robin"}},
      {Tool::lab, "run --stage optimized --devices 2 --exchange all_gather,bcast",
       {"--exchange", "'bcast'", "all_gather, sums"}},
      {Tool::lab, "run --stage optimized --devices 2 --sequence-groups 0", {"--sequence-groups", "0", "1 .."}},
      {Tool::lab, "run --stage optimized --shard-policy round_robin", {"--shard-policy", "needs --devices N"}},
      {Tool::lab, "run --stage cascade_merge --prefix-len 16 --baselines 5", {"--baselines", "5", "accepted: 0, 1"}},
      {Tool::lab, "run --stage cascade_merge --prefix-len 16 --baselines -1", {"--baselines", "-1", "accepted: 0, 1"}},
      {Tool::lab, "run --stage v2_partition --baselines 0", {"--baselines", "stage cascade_merge only"}},
      {Tool::lab, "run --stage 6 --splits 2", {"--splits", "stage optimized only", "stage 6 has no splits"}},
      {Tool::lab, "trace --stage cascade_merge --splits 2", {"--splits", "stage optimized only", "cascade_merge"}},
      {Tool::lab, "run --stage optimized --sequence-groups 2", {"--sequence-groups", "needs --devices N"}},
      {Tool::lab, "run --stage optimized --layout foo", {"--layout", "'foo'", "accepted: vllm, nhd, hnd"}},
      {Tool::lab, "run --stage optimized --layout NHD", {"--layout", "'NHD'", "accepted: vllm, nhd, hnd"}},
      {Tool::lab, "run --stage qk --page-table x", {"--page-table", "'x'", "accepted: padded, csr"}},
      {Tool::lab, "run --stage lv --layout nhd",
       {"--layout nhd", "stage lv", "accepted for this stage: vllm", "stages 5 and 8"}},
      {Tool::lab, "run --stage v2_partition --page-table csr",
       {"--page-table csr", "stage v2_partition", "accepted for this stage: padded"}},
      {Tool::lab, "trace --stage qk --layout foo", {"--layout", "'foo'", "accepted: vllm, nhd, hnd"}},
      {Tool::lab, "trace --stage qk --page-table x", {"--page-table", "'x'", "accepted: padded, csr"}},
      {Tool::lab, "trace --stage qk --layout hnd",
       {"--layout hnd", "stage 2 (qk)", "layouts nhd and hnd: stages 5 (warp_reduce) and 8"}},
      {Tool::lab, "trace --stage v2_partition --page-table csr",
       {"--page-table csr", "stage 6 (v2_partition)", "csr page tables: stages 1-5 and 8"}},
      {Tool::viewer, "--layout foo", {"--layout", "'foo'", "accepted: vllm, nhd, hnd"}},
      {Tool::lab, "list --bogus 1", {"--bogus", "unknown option"}},
      // pa-bench
      {Tool::bench, "--iters 0", {"--iters", "'0'", "[1, 1000000]"}},
      {Tool::bench, "--iters abc", {"--iters", "'abc'", "[1, 1000000]"}},
      {Tool::bench, "--iters 1e9", {"--iters", "'1e9'", "[1, 1000000]"}},
      {Tool::bench, "--warmup -1", {"--warmup", "'-1'", "[0, 1000000]"}},
      {Tool::bench, "--warmup-ms nan", {"--warmup-ms", "'nan'", "[0, 60000]"}},
      {Tool::bench, "--pool-gb 0", {"--pool-gb", "'0'", "(0, 1024]"}},
      {Tool::bench, "--only v1", {"--only", "'v1'", "'optimized'"}},
      {Tool::bench, "--dtypes fp32", {"--dtypes", "'fp32'", "fp16 and bf16"}},
      {Tool::bench, "--dtypes fp16,fp16", {"--dtypes", "fp16 twice", "each once"}},
      {Tool::bench, "--dtypes ,", {"--dtypes", "empty item", "fp16 and bf16"}},
      {Tool::bench, "--kv-dtypes fp4", {"--kv-dtypes", "'fp4'", "fp8_e4m3, fp8_e5m2"}},
      {Tool::bench, "--kv-dtypes fp8,fp8_e4m3", {"--kv-dtypes", "fp8_e4m3 twice", "accepted once"}},
      {Tool::bench, "--shape 1,2,3", {"--shape", "'1,2,3'", "5 integers"}},
      {Tool::bench, "--shape 1,32,3,4096,128", {"--shape", "32 % 3", "kv_heads must divide heads"}},
      {Tool::bench, "--shape 1,32,8,4096,100", {"--shape", "head_size 100", "64, 80, 96"}},
      {Tool::bench, "--shape 0,32,8,4096,128", {"--shape", "'0'", "[1, 65536]"}},
      {Tool::bench, "--spin-us -1", {"--spin-us", "'-1'", "[0, 1000000]"}},
      {Tool::bench, "--splits 99999", {"--splits", "'99999'", "[0, 4096]"}},
      {Tool::bench, "--cascade-sweep bogus:1:1", {"--cascade-sweep", "'bogus'", "mma_4warps"}},
      {Tool::bench, "--cascade-sweep wgmma:5:0", {"--cascade-sweep", "'5'", "[-1, 2]"}},
      {Tool::bench, "--iters 10 --iters 20", {"--iters", "twice"}},
      {Tool::bench, "--quick --shape 1,32,8,4096,128", {"--quick", "--shape", "exclude"}},
      {Tool::bench, "--json", {"--json", "needs a value"}},
      {Tool::bench, "--bogus", {"'--bogus'", "unknown option", "--help"}},
      {Tool::bench, "--json {OUT}/no_such_folder/r.json", {"--json", "no_such_folder/r.json", "No such file"}},
      // pa-viewer (refused before a window opens)
      {Tool::viewer, "--lesson 10", {"--lesson", "'10'", "[0, 9]"}},
      {Tool::viewer, "--lesson x", {"--lesson", "'x'", "[0, 9]"}},
      {Tool::viewer, "--step -1", {"--step", "'-1'", "[0, 1073741824]"}},
      {Tool::viewer, "--head-size 7", {"--head-size", "head_size 7", "64, 80, 96"}},
      {Tool::viewer, "--block-size 7", {"--block-size", "block_size 7", "{8, 16, 32}"}},
      {Tool::viewer, "--head-size 12x", {"--head-size", "'12x'", "accepted: {64, 80, 96"}},
      {Tool::viewer, "--block-size 0", {"--block-size", "'0'", "accepted: {8, 16, 32}"}},
      {Tool::viewer, "--heads 8 --kv-heads 3", {"--kv-heads", "num_kv_heads 3", "dividing num_heads"}},
      {Tool::viewer, "--dtype fp8", {"--dtype", "'fp8'", "fp32, fp16, bf16"}},
      {Tool::viewer, "--context 0", {"--context", "'0'", "[1, 16777216]"}},
      {Tool::viewer, "--context 1,,2", {"--context", "''", "[1, 16777216]"}},
      {Tool::viewer, "--partition-size 7", {"--partition-size", "partition_size 7", "multiple of block_size"}},
      {Tool::viewer, "--prefix 7", {"--prefix", "shared_prefix_len 7", "multiple of block_size"}},
      {Tool::viewer, "--heads 4096 --kv-heads 4096 --context 16000000", {"--context", "host memory", "at most"}},
      {Tool::viewer, "--scale 0", {"--scale", "'0'", "[0.5, 4]"}},
      {Tool::viewer, "--size 100x100", {"--size", "'100'", "[200, 16384]"}},
      {Tool::viewer, "--tab nope", {"--tab", "'nope'", "requests values"}},
      {Tool::viewer, "--shards 3", {"--shards", "3 GPUs", "2, 4, 8"}},
      {Tool::viewer, "--shards 4,diagonal", {"--shards", "'diagonal'", "contiguous, round_robin"}},
      {Tool::viewer, "--shards x", {"--shards", "'x'", "[2, 8]"}},
      {Tool::viewer, "--granularity x", {"--granularity", "'x'", "instruction, step"}},
      {Tool::viewer, "--select warp=40", {"--select", "'40'", "[0, 31]"}},
      {Tool::viewer, "--block 0,0,bogus", {"--block", "'bogus'", "reduce"}},
      {Tool::viewer, "--lesson 1 --lesson 2", {"--lesson", "twice"}},
      {Tool::viewer, "--trace {OUT}/missing.patrace", {"--trace", "missing.patrace", "No such file"}},
      {Tool::viewer, "--trace {OUT}", {"--trace", "is a directory"}},
      {Tool::viewer, "--trace /dev/zero", {"--trace", "/dev/zero", "not a regular file"}},
      {Tool::viewer, "--bogus", {"'--bogus'", "unknown argument"}},
  };
  return t;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}


// pa-bench's parser on the same arguments (split at spaces; the table's
// pa-bench cases quote nothing): the message pa-bench would print.
bool bench_parser_refuses(const std::string& args, std::string& out) {
  std::vector<std::string> v;
  for (std::size_t p = 0; p < args.size();) {
    const std::size_t q = args.find(' ', p);
    v.push_back(args.substr(p, q == std::string::npos ? std::string::npos : q - p));
    p = q == std::string::npos ? args.size() : q + 1;
  }
  try {
    pa::bench::parse_bench_options(v);
  } catch (const pa::bench::UsageError& e) {
    out = std::string("pa-bench: ") + e.what();
    return true;
  }
  return false;
}

const char* tool_name(Tool t) { return t == Tool::lab ? "pa-lab" : t == Tool::bench ? "pa-bench" : "pa-viewer"; }

}  // namespace

TEST_CASE("every tool refuses bad flag values, naming the flag, the value and what is accepted", "[cli][flags]") {
  const fs::path out_dir = fs::temp_directory_path() / "pa_bad_flags";
  fs::create_directories(out_dir);
  std::string lab, bench, viewer;
#ifdef PA_LAB_EXE
  lab = PA_LAB_EXE;
#endif
#ifdef PA_BENCH_EXE
  bench = PA_BENCH_EXE;
#endif
#ifdef PA_VIEWER_EXE
  viewer = PA_VIEWER_EXE;
#endif
  int ran = 0, by_parser = 0, skipped = 0;
  for (const BadFlag& c : cases()) {
    const std::string args = replace_all(c.args, "{OUT}", out_dir.string());
    const std::string& exe = c.tool == Tool::lab ? lab : c.tool == Tool::bench ? bench : viewer;
    std::string out;
    INFO(tool_name(c.tool) << " " << args);
    if (!exe.empty()) {
      const int rc = pa::test::run_tool(exe, args, out);
      INFO(out);
      CHECK(rc == (c.tool == Tool::lab ? kLabUsage : kOtherUsage));
      ++ran;
    } else if (c.tool == Tool::bench && args.find("--json ") == std::string::npos) {
      // pa-bench not built: its parser (the --json folder check is pa-bench's main's).
      REQUIRE(bench_parser_refuses(args, out));
      ++by_parser;
    } else {
      ++skipped;
      continue;
    }
    INFO(out);
    for (const std::string& part : c.must_say) CHECK(out.find(part) != std::string::npos);
    CHECK(out.find(tool_name(c.tool)) != std::string::npos);  // the message says which tool speaks
  }
  fs::remove_all(out_dir);
  INFO("run as processes " << ran << ", through pa-bench's parser " << by_parser << ", skipped (tool not built) "
                           << skipped);
  CHECK(ran + by_parser >= 40);
  CHECK(ran + by_parser + skipped == static_cast<int>(cases().size()));
  // pa-lab is built in every configuration: its cases always run as processes.
  CHECK(!lab.empty());
}
