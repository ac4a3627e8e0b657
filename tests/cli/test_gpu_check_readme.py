"""scripts/gpu_check_readme.py: the README's GPU-check paragraph from gpu-check
summaries (a build-only one and a tests + sanitizers one), and its errors."""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "gpu_check_readme.py")

BUILD = """NVIDIA H100 80GB HBM3, 580.65.06, 81559 MiB

gpu-check summary (2026-11-25T08:30Z, NVIDIA H100 80GB HBM3, 580.65.06, 81559 MiB)
kernels: full (every dtype x head size x block size)
build                                    PASS (231s)
total: 231s; logs: /tmp/gc/gpu-check
"""
TESTS = """gpu-check summary (2026-11-25T08:41Z, NVIDIA H100 80GB HBM3, 580.65.06, 81559 MiB)
configurations: fp32:8 fp16:16 bf16:32; problem: head 128, heads 4, kv-heads 2, context lens 1,17,100
(v2_partition: partition size 64; cascade_merge: prefix 32 + suffixes 1,17,68;
 cascade_merge and optimized have no fp32 path: their fp32 configuration runs as fp16)
stage          memcheck    racecheck   synccheck   initcheck
q_to_smem      PASS 3/3    PASS 3/3    PASS 3/3    PASS 3/3
optimized      PASS 2/2    FAIL 1/2    PASS 2/2    PASS 2/2
PASS n/m: m runs, n clean. FAIL: the sanitizer reported errors. ERROR: pa-lab failed (wrong result, bad usage, no GPU) or timed out.
tests (label gpu)                        PASS (161s)
sanitizers                               FAIL (19/20 runs clean, 300s)
total: 470s; logs: /tmp/gc/gpu-check
"""


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


class GpuCheckReadme(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.build = os.path.join(self.dir, "build.txt")
        self.tests = os.path.join(self.dir, "tests.txt")
        with open(self.build, "w") as f:
            f.write(BUILD)
        with open(self.tests, "w") as f:
            f.write(TESTS)

    def test_paragraph_from_both_calls(self):
        r = run("--commit", "abc1234", self.build, self.tests)
        self.assertEqual(r.returncode, 0, r.stderr)
        p = r.stdout
        self.assertIn("2026-11-25T08:41Z, NVIDIA H100 80GB HBM3, commit abc1234", p)
        self.assertIn("build: PASS (231s)", p)
        self.assertIn("tests (label gpu): PASS (161s)", p)
        self.assertIn("did NOT pass every step", p)  # the sanitizers failed
        self.assertIn("configurations fp32:8 fp16:16 bf16:32: 19 of 20 runs clean", p)

    def paragraph_with(self, path, text):
        """The paragraph once `path` (self.build or self.tests) holds `text`."""
        with open(path, "w") as f:
            f.write(text)
        return run("--commit", "abc1234", self.build, self.tests).stdout

    def test_kernel_set_is_stated_never_assumed(self):
        r = run("--commit", "abc1234", self.build, self.tests)
        self.assertIn("kernels: full (every dtype x head size x block size)", r.stdout)
        quick = BUILD.replace("full (every dtype x head size x block size)",
                              "quick (head 128, block 16; stage 8 also heads 64 and 256)")
        p = self.paragraph_with(self.build, quick)
        self.assertIn("kernels: quick (head 128, block 16; stage 8 also heads 64 and 256)", p)
        self.assertNotIn("every dtype", p)
        # A summary from before the kernels line: said so, not guessed.
        p = self.paragraph_with(self.build, BUILD.replace("kernels: full (every dtype x head size x block size)\n", ""))
        self.assertIn("kernel set not recorded in the summary", p)

    def test_the_stages_sanitized_are_named(self):
        # Two of the eight stages: named, not "every stage".
        r = run("--commit", "abc1234", self.build, self.tests)
        self.assertIn("ran stages q_to_smem, optimized in the configurations", r.stdout)
        self.assertNotIn("every stage", r.stdout)
        one = TESTS.replace("q_to_smem      PASS 3/3    PASS 3/3    PASS 3/3    PASS 3/3\n", "")
        self.assertIn("ran stage optimized in the configurations", self.paragraph_with(self.tests, one))
        rows = "".join(f"{st:<15}PASS 1/1    PASS 1/1    PASS 1/1    PASS 1/1\n" for st in
                       ("q_to_smem", "qk", "softmax", "lv", "warp_reduce", "v2_partition", "cascade_merge", "optimized"))
        every = TESTS.split("q_to_smem ")[0] + rows + TESTS.split("FAIL 1/2    PASS 2/2    PASS 2/2\n")[1]
        self.assertIn("ran every stage in the configurations", self.paragraph_with(self.tests, every))
        # Rows STAGE@FORM (a stage on CSR tables, a token-row layout, ...) are counted and named.
        forms = every.replace("PASS n/m", "warp_reduce@nhd        PASS 1/1    PASS 1/1    PASS 1/1    FAIL 0/1\nPASS n/m")
        p = self.paragraph_with(self.tests, forms)
        self.assertIn("ran every stage and 1 other cache form (warp_reduce@nhd) in the configurations", p)
        self.assertIn("35 of 36 runs clean", p)

    def test_the_tools_are_the_runs_own(self):
        r = run("--commit", "abc1234", self.build, self.tests)
        self.assertIn("compute-sanitizer (memcheck, racecheck, synccheck, initcheck) ran", r.stdout)
        one = (TESTS.replace("stage          memcheck    racecheck   synccheck   initcheck", "stage          memcheck")
               .replace("PASS 3/3    PASS 3/3    PASS 3/3    PASS 3/3", "PASS 3/3")
               .replace("PASS 2/2    FAIL 1/2    PASS 2/2    PASS 2/2", "FAIL 1/2"))
        p = self.paragraph_with(self.tests, one)
        self.assertIn("compute-sanitizer (memcheck) ran", p)
        self.assertIn("4 of 5 runs clean", p)

    def test_a_step_name_of_40_characters_or_more_is_read(self):
        # gpu-check pads names to 40 columns plus one space: a longer name has one space after it.
        long_step = TESTS.replace("tests (label gpu)                        PASS (161s)",
                                  "tests (all tests (no test is labelled gpu)) PASS (161s)")
        p = self.paragraph_with(self.tests, long_step)
        self.assertIn("tests (all tests (no test is labelled gpu)): PASS (161s)", p)

    def test_all_passed(self):
        ok = TESTS.replace("FAIL 1/2", "PASS 2/2").replace("FAIL (19/20", "PASS (20/20")
        with open(self.tests, "w") as f:
            f.write(ok)
        r = run("--commit", "abc1234", self.build, self.tests)
        self.assertIn("passed every step", r.stdout)
        self.assertIn("20 of 20 runs clean", r.stdout)

    def test_skipped_tests_are_counted_not_hidden(self):
        ok = TESTS.replace("FAIL 1/2", "PASS 2/2").replace("FAIL (19/20", "PASS (20/20")
        ok = ok.replace("tests (label gpu)                        PASS (161s)",
                        "tests (label gpu)                        PASS, 5 SKIPPED (161s)")
        with open(self.tests, "w") as f:
            f.write(ok)
        r = run("--commit", "abc1234", self.build, self.tests)
        self.assertIn("passed every step, 5 test(s) SKIPPED", r.stdout)
        self.assertIn("tests (label gpu): PASS, 5 SKIPPED (161s)", r.stdout)
        self.assertNotIn("NOT", r.stdout)

    def test_readme_region_replaced_atomically(self):
        readme = os.path.join(self.dir, "README.md")
        with open(readme, "w") as f:
            f.write("before\n<!-- gpu-check:begin -->\nold text\n<!-- gpu-check:end -->\nafter\n")
        r = run("--commit", "abc1234", "--readme", readme, self.build, self.tests)
        self.assertEqual(r.returncode, 0, r.stderr)
        text = open(readme).read()
        self.assertNotIn("old text", text)
        self.assertTrue(text.startswith("before\n<!-- gpu-check:begin -->\nThe last check on the GPU"))
        self.assertTrue(text.endswith("<!-- gpu-check:end -->\nafter\n"))
        self.assertFalse(os.path.exists(readme + ".tmp"))

    def test_errors_name_the_file(self):
        bad = os.path.join(self.dir, "bad.txt")
        with open(bad, "w") as f:
            f.write("hello\n")
        r = run("--commit", "x", bad)
        self.assertEqual(r.returncode, 2)
        self.assertIn("bad.txt: no 'gpu-check summary", r.stderr)
        r = run("--commit", "x", os.path.join(self.dir, "missing.txt"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("missing.txt: cannot read", r.stderr)
        readme = os.path.join(self.dir, "README.md")
        with open(readme, "w") as f:
            f.write("no markers\n")
        r = run("--commit", "x", "--readme", readme, self.build)
        self.assertEqual(r.returncode, 2)
        self.assertIn("needs exactly one <!-- gpu-check:begin -->", r.stderr)
        self.assertEqual(open(readme).read(), "no markers\n")  # untouched


if __name__ == "__main__":
    unittest.main()
