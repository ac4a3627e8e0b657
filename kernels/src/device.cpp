// The CUDA side of api.hpp: device discovery, RAII buffers, the device
// problem, runtime dispatch to the template instances, runs and timings.
// Host C++ compiled by g++ against the CUDA runtime; the kernels themselves
// are in the generated instance .cu files.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "pa/core/alibi.hpp"
#include "pa/kernels/api.hpp"
#include "pa/core/kv_layout_cache.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/event_timer.hpp"
#include "pa/kernels/instances.hpp"
#include "pa/index/optimized_split.hpp"
#include "pa/core/dtype_convert.hpp"

namespace pa::kernels {

namespace detail {
// Defined in the generated instance files (one per stage x dtype x head size):
// false when the (head, block) pair is not that file's.
using LaunchFn = bool (*)(int, int, const StageArgs&, cudaStream_t);
#define PA_INSTANCE(STAGE, DT, KV, LAYOUT, H) \
  bool launch_##STAGE##_##DT##_##KV##_##LAYOUT##_h##H(int, int, const StageArgs&, cudaStream_t);
#include "instances.inc"
#undef PA_INSTANCE

struct Instance {
  Stage stage;
  DType dtype;
  KvDType kv_dtype;
  bool token_rows;  // nhd / hnd (kv_layout_token_rows), else vLLM's layout
  LaunchFn fn;
};
constexpr bool kRowsvllm = false, kRowsrows = true;  // the instance list's layout names
#define PA_INSTANCE(STAGE, DT, KV, LAYOUT, H) \
  {Stage::STAGE, DType::DT, KvDType::KV, kRows##LAYOUT, &launch_##STAGE##_##DT##_##KV##_##LAYOUT##_h##H},
constexpr Instance kInstances[] = {
#include "instances.inc"
};
#undef PA_INSTANCE
}  // namespace detail

bool gpu_available(std::string* reason) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (reason) *reason = std::string("no CUDA device: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky-free error state
    return false;
  }
  if (n == 0) {
    if (reason) *reason = "no CUDA device found";
    return false;
  }
  if (reason) reason->clear();
  return true;
}

GpuInfo gpu_info() {
  std::string why;
  if (!gpu_available(&why)) throw NoGpuError(why);
  int dev = 0;
  PA_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  PA_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  GpuInfo g;
  g.name = prop.name;
  g.cc_major = prop.major;
  g.cc_minor = prop.minor;
  g.sm_count = prop.multiProcessorCount;
  g.smem_optin_bytes = static_cast<std::int64_t>(prop.sharedMemPerBlockOptin);
  g.global_mem_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
  int khz = 0;
  PA_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev));
  g.dram_peak_gbps = opt_dram_peak_gbps(khz, prop.memoryBusWidth);
  return g;
}

std::int64_t smem_optin_bytes() {
  int dev = 0, optin = 0;
  PA_CUDA_CHECK(cudaGetDevice(&dev));
  PA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  return optin;
}

// ---- DeviceBuffer ----------------------------------------------------------------
DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  const cudaError_t e = cudaMalloc(&ptr_, bytes);
  if (e == cudaErrorMemoryAllocation) {
    ptr_ = nullptr;
    (void)cudaGetLastError();  // not sticky: clear it so the next CUDA call is not blamed
    std::size_t free_b = 0, total_b = 0;
    const bool info = cudaMemGetInfo(&free_b, &total_b) == cudaSuccess;
    auto gib = [](std::size_t b) {
      char t[32];
      std::snprintf(t, sizeof t, "%.2f GiB", static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0));
      return std::string(t);
    };
    throw DeviceOutOfMemory(
        "device out of memory: a buffer of " + std::to_string(bytes) + " bytes (" + gib(bytes) + ") does not fit" +
        (info ? " (" + gib(free_b) + " free of " + gib(total_b) + ")" : std::string()) +
        "; accepted: problems whose device buffers fit in free device memory (fewer sequences, shorter "
        "contexts or fewer heads)");
  }
  if (e != cudaSuccess) detail::cuda_fail(e, "cudaMalloc(&ptr_, bytes)", __FILE__, __LINE__);
}
DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);  // never throw from a destructor
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}
void DeviceBuffer::upload(const void* src, std::size_t bytes) {
  if (bytes > bytes_) {
    throw std::invalid_argument("upload of " + std::to_string(bytes) + " bytes into a " + std::to_string(bytes_) +
                                "-byte device buffer");
  }
  if (bytes) PA_CUDA_CHECK(cudaMemcpy(ptr_, src, bytes, cudaMemcpyHostToDevice));
}
void DeviceBuffer::download(void* dst, std::size_t bytes) const {
  if (bytes > bytes_) {
    throw std::invalid_argument("download of " + std::to_string(bytes) + " bytes from a " +
                                std::to_string(bytes_) + "-byte device buffer");
  }
  if (bytes) PA_CUDA_CHECK(cudaMemcpy(dst, ptr_, bytes, cudaMemcpyDeviceToHost));
}
void DeviceBuffer::fill_bytes(int byte_value) {
  if (bytes_) PA_CUDA_CHECK(cudaMemset(ptr_, byte_value, bytes_));
}

// ---- DeviceProblem ------------------------------------------------------------------
namespace {
std::int64_t stage_out_elems(const PagedProblem& p) {
  const std::int64_t rows = static_cast<std::int64_t>(p.num_seqs()) * p.spec.num_heads;
  const int max_ctx = *std::max_element(p.context_lens.begin(), p.context_lens.end());
  const int warps = p.spec.num_threads / kWarpSize;
  return rows * std::max<std::int64_t>({p.spec.head_size, max_ctx,
                                        static_cast<std::int64_t>(warps) * p.spec.head_size});
}
}  // namespace

namespace {
// Checks p for stages 1-5 before anything is allocated for it: the most
// demanding stage (logits in shared memory) decides; stage 1 alone would fit
// any context, but one device problem serves every stage.
const PagedProblem& validated_for_stages_1_5(const PagedProblem& p) {
  validate_problem(Stage::warp_reduce, p, gpu_info().smem_optin_bytes);
  return p;
}
}  // namespace

namespace {
DeviceBuffer upload_ints(const std::vector<int>& v) {
  DeviceBuffer b(std::max<std::size_t>(v.size(), 1) * sizeof(int));
  if (!v.empty()) b.upload(v.data(), v.size() * sizeof(int));
  return b;
}
}  // namespace

DeviceInputs::DeviceInputs(const PagedProblem& p)
    : host_(&p), layout_(p.spec.kv_layout), tables_(p.spec.page_table) {
  const KvLayout layout = layout_;
  const PageTableForm tables = tables_;
  // Every stage reads a slope per query head: a short list would be read past its end.
  if (p.has_alibi()) check_alibi_slopes(p.alibi_slopes, p.spec.num_heads, "ALiBi");
  q = DeviceBuffer(p.q_bytes.size());
  q.upload(p.q_bytes.data(), p.q_bytes.size());
  if (layout == KvLayout::vllm) {
    k_cache = DeviceBuffer(p.k_bytes.size());
    k_cache.upload(p.k_bytes.data(), p.k_bytes.size());
    v_cache = DeviceBuffer(p.v_bytes.size());
    v_cache.upload(p.v_bytes.data(), p.v_bytes.size());
  } else {
    const KvLayoutBytes kv = kv_bytes_in_layout(p, layout);
    k_cache = DeviceBuffer(kv.k.size());
    k_cache.upload(kv.k.data(), kv.k.size());
  }
  if (tables == PageTableForm::csr) {
    const CsrTables t = csr_from_block_tables(p);
    block_tables = upload_ints(t.indices);
    kv_indptr = upload_ints(t.indptr);
    kv_last_page_len = upload_ints(t.last_page_len);
  } else {
    block_tables = upload_ints(p.block_tables);
  }
  context_lens = DeviceBuffer(p.context_lens.size() * sizeof(int));
  context_lens.upload(p.context_lens.data(), p.context_lens.size() * sizeof(int));
  if (p.has_alibi()) {
    alibi_slopes = DeviceBuffer(p.alibi_slopes.size() * sizeof(float));
    alibi_slopes.upload(p.alibi_slopes.data(), p.alibi_slopes.size() * sizeof(float));
  }
}

StageArgs DeviceInputs::args() const {
  StageArgs a = problem_stage_args(*host_);
  a.q = q.get();
  a.k_cache = k_cache.get();
  a.v_cache = v_cache.get();
  a.block_tables = static_cast<const int*>(block_tables.get());
  a.context_lens = static_cast<const int*>(context_lens.get());
  a.alibi_slopes = static_cast<const float*>(alibi_slopes.get());  // null without ALiBi
  a.kv_layout = layout_;
  if (kv_layout_token_rows(layout_)) a.v_cache = k_cache.get();  // the one K/V tensor
  if (tables_ == PageTableForm::csr) {
    a.kv_indptr = static_cast<const int*>(kv_indptr.get());
    a.kv_last_page_len = static_cast<const int*>(kv_last_page_len.get());
  }
  return a;
}

DeviceProblem::DeviceProblem(const PagedProblem& p) : DeviceInputs(validated_for_stages_1_5(p)) {
  const std::size_t eb = dtype_bytes(p.spec.dtype);
  const std::size_t rows = static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads;
  out = DeviceBuffer(rows * p.spec.head_size * eb);
  stage_out_elems_ = stage_out_elems(p);
  stage_out = DeviceBuffer(static_cast<std::size_t>(stage_out_elems_) * sizeof(float));
  stage_max = DeviceBuffer(rows * sizeof(float));
  stage_sum = DeviceBuffer(rows * sizeof(float));
}

StageArgs DeviceProblem::args() const {
  StageArgs a = DeviceInputs::args();
  a.partition_size = 0;  // stages 1-5: one partition
  a.out = out.get();
  a.stage_out = static_cast<float*>(stage_out.get());
  a.stage_max = static_cast<float*>(stage_max.get());
  a.stage_sum = static_cast<float*>(stage_sum.get());
  a.sg = StageOutGeometry{a.num_heads, a.head_size, a.max_context_len, a.num_threads / kWarpSize};
  return a;
}

void DeviceProblem::poison_outputs() {
  out.fill_bytes(0xFF);
  stage_out.fill_bytes(0xFF);
  stage_max.fill_bytes(0xFF);
  stage_sum.fill_bytes(0xFF);
}

// ---- launching ----------------------------------------------------------------------
namespace {
void check_args(Stage stage, const StageArgs& a) {
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  const int n = static_cast<int>(stage);
  if (n < 1 || n > 5) fail(std::string("launch_stage: stage ") + stage_name(stage) + " is not one of stages 1-5");
  if (a.num_seqs < 1 || a.num_heads < 1 || a.num_kv_heads < 1 || a.num_heads % a.num_kv_heads != 0) {
    fail("launch_stage: need num_seqs >= 1 and num_heads (" + std::to_string(a.num_heads) +
         ") a positive multiple of num_kv_heads (" + std::to_string(a.num_kv_heads) + ")");
  }
  if (a.num_heads > 65535 * 32 || a.num_seqs > 65535) fail("launch_stage: grid too large");
  const bool csr = a.kv_indptr != nullptr;
  if (!a.q || !a.k_cache || !a.v_cache || !a.block_tables || (csr ? !a.kv_last_page_len : !a.context_lens))
    fail(std::string("launch_stage: null input pointer (q, k_cache, v_cache, block_tables and ") +
         (csr ? "kv_last_page_len with kv_indptr set)" : "context_lens)"));
  if (const std::string why = stage_reads_refusal(stage, a.kv_layout, csr ? PageTableForm::csr : PageTableForm::padded);
      !why.empty())
    fail("launch_stage: " + why);
  if (n <= 4 && !a.stage_out) fail("launch_stage: stage_out is null");
  if (n == 3 && (!a.stage_max || !a.stage_sum)) fail("launch_stage: stage_max/stage_sum are null");
  if (n == 5 && !a.out) fail("launch_stage: out is null");
  if (a.max_context_len < 1) fail("launch_stage: max_context_len must be >= 1");
  if (const std::string why = cache_geometry_refusal(a); !why.empty()) fail("launch_stage: " + why);
}
}  // namespace

void launch_stage(Stage stage, const StageArgs& a, void* stream) {
  check_args(stage, a);
  const KernelKey key{a.dtype, a.head_size, a.block_size, a.num_threads, a.kv_dtype};
  const auto built = built_configs();
  if (a.num_threads != 128 || std::find(built.begin(), built.end(), key) == built.end()) {
    throw std::invalid_argument("kernel configuration " + describe(key) + " is not available; " + supported_text());
  }
  const bool rows = kv_layout_token_rows(a.kv_layout);
  for (const auto& inst : detail::kInstances) {
    if (inst.stage == stage && inst.dtype == a.dtype && inst.kv_dtype == a.kv_dtype && inst.token_rows == rows &&
        inst.fn(a.head_size, a.block_size, a, static_cast<cudaStream_t>(stream))) {
      return;
    }
  }
  {
    throw std::invalid_argument("kernel configuration " + describe(key) + " has no instance; " + supported_text());
  }
}

std::vector<float> download_floats(const DeviceBuffer& b, std::size_t n) {
  std::vector<float> v(n);
  b.download(v.data(), n * sizeof(float));
  return v;
}
std::vector<float> download_decoded(const DeviceBuffer& b, std::size_t n, DType t) {
  std::vector<std::uint8_t> bytes(n * dtype_bytes(t));
  b.download(bytes.data(), bytes.size());
  std::vector<float> v(n);
  decode(t, bytes.data(), n, v.data());
  return v;
}

StageOutput run_stage(Stage stage, DeviceProblem& d) {
  const PagedProblem& p = d.host();
  validate_problem(stage, p, gpu_info().smem_optin_bytes);
  d.poison_outputs();
  const StageArgs a = d.args();
  launch_stage(stage, a, nullptr);
  PA_CUDA_CHECK(cudaDeviceSynchronize());

  StageOutput o;
  o.stage = stage;
  o.geometry = a.sg;
  const std::size_t rows = static_cast<std::size_t>(a.num_seqs) * a.num_heads;
  switch (stage) {
    case Stage::q_to_smem: o.values = download_floats(d.stage_out, rows * a.head_size); break;
    case Stage::qk: o.values = download_floats(d.stage_out, rows * a.max_context_len); break;
    case Stage::softmax:
      o.values = download_floats(d.stage_out, rows * a.max_context_len);
      o.max = download_floats(d.stage_max, rows);
      o.sum = download_floats(d.stage_sum, rows);
      break;
    case Stage::lv: o.values = download_floats(d.stage_out, rows * a.sg.num_warps * a.head_size); break;
    case Stage::warp_reduce: o.values = download_decoded(d.out, rows * a.head_size, a.dtype); break;
    default: throw std::invalid_argument(std::string("run_stage: stage ") + stage_name(stage) + " not available");
  }
  return o;
}

StageOutput run_stage(Stage stage, const PagedProblem& p) {
  DeviceProblem d(p);
  return run_stage(stage, d);
}

StageTiming time_stage(Stage stage, DeviceProblem& d, int iters, int warmup) {
  if (iters < 1) throw std::invalid_argument("time_stage: iters must be >= 1, got " + std::to_string(iters));
  validate_problem(stage, d.host(), gpu_info().smem_optin_bytes);
  const StageArgs a = d.args();
  StageTiming t;
  t.ms = time_launches_ms([&] { launch_stage(stage, a, nullptr); }, iters, warmup);
  t.median_ms = median_of(t.ms);
  return t;
}

double measure_copy_bandwidth_gbs(std::size_t bytes, int iters) {
  if (iters < 1 || bytes == 0) throw std::invalid_argument("measure_copy_bandwidth_gbs: need bytes > 0 and iters >= 1");
  DeviceBuffer a(bytes), b(bytes);
  a.fill_bytes(1);
  // Three copies first (clocks up, pages touched), then alternate the
  // direction so that no copy finds its source in L2 from the one before.
  for (int i = 0; i < 3; ++i) PA_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice));
  const std::vector<float> ms = time_indexed_launches_ms(
      [&](int i) {
        PA_CUDA_CHECK(cudaMemcpyAsync(i % 2 ? a.get() : b.get(), i % 2 ? b.get() : a.get(), bytes,
                                      cudaMemcpyDeviceToDevice));
      },
      iters, /*warmup=*/0, [](int) {});
  return 2.0 * static_cast<double>(bytes) / (static_cast<double>(median_of(ms)) * 1e-3) / 1e9;  // read + write
}

}  // namespace pa::kernels
