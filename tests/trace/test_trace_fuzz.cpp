// Short seeded mutation fuzz run of the trace reader (ctest label `fuzz`).
// It runs PA_FUZZ_ITERS inputs (default 2 million) or until PA_FUZZ_SECONDS
// (default 20) have passed, whichever comes first, and at least 10000 inputs;
// PA_FUZZ_SEED sets the seed. The long run uses the same
// mutator through pa_trace_fuzz_driver (see trace/FUZZING.md).
#include <catch2/catch_test_macros.hpp>

#include <chrono>
#include <cstdlib>

#include "trace_mutator.hpp"

using namespace pa::trace;
using namespace pa::trace::testing;

TEST_CASE("seeded mutation fuzzing of the trace reader", "[fuzz][trace]") {
  const char* it = std::getenv("PA_FUZZ_ITERS");
  const char* sd = std::getenv("PA_FUZZ_SEED");
  const char* secs = std::getenv("PA_FUZZ_SECONDS");
  const std::uint64_t iters = it ? std::strtoull(it, nullptr, 10) : 2000000;
  const double budget_s = secs ? std::strtod(secs, nullptr) : 20.0;
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t seed = sd ? std::strtoull(sd, nullptr, 10) : 20261122;
  std::mt19937_64 rng(seed);
  auto corpus = default_corpus();
  FuzzStats st;
  for (std::uint64_t i = 0; i < iters; ++i) {
    const auto in = mutate(corpus, rng);
    bool ok = false;
    try {
      ok = fuzz_one(in, st);
    } catch (const std::exception& e) {
      FAIL("input " << i << " (seed " << seed << "): " << e.what());
    }
    // Accepted mutants (e.g. a changed value) join the corpus, as in coverage-guided fuzzing.
    if (ok && corpus.size() < 64) corpus.push_back(in);
    if (i >= 10000 && (i & 1023) == 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > budget_s) {
      break;
    }
  }
  INFO("inputs " << st.inputs << " accepted " << st.accepted << " rejected " << st.rejected);
  WARN("trace reader fuzz: " << st.inputs << " inputs (seed " << seed << "), " << st.accepted
                              << " accepted, " << st.rejected << " rejected, no failure");
  CHECK(st.inputs >= std::min<std::uint64_t>(iters, 10000));
  CHECK(st.rejected > 0);
}
