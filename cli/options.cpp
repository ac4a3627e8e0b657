// Flag parsing for pa-lab: see options.hpp.
#include "options.hpp"

#include "pa/core/atomic_file.hpp"
#include "pa/core/config_dispatch.hpp"
#include "pa/core/parse_number.hpp"

#include <algorithm>
#include <cmath>

namespace pa::cli {

Flags::Flags(Args args, std::vector<std::string> switches) : switches_(std::move(switches)) {
  // The problem flags without a value (take_problem_flags), in every command.
  switches_.push_back("alibi");
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h") {
      values_["help"] = "1";
      continue;
    }
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      throw UsageError("unexpected argument '" + a + "': options are --name value (see --help)");
    }
    std::string name = a.substr(2), value;
    const auto eq = name.find('=');
    const bool is_switch = std::find(switches_.begin(), switches_.end(), name) != switches_.end();
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (is_switch) {
      value = "1";
    } else {
      if (i + 1 >= args.size()) throw UsageError("option --" + name + " needs a value");
      value = args[++i];
    }
    if (values_.count(name)) throw UsageError("option --" + name + " given twice");
    values_[name] = value;
  }
}

std::optional<std::string> Flags::take(const std::string& name) {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  taken_[name] = true;
  return it->second;
}

std::string Flags::take_str(const std::string& name, const std::string& def) {
  auto v = take(name);
  return v ? *v : def;
}

namespace {
long long parse_ll(const std::string& name, const std::string& v, const std::string& accepted) {
  const auto x = parse_number<long long>(v);
  if (!x) throw UsageError("option --" + name + ": '" + v + "' is not an integer (accepted: " + accepted + ")");
  return *x;
}
}  // namespace

int Flags::take_int(const std::string& name, int def, int min_value, const std::string& accepted) {
  auto v = take(name);
  if (!v) return def;
  const std::string range = accepted.empty() ? std::to_string(min_value) + " .. 2147483647" : accepted;
  const long long x = parse_ll(name, *v, range);
  if (x < min_value || x > 2147483647LL)
    throw UsageError("option --" + name + ": " + *v + " is out of range (accepted: " + range + ")");
  return static_cast<int>(x);
}

std::uint64_t Flags::take_u64(const std::string& name, std::uint64_t def) {
  auto v = take(name);
  if (!v) return def;
  const long long x = parse_ll(name, *v, "0 .. 9223372036854775807");
  if (x < 0) throw UsageError("option --" + name + ": " + *v + " is out of range (accepted: 0 .. 9223372036854775807)");
  return static_cast<std::uint64_t>(x);
}

std::vector<int> Flags::take_int_list(const std::string& name) {
  auto v = take(name);
  std::vector<int> out;
  if (!v) return out;
  std::size_t pos = 0;
  while (pos <= v->size()) {
    const auto comma = v->find(',', pos);
    const std::string item = v->substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (item.empty()) throw UsageError("option --" + name + ": empty item in '" + *v + "' (expected e.g. 1,17,100)");
    const long long x = parse_ll(name, item, "a comma list of integers, e.g. 1,17,100");
    if (x > 2147483647LL || x < -2147483647LL) {
      throw UsageError("option --" + name + ": " + item + " is out of range (accepted: integers up to 2147483647)");
    }
    out.push_back(static_cast<int>(x));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

bool Flags::take_switch(const std::string& name) { return take(name).has_value(); }

void Flags::finish(const std::string& command) const {
  for (const auto& [name, value] : values_) {
    if (!taken_.count(name)) {
      throw UsageError("unknown option --" + name + " for '" + command + "' (see pa-lab " + command + " --help)");
    }
  }
}

DType parse_dtype(const std::string& s) {
  if (const auto d = dtype_from_name(s)) return *d;
  throw UsageError("option --dtype: unknown dtype '" + s + "' (accepted: " + kDTypeNamesText + ")");
}

// An fp8 scale option: > 0 when given, else 0 (ProblemSpec: chosen from the data).
static float take_scale(Flags& f, const std::string& name) {
  const auto v = f.take(name);
  if (!v) return 0.0f;
  const auto x = parse_number<float>(*v);
  if (!x || *x <= 0.0f) {
    throw UsageError("option --" + name + ": '" + *v +
                     "' is not accepted (accepted: a finite number > 0; without the option the scale is chosen "
                     "from the data)");
  }
  return *x;
}

ProblemSpec take_problem_flags(Flags& f) {
  ProblemSpec s;
  s.dtype = parse_dtype(f.take_str("dtype", "fp16"));
  s.head_size = f.take_int("head-size", 128, 1, head_sizes_text());
  s.block_size = f.take_int("block-size", 16, 1, block_sizes_text());
  s.num_threads = f.take_int("threads", 128, 1, thread_counts_text());
  s.num_heads = f.take_int("heads", 8, 1);
  s.num_kv_heads = f.take_int("kv-heads", s.num_heads, 1);
  const int seqs = f.take_int("seqs", 4, 1);
  std::vector<int> lens = f.take_int_list("context-lens");
  const bool one = f.has("context-len");
  const int len = f.take_int("context-len", 1000, 1);
  if (!lens.empty() && one) throw UsageError("give either --context-lens or --context-len, not both");
  if (lens.empty()) {
    lens.assign(seqs, len);
  } else if (f.has("seqs") && static_cast<int>(lens.size()) != seqs) {
    throw UsageError("--seqs " + std::to_string(seqs) + " but --context-lens lists " + std::to_string(lens.size()) +
                     " lengths");
  }
  s.context_lens = lens;
  s.partition_size = f.take_int("partition-size", kDefaultPartitionSize, 0);
  s.extra_q_stride = f.take_int("extra-q-stride", 0, 0);
  s.seed = f.take_u64("seed", 1);
  if (const auto spread = f.take("spread")) {
    const auto x = parse_number<float>(*spread);
    if (!x) throw UsageError("option --spread: '" + *spread + "' is not a number (accepted: a finite number > 0)");
    s.logit_spread = *x;
  }
  s.alibi = f.take_switch("alibi");
  const std::string kv = f.take_str("kv-dtype", "auto");
  const auto k = kv_dtype_from_name(kv);
  if (!k) throw UsageError("option --kv-dtype: unknown KV cache dtype '" + kv + "' (accepted: " + kKvDTypeNamesText + ")");
  s.kv_dtype = *k;
  const bool scale_given = f.has("k-scale") || f.has("v-scale");
  s.k_scale = take_scale(f, "k-scale");
  s.v_scale = take_scale(f, "v-scale");
  if (scale_given && !is_fp8(s.kv_dtype))
    throw UsageError("options --k-scale / --v-scale need an fp8 cache (--kv-dtype fp8_e4m3 or fp8_e5m2; got " + kv +
                     ")");
  return s;
}

void validate_problem_flags(const ProblemSpec& spec) {
  // ProblemSpec's fields and the pa-lab flags that set them.
  static const std::map<std::string, std::string> flag_of = {
      {"dtype", "--dtype"},
      {"head_size", "--head-size"},
      {"block_size", "--block-size"},
      {"num_threads", "--threads"},
      {"num_heads", "--heads"},
      {"num_kv_heads", "--kv-heads"},
      {"context_lens", "--context-lens / --context-len"},
      {"partition_size", "--partition-size"},
      {"shared_prefix_len", "--prefix-len"},
      {"extra_q_stride", "--extra-q-stride"},
      {"logit_spread", "--spread"},
      {"kv_dtype", "--kv-dtype"},
      {"kv_layout", "--layout"},
      {"page_table", "--page-table"},
      {"k_scale", "--k-scale"},
      {"v_scale", "--v-scale"},
      {"host_memory", "--seqs, --context-lens / --context-len, --kv-heads, --head-size"},
  };
  if (const auto error = problem_flag_error(spec, flag_of)) throw UsageError("option " + *error);
}

const char* problem_flags_help() {
  // Built once; the head and block sizes come from the configuration registry.
  static const std::string text =
      std::string("problem:\n"
                  "  --dtype fp32|fp16|bf16     storage type of Q, K, V and the output (default fp16)\n"
                  "  --head-size N              ") +
      head_sizes_text() + " (default 128)\n"
         "  --block-size N             tokens per KV block: " + block_sizes_text() + " (default 16)\n"
         "  --threads N                threads per block: " + thread_counts_text() + " (default 128)\n"
         "  --seqs N                   sequences (default 4)\n"
         "  --heads N                  query heads (default 8)\n"
         "  --kv-heads N               KV heads, divides --heads (default = heads; 1 = MQA)\n"
         "  --context-lens A,B,...     one context length per sequence\n"
         "  --context-len L            the same length for every sequence (default 1000)\n"
         "  --partition-size N         V2 partition size, multiple of the block size (default 512)\n"
         "  --extra-q-stride N         padding elements after each Q row (default 0)\n"
         "  --seed S                   random inputs seed (default 1)\n"
         "  --spread F                 logit spread: larger = softmax further from uniform (default 4)\n"
         "  --alibi                    ALiBi: the paper's slope per query head, bias on every logit\n"
         "  --kv-dtype auto|fp8_e4m3|fp8_e5m2\n"
         "                             KV cache element type: auto = --dtype's; fp8 = one byte per\n"
         "                             element (fp8 = fp8_e4m3; with fp16 or bf16)\n"
         "  --k-scale S, --v-scale S   fp8 scales (element = code * scale; default: from the data)\n";
  return text.c_str();
}

void refuse_splits_unless_optimized(const Flags& f, bool optimized, const std::string& stage_name) {
  if (f.has("splits") && !optimized)
    throw UsageError("--splits sets stage 8's split count: stage optimized only (stage " + stage_name +
                     " has no splits)");
}

void take_cascade_flags(Flags& f, ProblemSpec& spec) {
  const bool seqs_given = f.has("seqs") || f.has("context-lens");
  spec.shared_prefix_len = f.take_int("prefix-len", 0, 0);
  const std::vector<int> suffixes = f.take_int_list("suffix-lens");
  if (suffixes.empty()) return;
  std::vector<int> lens;
  if (suffixes.size() == 1) {
    lens.assign(spec.context_lens.size(), spec.shared_prefix_len + suffixes[0]);
  } else {
    if (seqs_given && suffixes.size() != spec.context_lens.size())
      throw UsageError("--suffix-lens lists " + std::to_string(suffixes.size()) + " lengths but there are " +
                       std::to_string(spec.context_lens.size()) + " sequences (--seqs)");
    for (int x : suffixes) lens.push_back(spec.shared_prefix_len + x);
  }
  spec.context_lens = lens;
}

const char* cascade_flags_help() {
  return "  --prefix-len P             tokens every sequence shares (same physical blocks;\n"
         "                             a multiple of the block size; default 0, where run computes\n"
         "                             plain V2; timeline needs P > 0)\n"
         "  --suffix-lens A,B,...      unique tokens after the prefix, one per sequence, or one\n"
         "                             value for all --seqs sequences (context = P + suffix);\n"
         "                             without it the contexts come from --context-len(s)\n";
}

void check_writable(const std::string& path, const char* option) {
  try {
    core::check_can_write(path);
  } catch (const core::FileWriteError& e) {
    throw UsageError(std::string("option ") + option + ": " + e.what());
  }
}

}  // namespace pa::cli
