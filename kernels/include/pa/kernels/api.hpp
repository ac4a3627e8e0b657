// The kernels' host API: plain C++ (no CUDA headers), so pa-lab, the tests
// and the viewer link against it whether or not CUDA is built. Without CUDA
// (PA_HAVE_CUDA off) every call that needs a GPU throws NoGpuError("built
// without CUDA") and gpu_available() says so.
//
//   PagedProblem p = make_problem(spec);          // reference/paged_cache.hpp
//   DeviceProblem d(p);                            // validates, uploads (RAII)
//   StageOutput o = run_stage(Stage::qk, d);       // poison, launch, sync, copy back
//   StageTiming t = time_stage(Stage::qk, d, 100); // CUDA-event timings
//
// Errors: std::invalid_argument for a problem the kernels do not support
// (the message names the value and lists what is accepted), NoGpuError when
// no GPU / no CUDA, std::runtime_error for a failed CUDA call (file:line and
// the call).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pa/index/dtype.hpp"
#include "pa/index/layout.hpp"
#include "pa/kernels/stage_args.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/event.hpp"

namespace pa::kernels {

using Stage = trace::Stage;

// ---- stages -------------------------------------------------------------------
struct StageInfo {
  Stage stage;
  const char* name;    // the lesson / CLI name: q_to_smem qk softmax lv warp_reduce v2_partition ...
  const char* adds;    // the step it adds
  const char* writes;  // its observable output
};
// All stages in order (1..8). Every one has kernels; a build without CUDA
// runs none of them (pa-lab says so: cli/no_gpu.hpp).
std::span<const StageInfo> stages();
const StageInfo& stage_info(Stage s);
const char* stage_name(Stage s);
// Accepts the name, the number ("2") or "v1" (= warp_reduce). Empty if unknown.
std::optional<Stage> parse_stage(std::string_view name);
std::string stage_names_text();  // "q_to_smem, qk, softmax, ..."
// Which cache forms a stage's kernels read (pa/index/kv_layout.hpp): every
// stage vLLM's layout through padded tables; nhd and hnd stage 5 (the
// complete v1 kernel, its token-row instances) and stage 8; CSR tables the
// v1 stages 1-5 (their step functions find a sequence's pages either way)
// and stage 8. The runner (check_run_options), launch_stage, pa-lab, the
// host model and the viewer ask.
bool stage_reads(Stage s, KvLayout l);
bool stage_reads(Stage s, PageTableForm t);
// Empty when stage s reads layout l through tables t, else why not and what
// is accepted.
std::string stage_reads_refusal(Stage s, KvLayout l, PageTableForm t);

// ---- the GPU ------------------------------------------------------------------------
class NoGpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// True when CUDA is built and a device is usable; otherwise *reason says why
// ("built without CUDA", "no CUDA device: <cuda error>", ...).
bool gpu_available(std::string* reason = nullptr);

struct GpuInfo {
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  std::int64_t smem_optin_bytes = 0;  // max dynamic + static shared memory per block
  std::int64_t global_mem_bytes = 0;
  double dram_peak_gbps = 0;  // from the memory clock and bus width (opt_dram_peak_gbps); 0 if not reported
};
GpuInfo gpu_info();  // throws NoGpuError
// The current device's shared memory per block with opt-in (GpuInfo's
// smem_optin_bytes) from one attribute query, for launch paths that need only
// that: gpu_info() reads every device property.
std::int64_t smem_optin_bytes();

// ---- configurations -------------------------------------------------------------------
struct KernelKey {
  DType dtype;
  int head_size, block_size, num_threads;
  KvDType kv_dtype = KvDType::same;  // fp8 caches: with fp16 and bf16 queries
  friend bool operator==(const KernelKey&, const KernelKey&) = default;
};
// The (dtype, head, block, threads, cache dtype) instances compiled into this
// build (the same for stages 1-5). PA_QUICK_KERNELS builds only head 128 x
// block 16.
std::vector<KernelKey> built_configs();
// Those of stages 6-7 (v2_partition_instances.hpp: in quick builds two more
// corners, head 64 x block 8 and head 256 x block 32).
std::vector<KernelKey> v2_built_configs();
bool quick_kernels_build();
// "fp16 head 128 block 16 threads 128" ...
std::string describe(const KernelKey& k);
// What the design supports and what this build holds, for messages and `pa-lab list`.
std::string supported_text();

// ---- validation (before any launch; plain C++, also without a GPU) --------------------
// Throws std::invalid_argument: unsupported dtype/head/block/threads (listing
// what is supported, and saying when it is supported but not built here);
// num_heads % num_kv_heads; context 0; context beyond what the block table
// holds; block-table entries outside the pool; Q rows not aligned to the
// vector width; stages 2-5 with a context whose logits exceed
// smem_limit_bytes (0 = do not check) -> points to V2 (stage v2_partition).
void validate_problem(Stage stage, const PagedProblem& p, std::int64_t smem_limit_bytes);
// Shared memory (bytes) a v1-style stage needs for this context length.
std::int64_t v1_smem_bytes(Stage stage, DType dtype, int head_size, int num_threads, int max_context_len);
// The longest context a v1-style kernel can hold in smem_limit_bytes.
int v1_max_context(DType dtype, int head_size, int num_threads, std::int64_t smem_limit_bytes);
// Throws std::invalid_argument when a v1-style stage cannot hold a context of
// max_context_len tokens in smem_limit_bytes (0 = do not check): the message
// names the bytes needed, the limit, the longest context that fits and V2.
void check_v1_smem(Stage stage, DType dtype, int head_size, int num_threads, int max_context_len,
                   std::int64_t smem_limit_bytes);

// ---- device problem ---------------------------------------------------------------------
// cudaMalloc found no room: the message names the bytes asked for and the
// device's free and total memory (pa-lab: exit status 3, an unsupported problem).
class DeviceOutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A problem's launch shape as StageArgs: dtype, sizes, heads, the longest
// context, partition size, scale and the geometries; every pointer null (the
// caller fills in its device buffers).
StageArgs problem_stage_args(const PagedProblem& p);

// Owns one device allocation; frees it on destruction. Move-only. Throws
// DeviceOutOfMemory when the device cannot hold it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  void upload(const void* src, std::size_t bytes);
  void download(void* dst, std::size_t bytes) const;
  void fill_bytes(int byte_value);  // e.g. 0xFF: NaN in fp32, fp16 and bf16

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A device buffer's first n floats; its first n elements of dtype t decoded to float.
std::vector<float> download_floats(const DeviceBuffer& b, std::size_t n);
std::vector<float> download_decoded(const DeviceBuffer& b, std::size_t n, DType t);

// A PagedProblem's inputs on the device, uploaded once: Q, the K and V pool,
// the block tables, the context lengths and the ALiBi slopes if any. Every stage reads these; the
// stage 8 runs (pa-lab run, its recording, its tests) add only their output.
// The cache goes up in the problem's kv_layout (ProblemSpec;
// pa/core/kv_layout_cache.hpp moves the problem's vLLM-layout bytes; nhd /
// hnd: one K/V tensor in k_cache, v_cache empty) and the page table in its
// page_table form (CSR: block_tables holds the indices, beside kv_indptr and
// kv_last_page_len; context_lens is uploaded either way).
class DeviceInputs {
 public:
  explicit DeviceInputs(const PagedProblem& p);
  const PagedProblem& host() const { return *host_; }
  // The problem's launch shape (problem_stage_args) with the input pointers
  // set; every output pointer null (the caller wires its own).
  StageArgs args() const;

  DeviceBuffer q, k_cache, v_cache, block_tables, context_lens;
  DeviceBuffer kv_indptr, kv_last_page_len;  // CSR only
  DeviceBuffer alibi_slopes;  // empty without ALiBi

 private:
  const PagedProblem* host_;
  // maybe_unused: a build without CUDA compiles no_cuda.cpp, which never reads them.
  [[maybe_unused]] KvLayout layout_ = KvLayout::vllm;
  [[maybe_unused]] PageTableForm tables_ = PageTableForm::padded;
};

// A PagedProblem on the device for stages 1-5: its inputs (DeviceInputs) and
// output buffers for every stage 1-5. Construction validates
// (validate_problem for the most demanding stage the problem fits, against
// this GPU's shared memory) and throws before allocating anything on a bad
// problem.
class DeviceProblem : public DeviceInputs {
 public:
  explicit DeviceProblem(const PagedProblem& p);
  // Device views for a stage's launch (outputs of stages 1-5 wired in).
  StageArgs args() const;
  // Fill every output buffer with NaN (0xFF bytes).
  void poison_outputs();

  DeviceBuffer out, stage_out, stage_max, stage_sum;

 private:
  [[maybe_unused]] std::int64_t stage_out_elems_ = 0;  // (read with CUDA only, as above)
};

// ---- running -------------------------------------------------------------------------------
// One launch of a stage on device views. Validates the arguments' geometry and
// the configuration first. stream = a cudaStream_t or nullptr (default).
void launch_stage(Stage stage, const StageArgs& args, void* stream = nullptr);

// A stage's observable output, copied back (float; stage 5's dtype output decoded).
//   q_to_smem:   values [seq][head][head_size] (q_vecs in slot order)
//   qk:          values [seq][head][max_context_len] logits (tail of each row NaN: not written)
//   softmax:     values = probabilities, same layout; max, sum [seq][head]
//   lv:          values [seq][head][num_warps][head_size]
//   warp_reduce: values [seq][head][head_size] = the attention output
struct StageOutput {
  Stage stage{};
  StageOutGeometry geometry;
  std::vector<float> values;
  std::vector<float> max, sum;
};
// Poisons the outputs, launches, synchronizes, copies back.
StageOutput run_stage(Stage stage, DeviceProblem& d);
StageOutput run_stage(Stage stage, const PagedProblem& p);  // uploads too

struct StageTiming {
  std::vector<float> ms;  // one per timed launch (CUDA events)
  float median_ms = 0.f;
};
// warmup launches, then iters launches each timed with CUDA events.
StageTiming time_stage(Stage stage, DeviceProblem& d, int iters, int warmup = 3);

// The GPU's device-to-device copy bandwidth in GB/s (bytes read + written
// over the median of `iters` cudaMemcpy timings of `bytes` bytes, the copies
// alternating direction between two buffers, 2 GiB each by default: 40 times
// an H100's L2): the practical ceiling a memory-bound kernel is compared
// with. The one measurement of it: pa-lab run and pa-bench both call this.
double measure_copy_bandwidth_gbs(std::size_t bytes = std::size_t{2} << 30, int iters = 20);

// Bytes a stage moves from/to global memory at least (Q, the KV it reads,
// ProblemSpec::kv_bytes, and what it writes), for GB/s: the one traffic
// formula of pa-lab run, for every stage.
std::int64_t stage_bytes(Stage stage, const ProblemSpec& spec);

}  // namespace pa::kernels
