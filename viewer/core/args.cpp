#include "core/args.hpp"
#include "core/names.hpp"

#include "pa/core/config_dispatch.hpp"
#include "pa/core/parse_number.hpp"
#include "pa/index/events.hpp"
#include "pa/index/shard.hpp"
#include "pa/trace/trace_file.hpp"

#include <cmath>
#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <sstream>

namespace pa::viewer {
namespace {

// accepted, when given, names what the flag takes in the error (the head
// sizes a build has, say) instead of [lo, hi].
int to_int(const std::string& flag, const std::string& v, int lo, int hi, const std::string& accepted = {}) {
  const auto out = parse_number<int>(v);
  if (!out || *out < lo || *out > hi) {
    if (!accepted.empty()) throw UsageError(flag + ": '" + v + "' (accepted: " + accepted + ")");
    throw UsageError(flag + ": '" + v + "' is not an integer in [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  }
  return *out;
}

// An fp8 scale: a finite number > 0 (no flag: ProblemSpec's 0, the scale chosen from the data).
float to_scale(const std::string& flag, const std::string& v) {
  const auto out = parse_number<float>(v);
  if (!out || *out <= 0.0f)
    throw UsageError(flag + ": '" + v +
                     "' is not a scale (accepted: a finite number > 0; without the flag the scale is chosen from the "
                     "data)");
  return *out;
}

std::vector<std::string> split(const std::string& s, char c) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, c)) out.push_back(cur);
  return out;
}

}  // namespace

int parse_block_label(const std::string& v) {
  static const char* accepted =
      "(accepted: a partition or split N >= 0, reduce or -1, prefix_reduce or -2, merge or -3, prefix:C for the "
      "cascade prefix kernel's chunk C)";
  if (v == "reduce" || v == "-1") return kReduceBlock;
  if (v == "prefix_reduce" || v == "-2") return kPrefixReduceBlock;
  if (v == "merge" || v == "-3") return kMergeBlock;
  auto number = [&](const std::string& digits) -> std::optional<int> {
    const auto out = parse_number<int>(digits);
    if (!out || *out < 0 || *out >= (1 << 20)) return std::nullopt;
    return out;
  };
  if (v.rfind("prefix:", 0) == 0) {
    if (const auto c = number(v.substr(7))) return kPrefixBlockBase + *c;
    throw UsageError("--block: '" + v + "' is not prefix:C with a chunk C in [0, 1048575] " + accepted);
  }
  if (const auto n = number(v)) return *n;
  throw UsageError("--block: '" + v + "' is not a thread block " + accepted);
}

TimelineViewArg parse_timeline_view(const std::string& v) {
  static const char* accepted =
      "(accepted: grid, sm:S, block:B, block:ROLE:B with ROLE main, reduce, prefix, prefix_reduce, suffix or merge)";
  const auto p = split(v, ':');
  TimelineViewArg out;
  try {
    if (p.size() == 1 && p[0] == "grid") return out;
    if (p.size() == 2 && p[0] == "sm") {
      out.level = TimelineLevel::sm;
      out.sm = to_int("--timeline-view sm", p[1], 0, 65535);
      return out;
    }
    if ((p.size() == 2 || p.size() == 3) && p[0] == "block") {
      out.level = TimelineLevel::block;
      if (p.size() == 3) {
        const auto role = trace::kernel_role_from_string(p[1]);
        if (!role) throw UsageError("--timeline-view: '" + p[1] + "' is not a kernel role");
        out.kernel = *role;
      }
      out.block = static_cast<std::uint32_t>(to_int("--timeline-view block", p.back(), 0, (1 << 30)));
      return out;
    }
  } catch (const UsageError& e) {
    throw UsageError(std::string(e.what()) + " " + accepted);
  }
  throw UsageError("--timeline-view: '" + v + "' " + accepted);
}

std::string block_label_text(int label) {
  if (label >= 0) return std::to_string(label);
  if (label == kReduceBlock) return "reduce";
  if (label == kPrefixReduceBlock) return "prefix_reduce";
  if (label == kMergeBlock) return "merge";
  if (is_prefix_block(label)) return "prefix:" + std::to_string(label - kPrefixBlockBase);
  return std::to_string(label);
}

int model_partition_of_label(int label) {
  if (label >= 0) return label;
  if (is_prefix_block(label)) return label - kPrefixBlockBase;
  return 0;
}

std::string usage() {
  return std::string(
      "usage: pa-viewer [options]\n"
      "  --lesson N            open lesson N (0-9; default: an interactive run reopens the last run's lesson and\n"
      "                        step, else 1; screenshots and benchmarks: 1)\n"
      "  --step K              replay step K (0-based) of the lesson's trace\n"
      "  --trace FILE          open a recorded trace file instead of the host model\n"
      "  --timeline FILE       open a timeline (.patl, measured on a GPU) in the Timeline panel\n"
      "  --timeline-view V     what the Timeline panel shows first: grid | sm:S | block:B | block:ROLE:B\n"
      "  --select SEL          select warp=W | warp=W,lane=L | k=PB,D,T | v=PB,D,T\n"
      "                        (PB physical block, D head dim, T token in block)\n"
      "  --follow-selection    Left/Right (and < >) step only through the selection's steps\n"
      "  --granularity G       instruction (one warp instruction per step) | step (default: an interactive run\n"
      "                        keeps the last run's, else instruction)\n"
      "  --dtype T             fp32 | fp16 | bf16        (host model problem)\n"
      "  --head-size N         ") + head_sizes_text() + "\n"
      "  --block-size N        " + block_sizes_text() + "\n"
      "  --context L[,L...]    context length of each sequence\n"
      "  --heads N --kv-heads N --partition-size N --prefix N\n"
      "  --alibi               ALiBi: a slope per query head, a bias on every logit\n"
      "  --kv-dtype T          KV cache element type: " + kKvDTypeNamesText + ";\n"
      "                        fp8: one byte per element, with --dtype fp16 or bf16 (stage 7 refuses it,\n"
      "                        stage 8 needs block size 16 or 32)\n"
      "  --layout L            KV cache layout: " + kKvLayoutNamesText + " (nhd and hnd: stages 5 and 8, fp16/bf16)\n"
      "  --page-table T        page table: " + kPageTableNamesText + " (csr: stages 1-5 and 8)\n"
      "  --k-scale S           fp8 scale of K (element = code * S, S > 0; default: chosen from the data)\n"
      "  --v-scale S           fp8 scale of V (likewise)\n"
      "  --block SEQ,HEAD[,BLOCK] the thread block to trace and show (default 0,0,0), fields as in the Problem tab;\n"
      "                        BLOCK: partition/split N, reduce, prefix_reduce, merge, prefix:C (prefix chunk C)\n"
      "  --size WxH            window size (default 1600x1000, times the scale)\n"
      "  --scale F             UI scale for HiDPI, 0.5-4 (default: the monitor's content scale; 1 for screenshots)\n"
      "  --screenshot OUT.png  render one frame headless, write a PNG, exit\n"
      "  --dump-layout FILE    with --screenshot: write panel geometry and state (lesson/load errors, events, step; for tests)\n"
      "  --lessons-dir DIR --source-dir DIR   where lessons/*.md and kernels/stages are\n"
      "  --bench N             draw N frames, print load and frame times, exit\n"
      "  --bench-while-loading with --bench: draw while the trace loads and time those frames too\n"
      "  --mouse X,Y [--click] with --screenshot: pointer there (tooltips), optionally one click\n"
      "  --wheel N             with --mouse: turn the wheel N notches there (the timeline zooms)\n"
      "  --drag DX,DY          with --mouse: drag from there by DX,DY pixels (the timeline pans)\n"
      "  --keys K              with --screenshot: press keys first (R/L right/left, H/E home/end, space, 0-9, ?,\n"
      "                        F fit the timeline)\n"
      "  --tab T               open tab T: requests values partitions inspect kv shared lesson problem trace\n"
      "  --shards N[,P]        the Partitions tab's Across GPUs picture: N = 2, 4 or 8 GPUs, P = contiguous | round_robin\n"
      "  --levels G:T,...      the Partitions tab's Across levels picture: a level per item, groups of G requests sharing T tokens\n"
      "  --answer ID=VALUE     type VALUE into the lesson's exercise ID and check it (repeatable)\n"
      "  --help                this text\n"
      "keys: Space play/pause, Left/Right step, Home/End, 0-9 lesson, ? help, Esc close help / clear the selection,\n"
      "F fit the timeline\n";
}

Args parse_args(const std::vector<std::string>& av) {
  Args a;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < av.size(); ++i) {
    const std::string& f = av[i];
    if (f != "--answer" && !seen.insert(f).second)
      throw UsageError(f + " given twice (each option is accepted once; --answer may repeat)");
    auto value = [&]() -> std::string {
      if (i + 1 >= av.size()) throw UsageError(f + " needs a value");
      return av[++i];
    };
    if (f == "--help" || f == "-h") a.help = true;
    else if (f == "--lesson") a.lesson = to_int(f, value(), 0, kMaxLesson);
    else if (f == "--step") a.step = to_int(f, value(), 0, 1 << 30);
    else if (f == "--trace") a.trace_file = value();
    else if (f == "--timeline") a.timeline_file = value();
    else if (f == "--timeline-view") a.timeline_view = parse_timeline_view(value());
    else if (f == "--screenshot") a.screenshot = value();
    else if (f == "--dump-layout") a.dump_layout = value();
    else if (f == "--lessons-dir") a.lessons_dir = value();
    else if (f == "--source-dir") a.source_dir = value();
    else if (f == "--bench") a.bench_frames = to_int(f, value(), 1, 100000);
    else if (f == "--exercise-resize") a.exercise_resize = true;
    else if (f == "--bench-while-loading") a.bench_while_loading = true;
    else if (f == "--click") a.click = true;
    else if (f == "--follow-selection") a.follow_selection = true;
    else if (f == "--keys") {
      a.keys = value();
      for (char c : a.keys)
        if (std::string("RLHE ?0123456789F").find(c) == std::string::npos)
          throw UsageError(std::string("--keys: '") + c + "' (accepted: R L H E space ? 0-9 F)");
    }
    else if (f == "--block") {
      const auto p = split(value(), ',');
      if (p.size() < 2 || p.size() > 3)
        throw UsageError("--block: '" + av[i] + "' needs SEQ,HEAD or SEQ,HEAD,BLOCK (e.g. 0,0 or 0,0,reduce)");
      a.block_seq = to_int("--block SEQ", p[0], 0, 1 << 20);
      a.block_head = to_int("--block HEAD", p[1], 0, 1 << 20);
      a.block_label = p.size() == 3 ? parse_block_label(p[2]) : 0;
    }
    else if (f == "--wheel") a.wheel = to_int(f, value(), -100, 100);
    else if (f == "--drag") {
      const auto p = split(value(), ',');
      if (p.size() != 2) throw UsageError("--drag: needs DX,DY (pixels)");
      a.drag = std::make_pair(to_int("--drag dx", p[0], -16384, 16384), to_int("--drag dy", p[1], -16384, 16384));
    }
    else if (f == "--mouse") {
      const auto p = split(value(), ',');
      if (p.size() != 2) throw UsageError("--mouse: needs X,Y (window pixels)");
      a.mouse = std::make_pair(to_int("--mouse x", p[0], 0, 16384), to_int("--mouse y", p[1], 0, 16384));
    }
    else if (f == "--scale") {
      const std::string v = value();
      const auto x = parse_number<float>(v);
      if (!x || !(*x >= 0.5f && *x <= 4.0f)) throw UsageError("--scale: '" + v + "' is not a number in [0.5, 4]");
      a.scale = *x;
    }
    else if (f == "--tab") {
      a.tab = value();
      static const char* ok[] = {"requests", "values", "partitions", "inspect", "kv", "shared", "lesson", "problem", "trace"};
      if (std::find(std::begin(ok), std::end(ok), a.tab) == std::end(ok))
        throw UsageError("--tab: '" + a.tab + "' (accepted: requests values partitions inspect kv shared lesson problem trace)");
    }
    else if (f == "--shards") {
      const std::string v = value();
      const auto parts = split(v, ',');
      if (parts.empty() || parts.size() > 2) throw UsageError("--shards: '" + v + "' is not N[,POLICY] (e.g. 8,round_robin)");
      const int n = to_int("--shards", parts[0], 2, 8);
      if (n != 2 && n != 4 && n != 8) throw UsageError("--shards: " + parts[0] + " GPUs (accepted: 2, 4, 8)");
      a.shard_gpus = n;
      if (parts.size() == 2) {
        const auto p = shard_policy_from_name(parts[1]);
        if (!p) throw UsageError("--shards: policy '" + parts[1] + "' (accepted: " + kShardPolicyNamesText + ")");
        a.shard_policy = static_cast<int>(*p);
      }
    }
    else if (f == "--levels") {
      a.levels = value();
      if (a.levels.empty() || a.levels.find_first_not_of("0123456789:,") != std::string::npos)
        throw UsageError("--levels: '" + a.levels + "' is not G:T,G:T,... (a level per item: groups of G requests "
                         "sharing T tokens)");
    }
    else if (f == "--answer") {
      const std::string v = value();
      const auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size() || v.size() - eq - 1 >= 32)
        throw UsageError("--answer: '" + v + "' is not ID=VALUE (an exercise id of the lesson, a number)");
      a.answers.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    }
    else if (f == "--size") {
      const std::string v = value();
      const auto xpos = v.find('x');
      if (xpos == std::string::npos) throw UsageError("--size: '" + v + "' is not WxH (e.g. 1280x800)");
      a.width = to_int("--size width", v.substr(0, xpos), 200, 16384);
      a.height = to_int("--size height", v.substr(xpos + 1), 150, 16384);
      a.size_given = true;
    } else if (f == "--granularity") {
      const std::string v = value();
      const auto g = granularity_from_name(v);
      if (!g) throw UsageError("--granularity: '" + v + "' (accepted: instruction, step)");
      a.coarse = *g == trace::Granularity::step;
      a.granularity_given = true;
    } else if (f == "--select") {
      const std::string v = value();
      if (v.rfind("k=", 0) == 0 || v.rfind("v=", 0) == 0) {
        const auto parts = split(v.substr(2), ',');
        if (parts.size() != 3) throw UsageError("--select: '" + v + "' needs k=PB,D,T or v=PB,D,T");
        a.sel_kv = v[0];
        a.sel_pb = to_int("--select block", parts[0], 0, 1 << 30);
        a.sel_d = to_int("--select dim", parts[1], 0, 4096);
        a.sel_t = to_int("--select token", parts[2], 0, 4096);
      } else {
        for (const auto& kv : split(v, ',')) {
          const auto eq = kv.find('=');
          const std::string key = kv.substr(0, eq);
          if (eq == std::string::npos) throw UsageError("--select: '" + kv + "' is not key=value");
          if (key == "warp") a.sel_warp = to_int("--select warp", kv.substr(eq + 1), 0, 31);
          else if (key == "lane") a.sel_lane = to_int("--select lane", kv.substr(eq + 1), 0, 31);
          else throw UsageError("--select: unknown key '" + key + "' (accepted: warp, lane, k, v)");
        }
        if (a.sel_lane && !a.sel_warp) throw UsageError("--select: lane=L needs warp=W too");
      }
    } else if (f == "--dtype") {
      const std::string v = value();
      a.dtype = dtype_from_name(v);
      if (!a.dtype) throw UsageError("--dtype: '" + v + "' (accepted: " + kDTypeNamesText + ")");
    } else if (f == "--head-size") a.head_size = to_int(f, value(), 1, 4096, head_sizes_text());
    else if (f == "--block-size") a.block_size = to_int(f, value(), 1, 4096, block_sizes_text());
    else if (f == "--heads") a.num_heads = to_int(f, value(), 1, 4096);
    else if (f == "--kv-heads") a.num_kv_heads = to_int(f, value(), 1, 4096);
    else if (f == "--partition-size") a.partition_size = to_int(f, value(), 0, 1 << 20);
    else if (f == "--prefix") a.prefix = to_int(f, value(), 0, 1 << 24);
    else if (f == "--alibi") a.alibi = true;
    else if (f == "--kv-dtype") {
      const std::string v = value();
      a.kv_dtype = kv_dtype_from_name(v);
      if (!a.kv_dtype) throw UsageError("--kv-dtype: '" + v + "' is not a KV cache dtype (accepted: " + kKvDTypeNamesText + ")");
    } else if (f == "--layout") {
      const std::string v = value();
      a.kv_layout = kv_layout_from_name(v);
      if (!a.kv_layout) throw UsageError("--layout: '" + v + "' is not a KV cache layout (accepted: " + kKvLayoutNamesText + ")");
    } else if (f == "--page-table") {
      const std::string v = value();
      a.page_table = page_table_from_name(v);
      if (!a.page_table) throw UsageError("--page-table: '" + v + "' is not a page-table form (accepted: " + kPageTableNamesText + ")");
    } else if (f == "--k-scale") a.k_scale = to_scale(f, value());
    else if (f == "--v-scale") a.v_scale = to_scale(f, value());
    else if (f == "--context") {
      a.context_lens.clear();
      for (const auto& p : split(value(), ',')) a.context_lens.push_back(to_int("--context", p, 1, 1 << 24));
      if (a.context_lens.empty()) throw UsageError("--context: needs at least one length");
    } else {
      throw UsageError("unknown argument '" + f + "'");
    }
  }
  if (!a.keys.empty() && a.screenshot.empty()) throw UsageError("--keys needs --screenshot");
  if ((a.mouse || a.click) && a.screenshot.empty()) throw UsageError("--mouse/--click need --screenshot");
  if (a.click && !a.mouse) throw UsageError("--click needs --mouse X,Y");
  if ((a.wheel != 0 || a.drag) && !a.mouse) throw UsageError("--wheel/--drag need --mouse X,Y");
  if (a.drag && a.click) throw UsageError("--drag and --click exclude each other (a drag is a press, a move, a release)");
  if (a.exercise_resize && a.screenshot.empty()) throw UsageError("--exercise-resize needs --screenshot");
  if (!a.dump_layout.empty() && a.screenshot.empty()) throw UsageError("--dump-layout needs --screenshot");
  if (a.timeline_view && a.timeline_file.empty()) throw UsageError("--timeline-view needs --timeline FILE");
  if (a.bench_while_loading && a.bench_frames == 0) throw UsageError("--bench-while-loading needs --bench N");
  if (a.bench_frames > 0 && !a.screenshot.empty()) throw UsageError("--bench and --screenshot exclude each other");
  if ((a.k_scale || a.v_scale) && !(a.kv_dtype && is_fp8(*a.kv_dtype)))
    throw UsageError(std::string(a.k_scale ? "--k-scale" : "--v-scale") +
                     " needs an fp8 cache (--kv-dtype fp8, fp8_e4m3 or fp8_e5m2; got " +
                     (a.kv_dtype ? kv_dtype_name(*a.kv_dtype) : "no --kv-dtype, i.e. auto") + ")");
  return a;
}

void check_args_problem(const Args& a, const ProblemSpec& spec) {
  // ProblemSpec's fields and the pa-viewer flags that set them.
  static const std::map<std::string, std::string> flag_of = {
      {"dtype", "--dtype"},
      {"head_size", "--head-size"},
      {"block_size", "--block-size"},
      {"num_heads", "--heads"},
      {"num_kv_heads", "--kv-heads"},
      {"context_lens", "--context"},
      {"partition_size", "--partition-size"},
      {"shared_prefix_len", "--prefix"},
      {"kv_dtype", "--kv-dtype"},
      {"kv_layout", "--layout"},
      {"page_table", "--page-table"},
      {"k_scale", "--k-scale"},
      {"v_scale", "--v-scale"},
      {"host_memory", "--context, --kv-heads, --head-size"},
  };
  if (const auto error = problem_flag_error(spec, flag_of)) throw UsageError(*error);
  if (!a.trace_file.empty()) {
    try {
      trace::check_trace_file(a.trace_file);
    } catch (const std::exception& e) {
      throw UsageError(std::string("--trace: ") + e.what());
    }
  }
}

}  // namespace pa::viewer
