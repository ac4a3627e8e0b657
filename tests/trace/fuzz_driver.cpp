// Long-run driver of the seeded mutation fuzzer (trace/FUZZING.md):
//   pa_trace_fuzz_driver [iterations=1000000] [seed=1]
//   pa_trace_fuzz_driver --write-corpus DIR   (seed files for libFuzzer: the
//   samples and small host-model traces of stages 1-5)
// Prints progress every 100000 inputs; exits non-zero on the first input that
// crashes the reader's contract (any exception other than TraceFormatError,
// or an accepted input that does not validate and round-trip), after writing
// it to fuzz-failure.bin.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "trace_mutator.hpp"

using namespace pa::trace::testing;

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-corpus") {
    int i = 0;
    for (const auto& c : default_corpus()) {
      const std::string path = std::string(argv[2]) + "/seed" + std::to_string(i++) + ".patrace";
      std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(c.data()),
                                                  static_cast<std::streamsize>(c.size()));
    }
    return 0;
  }
  const std::uint64_t iters = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  const std::uint64_t seed = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1;
  std::mt19937_64 rng(seed);
  auto corpus = default_corpus();
  FuzzStats st;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < iters; ++i) {
    const auto in = mutate(corpus, rng);
    bool ok = false;
    try {
      ok = fuzz_one(in, st);
    } catch (const std::exception& e) {
      std::ofstream("fuzz-failure.bin", std::ios::binary).write(reinterpret_cast<const char*>(in.data()),
                                                               static_cast<std::streamsize>(in.size()));
      std::fprintf(stderr, "FAIL at input %llu (seed %llu): %s (written to fuzz-failure.bin)\n",
                   static_cast<unsigned long long>(i), static_cast<unsigned long long>(seed), e.what());
      return 1;
    }
    if (ok && corpus.size() < 64) corpus.push_back(in);
    if ((i + 1) % 100000 == 0) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%llu inputs, %llu accepted, %llu rejected, %.1f s\n", static_cast<unsigned long long>(i + 1),
                  static_cast<unsigned long long>(st.accepted), static_cast<unsigned long long>(st.rejected), s);
      std::fflush(stdout);
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("done: %llu inputs (seed %llu), %llu accepted, %llu rejected, no failure, %.1f s\n",
              static_cast<unsigned long long>(st.inputs), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(st.accepted), static_cast<unsigned long long>(st.rejected), s);
  return 0;
}
