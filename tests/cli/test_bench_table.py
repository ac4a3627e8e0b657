#!/usr/bin/env python3
"""scripts/bench_table.py: the README results table from a pa-bench JSON file.

Usage: test_bench_table.py [SAMPLE_JSON [SWEEP_JSON]]

Builds the table from tests/cli/bench_fixture.json (a small file in the
format of pa-bench runs that predate the pool fields, with one row of each
status) and checks what it says; with SAMPLE_JSON (written by pa-bench's own
writer, tests/cli/bench_json_sample.cpp) also checks that the script reads the
schema pa-bench writes; with SWEEP_JSON (the same writer's split-sweep file)
the split sweep's schema and table. With tests/cli/sdpa_fixture.json (a
python/benchmarks/bench_vs_sdpa.py --json file on the fixture's GPU), the
SDPA columns (--sdpa) and their refusals, and that script's shape parsing.
Run by ctest (test bench_table_py).
"""
import ast
import copy
import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile
import unittest

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCRIPT = ROOT / "scripts" / "bench_table.py"
FIXTURE = HERE / "bench_fixture.json"
SDPA_FIXTURE = HERE / "sdpa_fixture.json"
SDPA_BENCH = ROOT / "python" / "benchmarks" / "bench_vs_sdpa.py"
SAMPLE = None  # set from the command line
SWEEP = None

spec = importlib.util.spec_from_file_location("bench_table", SCRIPT)
bench_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_table)


def fixture():
    return json.loads(FIXTURE.read_text())


def table_lines(text):
    return [line for line in text.splitlines() if line.startswith("| ")]


class FixtureTable(unittest.TestCase):
    def setUp(self):
        self.text = bench_table.table(fixture(), "fixture.json")
        self.rows = table_lines(self.text)

    def row(self, *prefix):
        start = "| " + " | ".join(str(p) for p in prefix) + " |"
        found = [r for r in self.rows if r.startswith(start)]
        self.assertEqual(len(found), 1, f"one row starting {start!r} in\n{self.text}")
        return [c.strip() for c in found[0].strip("|").split("|")]

    def test_header_names_the_run(self):
        first = self.text.splitlines()[0]
        self.assertIn("**Fixture GPU** (100 SMs)", first)
        self.assertIn("raw data: `fixture.json`", first)
        self.assertIn("**2000 GB/s**", first)
        self.assertIn("median of 100 CUDA-event timings", first)
        self.assertIn("at least 10 warm-up launches and 50 ms of them", first)

    def test_busy_wait_is_stated_from_the_json(self):
        self.assertIn("a 50 us GPU busy-wait kernel runs", self.text)
        data = fixture()
        data["spin_us"] = 0
        self.assertIn("No busy-wait", bench_table.table(data, "f.json"))
        data["spin_us"] = 200
        self.assertIn("a 200 us GPU busy-wait", bench_table.table(data, "f.json"))

    def test_pool_is_each_rows_real_pool(self):
        # 1 x 4096 tokens fp16: 110 sets (iters + warmup) of 16.8 MB, not the 6 GB asked for.
        self.assertEqual(self.row(1, 32, 8, 4096, 128, "fp16")[7], "1.85")
        # 1 x 131072 tokens bf16: 537 MB sets, ceil(6e9 / set) = 12 of them.
        self.assertEqual(self.row(1, 32, 8, 131072, 128, "bf16")[7], "6.44")
        self.assertIn("6 GB asked for, but at most 110 copies", self.text)
        self.assertIn("the pool is 0.49 to 6.44 GB", self.text)

    def test_pool_formula_matches_pa_bench(self):
        data = fixture()
        r = dict(data["rows"][0])
        self.assertEqual(bench_table.kv_pool(r, data), (110, 110 * 16777216.0))
        data["iters"], data["warmup"] = 1000, 0  # the cap moves: ceil(6e9 / 16777216) = 358
        self.assertEqual(bench_table.kv_pool(r, data)[0], 358)
        data["pool_gb"] = 0.001  # a set larger than the pool: still two sets
        self.assertEqual(bench_table.kv_pool(r, data)[0], 2)
        casc = next(x for x in fixture()["rows"] if x["prefix"])
        # The shared prefix counts once: 64 + 4 * 1 blocks per set.
        self.assertEqual(bench_table.kv_pool(casc, fixture()), (110, 110 * 2.0 * 68 * 8 * 128 * 16 * 2))
        recorded = dict(r, pool_sets=7, pool_bytes=123.0)
        self.assertEqual(bench_table.kv_pool(recorded, data), (7, 123.0))

    def test_each_status_shown_as_itself(self):
        small = self.row(1, 32, 8, 4096, 128, "fp16")
        self.assertEqual(small[8], "**error**")  # v1: error, never n/a
        self.assertEqual(small[9], "missing")  # v2
        self.assertEqual(small[10], "16.0 us<br>1049 GB/s (52%)")  # optimized
        long = self.row(1, 32, 8, 131072, 128, "bf16")
        self.assertEqual(long[8], "n/a")
        self.assertEqual(long[9], "not built")
        self.assertIn("v1 at 131072 tokens: its shared memory does not fit", self.text)

    def test_errors_are_listed_with_their_message(self):
        self.assertIn("- **error**: v1 fp16 at 1 x 4096 tokens (head 128): "
                      "`error: cudaErrorIllegalAddress: an illegal memory access was encountered`", self.text)
        self.assertIn("- **error**: v2 fp16 at 4 x 1040 tokens (head 128): "
                      "`error: the partition kernel's output differs`", self.text)
        self.assertEqual(self.text.count("- **error**"), 2)

    def test_unknown_status_is_an_error_not_na(self):
        for status in ["error: x", "crashed", "", "unsupportedd"]:
            self.assertEqual(bench_table.status_kind(status), "error" if status != "unsupportedd" else "n/a")
        self.assertEqual(bench_table.cell({"status": "timeout"}), "**error**")

    def test_cascade_table(self):
        self.assertIn("Cascade: 4 sequences sharing a 1024-token prefix, 16 unique tokens each", self.text)
        self.assertIn("rotated over 110 copies (0.49 GB in fp16)", self.text)
        row = [c.strip() for c in self.rows[-1].strip("|").split("|")]
        self.assertEqual(row[0], "fp16")
        self.assertEqual(row[1], "—")  # v1 has no row
        self.assertEqual(row[2], "**error**")
        self.assertEqual(row[4], "10.0 us<br>275 GB/s (14%)")
        self.assertEqual(row[5], "10.0x (vs optimized)")

    def test_readme_markers_replaced_and_nothing_else(self):
        with tempfile.TemporaryDirectory() as d:
            readme = pathlib.Path(d) / "README.md"
            readme.write_text("before\n<!-- results:begin -->\nold table\n<!-- results:end -->\nafter\n")
            r = subprocess.run([sys.executable, str(SCRIPT), str(FIXTURE), "--readme", str(readme)],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            text = readme.read_text()
            self.assertTrue(text.startswith("before\n<!-- results:begin -->\nMeasured on **Fixture GPU**"))
            self.assertTrue(text.endswith("\n<!-- results:end -->\nafter\n"))
            self.assertNotIn("old table", text)

    def test_other_markers_leave_the_main_table_alone(self):
        with tempfile.TemporaryDirectory() as d:
            readme = pathlib.Path(d) / "README.md"
            start = "<!-- results:begin -->\nmain\n<!-- results:end -->\n"
            readme.write_text(start + "<!-- results-fp8:begin -->\nold\n<!-- results-fp8:end -->\n")
            r = subprocess.run([sys.executable, str(SCRIPT), str(FIXTURE), "--readme", str(readme),
                                "--markers", "results-fp8"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            text = readme.read_text()
            self.assertTrue(text.startswith(start + "<!-- results-fp8:begin -->\nMeasured on **Fixture GPU**"))
            self.assertNotIn("\nold\n", text)
            r = subprocess.run([sys.executable, str(SCRIPT), str(FIXTURE), "--readme", str(readme),
                                "--markers", "Bad Name"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 2)
            self.assertIn("--markers 'Bad Name'", r.stderr)

    def test_fp8_rows_are_rows_of_their_own(self):
        data = fixture()
        extra = [dict(r, kv_dtype="fp8_e4m3", kv_bytes=r["kv_bytes"] / 2) for r in data["rows"] if not r["prefix"]]
        data["rows"] += extra
        text = bench_table.table(data, "f.json")
        self.assertIn("fp16, fp8_e4m3 KV", text)
        self.assertIn("store K and V in one byte per element", text)
        self.assertEqual(len(table_lines(text)), len(self.rows) + len({(r["seqs"], r["context"], r["head_size"],
                                                                       r["dtype"]) for r in extra}))

    def layout_data(self):
        data = fixture()
        data["layouts"] = ["vllm", "nhd", "hnd"]
        opt = [r for r in data["rows"] if r["kernel"] == "optimized"]
        extra = []
        for r in opt:
            extra.append(dict(r, layout="nhd", median_us=r["median_us"] * 1.02))
            extra.append(dict(r, layout="hnd", status="error: its output differs from stage 8's on the same inputs"))
        data["rows"] += extra
        return data, opt

    def test_layout_rows_stay_out_of_the_main_table(self):
        data, _ = self.layout_data()
        self.assertEqual(bench_table.table(data, "fixture.json"), self.text)

    def test_layout_table_gives_each_layout_and_its_ratio(self):
        data, opt = self.layout_data()
        text = bench_table.layout_table(data, "f.json")
        self.assertIn("pa-bench --layouts nhd,hnd", text)
        lines = table_lines(text)
        self.assertEqual(lines[0].split("|")[7:-1], [" vllm ", " nhd ", " hnd ", " nhd / vllm ", " hnd / vllm "])
        body = lines[1:]
        self.assertEqual(len(body), len(opt))
        ok = [l for l in body if "**error**" in l]
        self.assertEqual(len(ok), len(opt))  # every hnd cell is the error
        for line in body:
            cells = [c.strip() for c in line.strip("|").split("|")]
            if cells[6] not in ("n/a", "not built", "missing", "**error**", "—"):
                self.assertEqual(cells[9], "1.020")
            self.assertEqual(cells[10], "—")  # no ratio for an error
        self.assertIn("optimized (hnd cache)", text)

    def test_layout_table_without_layout_rows_is_an_error(self):
        with self.assertRaises(SystemExit):
            bench_table.layout_table(fixture(), "f.json")

    def test_readme_without_markers_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            readme = pathlib.Path(d) / "README.md"
            readme.write_text("no markers\n")
            r = subprocess.run([sys.executable, str(SCRIPT), str(FIXTURE), "--readme", str(readme)],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1)
            self.assertIn("has no <!-- results:begin --> ... <!-- results:end --> markers", r.stderr)
            self.assertEqual(readme.read_text(), "no markers\n")


def sdpa_fixture():
    return json.loads(SDPA_FIXTURE.read_text())


def run_script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def cells_of(line):
    return [c.strip() for c in line.strip("|").split("|")]


class SdpaColumns(unittest.TestCase):
    """--sdpa: SDPA's cuDNN and flash backends as two more columns of the main table."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = pathlib.Path(self.tmp.name)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = self.dir / name
        path.write_text(json.dumps(data) if not isinstance(data, str) else data)
        return path

    def bf16_with_errors(self, legacy):
        """A bf16 run on the fixture's bf16 shape whose flash backend raised: as bench_vs_sdpa.py writes it
        (a status) or as files before statuses have it (a null time and sdpa_flash_error only)."""
        d = sdpa_fixture()
        d["dtype"] = "bf16"
        row = dict(d["rows"][0], shape=[1, 32, 8, 131072, 128], dtype="bfloat16", kv_bytes=536870912,
                   sdpa_cudnn_us=2000.0, sdpa_flash_us=None,
                   sdpa_flash_error="No available kernel. Aborting execution.")
        if legacy:
            for k in ("sdpa_cudnn_status", "sdpa_flash_status", "pa_lab_status"):
                row.pop(k)
        else:
            row["sdpa_flash_status"] = "error: No available kernel. Aborting execution."
        d["rows"] = [row]
        return d

    def table(self, *sdpa_paths):
        runs = bench_table.load_sdpa(list(sdpa_paths), fixture(), "fixture.json", ROOT)
        return bench_table.table(fixture(), "fixture.json", sdpa=runs), runs

    def row(self, text, *prefix):
        start = "| " + " | ".join(str(p) for p in prefix) + " |"
        found = [r for r in table_lines(text) if r.startswith(start)]
        self.assertEqual(len(found), 1, f"one row starting {start!r} in\n{text}")
        return cells_of(found[0])

    def test_cells_on_matching_rows_and_a_dash_elsewhere(self):
        text, _ = self.table(SDPA_FIXTURE)
        self.assertEqual(cells_of(table_lines(text)[0])[-5:], ["v1", "v2", "optimized", "SDPA cuDNN", "SDPA flash"])
        self.assertEqual(table_lines(text)[1].count("|"), 14)  # the rule: 13 columns
        small = self.row(text, 1, 32, 8, 4096, 128, "fp16")
        self.assertEqual(len(small), 13)
        self.assertEqual(small[10], "16.0 us<br>1049 GB/s (52%)")  # stage 8: the main run's 2000 GB/s copy
        # The same time and bytes as stage 8, but the % of the SDPA process's own copy (1600 GB/s).
        self.assertEqual(small[11:], ["16.0 us<br>1049 GB/s (66%)", "32.0 us<br>524 GB/s (33%)"])
        # The bf16 shape is not in the fp16 run.
        self.assertEqual(self.row(text, 1, 32, 8, 131072, 128, "bf16")[11:], ["—", "—"])

    def test_header_names_versions_layout_copy_and_the_dash(self):
        text, _ = self.table(SDPA_FIXTURE)
        first = text.splitlines()[0]
        for said in ["torch 2.5.1+cu124, cuDNN 9.1.0", "reading the same K and V contiguous",
                     "(no page table)", "enable_gqa", "`python/benchmarks/bench_vs_sdpa.py`",
                     "raw data: `tests/cli/sdpa_fixture.json` (fp16)", "median of 100 CUDA-event timings",
                     "Their % is of the copy bandwidth measured in that process (fp16: **1600 GB/s**), not this run's",
                     "\"—\": the shape was not in the SDPA run"]:
            self.assertIn(said, first)
        self.assertIn("**2000 GB/s**", first)  # the main run's copy is still the kernels'

    def test_cudnn_version_as_cudnn_writes_it(self):
        cases = [(90100, "cuDNN 9.1.0"), (91900, "cuDNN 9.19.0"), (8902, "cuDNN 8.9.2"), (None, "no cuDNN")]
        for v, text in cases:
            self.assertEqual(bench_table.cudnn_text(v), text)
        self.assertEqual(len(cases), 4)

    def test_each_dtype_from_its_own_file(self):
        text, runs = self.table(SDPA_FIXTURE, self.write("bf16.json", self.bf16_with_errors(legacy=False)))
        self.assertEqual([r["data"]["dtype"] for r in runs], ["fp16", "bf16"])
        self.assertIn("(fp16: **1600 GB/s**, bf16: **1600 GB/s**)", text)
        self.assertEqual(self.row(text, 1, 32, 8, 131072, 128, "bf16")[11], "2.00 ms<br>268 GB/s (17%)")

    def test_a_backend_that_raised_is_an_error_with_its_message(self):
        forms = 0
        for legacy in (False, True):
            text, _ = self.table(SDPA_FIXTURE, self.write(f"bf16-{legacy}.json", self.bf16_with_errors(legacy)))
            cells = self.row(text, 1, 32, 8, 131072, 128, "bf16")
            self.assertEqual(cells[12], "**error**")
            self.assertNotIn("n/a", cells[11:])
            self.assertIn("- **error**: SDPA flash bf16 at 1 x 131072 tokens (head 128): "
                          "`error: No available kernel. Aborting execution.`", text)
            self.assertEqual(text.count("- **error**"), 3)  # the fixture's two kernel errors, and this one
            forms += 1
        self.assertEqual(forms, 2)

    def test_a_time_without_a_status_or_a_status_without_a_time(self):
        row = sdpa_fixture()["rows"][0]
        cases = [({"sdpa_cudnn_us": None, "sdpa_cudnn_status": None, "sdpa_cudnn_error": None},
                  "error: no time and no error message recorded"),
                 ({"sdpa_cudnn_us": None, "sdpa_cudnn_status": "ok"}, "error: status ok but no time recorded"),
                 ({"sdpa_cudnn_status": "error: its output differs from pa_lab's by up to 0.5"},
                  "error: its output differs from pa_lab's by up to 0.5")]
        for change, status in cases:
            r = {k: v for k, v in dict(row, **change).items() if v is not None}
            self.assertEqual(bench_table.sdpa_status(r, "cudnn"), status)
            self.assertEqual(bench_table.sdpa_cell(r, "cudnn", {"data": sdpa_fixture()}), "**error**")
        self.assertEqual(len(cases), 3)

    def test_without_sdpa_the_output_is_the_same(self):
        """--sdpa adds its sentence, its two columns and its error lines, and changes nothing else; checked on
        the fixture and on each committed main-table file (with an SDPA run of every shape it has)."""
        files = [FIXTURE] + [ROOT / "assets" / "bench" / f"{n}.json" for n in ("nvidia-h200", "nvidia-h100")]
        for f in files:
            data = json.loads(f.read_text())
            fp16 = sdpa_fixture()
            fp16["gpu"] = data["gpu"]
            template = fp16["rows"][0]
            fp16["rows"] = [dict(template, shape=[r["seqs"], r["heads"], r["kv_heads"], r["context"], r["head_size"]],
                                 kv_bytes=r["kv_bytes"])
                            for r in data["rows"] if r["kernel"] == "optimized" and not r["prefix"]
                            and r["dtype"] == "fp16" and bench_table.kv_dtype(r) == "auto"
                            and bench_table.layout(r) == "vllm"]
            self.assertGreater(len(fp16["rows"]), 0, f)
            sdpa = self.write("sdpa.json", fp16)
            plain, with_sdpa = run_script(f, "--print"), run_script(f, "--print", "--sdpa", sdpa)
            self.assertEqual((plain.returncode, with_sdpa.returncode), (0, 0), plain.stderr + with_sdpa.stderr)
            self.assertEqual(bench_table.table(data, "x.json"), bench_table.table(data, "x.json", sdpa=None))
            runs = bench_table.load_sdpa([sdpa], data, f, ROOT)
            lines = with_sdpa.stdout.split("\n")
            header = " " + bench_table.sdpa_header(runs)
            self.assertTrue(lines[0].endswith(header))
            lines[0] = lines[0][:-len(header)]
            n_main = lines.index("", 2)  # the main table ends at the first blank line after it
            for i in range(2, n_main):
                lines[i] = "|".join(lines[i].split("|")[:-3]) + "|"
            lines = [l for l in lines if not l.startswith("- **error**: SDPA")]
            self.assertEqual("\n".join(lines), plain.stdout)
        self.assertEqual(len(files), 3)

    def test_refused_with_status_2_and_a_message(self):
        h100 = dict(sdpa_fixture(), gpu="NVIDIA H100 80GB HBM3")
        fp16_again = self.write("again.json", sdpa_fixture())
        cases = [
            ([FIXTURE, "--sdpa", self.write("h100.json", h100)],
             ["measured on 'NVIDIA H100 80GB HBM3'", "on 'Fixture GPU'"]),
            ([FIXTURE, "--sdpa", SDPA_FIXTURE, "--sdpa", fp16_again],
             ["sdpa_fixture.json and", "again.json are both fp16 runs", "(one file per dtype: fp16, bf16)"]),
            ([FIXTURE, "--sdpa", self.dir / "absent.json"], ["absent.json: cannot read it"]),
            ([FIXTURE, "--sdpa", self.write("text.json", "not json")], ["text.json: not JSON"]),
            ([FIXTURE, "--sdpa", self.write("list.json", "[]")], ["list.json: no 'gpu', 'torch'"]),
            ([FIXTURE, "--sdpa", self.write("fp32.json", dict(sdpa_fixture(), dtype="fp32"))],
             ["dtype 'fp32' (accepted: fp16, bf16)"]),
            ([FIXTURE, "--sdpa", self.write("paged.json", dict(sdpa_fixture(), kv_layout="paged"))],
             ["kv_layout 'paged' (accepted: contiguous)"]),
            ([FIXTURE, "--sdpa", self.write("twice.json", dict(sdpa_fixture(), rows=sdpa_fixture()["rows"] * 2))],
             ["shape [1, 32, 8, 4096, 128] (fp16) is in the file twice"]),
            ([FIXTURE, "--sdpa", self.write("bytes.json", dict(sdpa_fixture(), rows=[
                dict(sdpa_fixture()["rows"][0], kv_bytes=1)]))],
             ["has kv_bytes 1, the table's row 16777216"]),
            ([ROOT / "assets" / "bench" / "nvidia-h200-multilevel.json", "--sdpa", SDPA_FIXTURE],
             ["is a pa-bench --multilevel file, whose table has no SDPA columns"]),
            ([ROOT / "assets" / "bench" / "nvidia-h100-split-sweep.json", "--sdpa", SDPA_FIXTURE],
             ["is a pa-bench --split-sweep file, whose table has no SDPA columns"]),
            ([FIXTURE, "--latency", "--sdpa", SDPA_FIXTURE], ["--sdpa with --latency: that table has no SDPA"]),
            ([FIXTURE, "--layouts", "--sdpa", SDPA_FIXTURE], ["--sdpa with --layouts: that table has no SDPA"]),
            ([FIXTURE, "--paged-read", "--sdpa", SDPA_FIXTURE], ["--sdpa with --paged-read: that table has no SDPA"]),
            ([FIXTURE, "--paged-read"], ["--paged-read: no stage 8 row has paged_read_us"]),
            ([FIXTURE, "--paged-read", "--latency"], ["each choose a table: give one"]),
            ([self.write("alibi.json", dict(fixture(), alibi=True)), "--sdpa", SDPA_FIXTURE],
             ["kernels ran with ALiBi"]),
        ]
        for args, said in cases:
            with tempfile.TemporaryDirectory() as d:
                readme = pathlib.Path(d) / "README.md"
                readme.write_text("<!-- results:begin -->\nold\n<!-- results:end -->\n")
                r = run_script(*args, "--readme", readme)
                self.assertEqual(r.returncode, 2, f"{args}: {r.stdout}{r.stderr}")
                self.assertEqual(r.stdout, "")
                self.assertTrue(r.stderr.startswith("bench_table.py: "), r.stderr)
                for s in said:
                    self.assertIn(s, r.stderr)
                self.assertEqual(readme.read_text(), "<!-- results:begin -->\nold\n<!-- results:end -->\n")
        self.assertEqual(len(cases), 17)

    def test_the_readme_gets_the_sdpa_columns_and_extra_shapes_are_said(self):
        readme = self.write("README.md", "<!-- results-h200:begin -->\nold\n<!-- results-h200:end -->\n")
        r = run_script(FIXTURE, "--sdpa", SDPA_FIXTURE, "--markers", "results-h200", "--readme", readme)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("| SDPA cuDNN | SDPA flash |", readme.read_text())
        self.assertIn("sdpa_fixture.json: 1 shape(s) not in the table, left out: [8, 32, 8, 4096, 128]", r.stderr)


def bench_vs_sdpa_helpers():
    """bench_vs_sdpa.py's torch-free helpers and its default shapes, taken from its source: the
    script imports torch and pa_lab, which this machine need not have."""
    tree = ast.parse(SDPA_BENCH.read_text(), str(SDPA_BENCH))
    wanted = {"SHAPES", "SHAPE_FIELDS", "parse_shapes", "pair_tolerance"}
    nodes = [n for n in tree.body
             if isinstance(n, ast.FunctionDef) and n.name in wanted
             or isinstance(n, ast.Assign) and any(getattr(t, "id", None) in wanted for t in n.targets)]
    found = {n.name if isinstance(n, ast.FunctionDef) else n.targets[0].id for n in nodes}
    assert found == wanted, f"bench_vs_sdpa.py lacks {wanted - found}"
    ns = {}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(SDPA_BENCH), "exec"), ns)
    return ns


class SdpaBenchShapes(unittest.TestCase):
    """bench_vs_sdpa.py --shapes and its cross-check tolerance."""

    def setUp(self):
        self.h = bench_vs_sdpa_helpers()

    def test_the_defaults_written_out_parse_back(self):
        shapes = self.h["SHAPES"]
        text = ";".join(",".join(map(str, s)) for s in shapes)
        self.assertEqual(self.h["parse_shapes"](text), shapes)
        self.assertEqual(self.h["parse_shapes"](" 1, 32, 8, 4096, 128 ; 64,32,8,8192,64;"),
                         [(1, 32, 8, 4096, 128), (64, 32, 8, 8192, 64)])

    def test_bad_shapes_are_named(self):
        cases = [("1,32,8,4096", "shape '1,32,8,4096' (accepted: five positive integers"),
                 ("1,32,8,4096,128,1", "shape '1,32,8,4096,128,1' (accepted"),
                 ("1,32,8,4k,128", "shape '1,32,8,4k,128' (accepted"),
                 ("1,32,-8,4096,128", "shape '1,32,-8,4096,128' (accepted"),
                 ("0,32,8,4096,128", "every field must be at least 1"),
                 ("1,32,6,4096,128", "heads 32 is not a multiple of kv_heads 6"),
                 ("1,32,8,4096,128;1,32,8,4096,128", "shape '1,32,8,4096,128' is given twice"),
                 (" ; ", "holds no shape")]
        for text, said in cases:
            with self.assertRaises(ValueError) as e:
                self.h["parse_shapes"](text)
            self.assertIn(said, str(e.exception))
        self.assertEqual(len(cases), 8)

    def test_pair_tolerance_is_the_headers_formula(self):
        # kernel_pair_tolerance: abs = 2a / (1 - r), rel = 2r / (1 - r).
        self.assertEqual(self.h["pair_tolerance"](0.5, 0.5), (2.0, 2.0))
        self.assertEqual(self.h["pair_tolerance"](1.0, 0.0), (2.0, 0.0))


class MultilevelTable(unittest.TestCase):
    """pa-bench --multilevel's file (the committed H200 run) becomes its own table."""

    FILE = ROOT / "assets" / "bench" / "nvidia-h200-multilevel.json"

    def data(self):
        return json.loads(self.FILE.read_text())

    def test_each_variant_with_its_figures(self):
        d = self.data()
        text = bench_table.multilevel_table(d, "ml.json")
        self.assertIn("raw data: `ml.json`", text.splitlines()[0])
        self.assertIn(f"**{d['copy_gbps']:.0f} GB/s**", text)
        rows = table_lines(text)[1:]  # after the header (the rule starts "|-")
        self.assertEqual(len(rows), len(d["rows"]))
        for r, line in zip(d["rows"], rows):
            cells = [c.strip() for c in line.strip("|").split("|")]
            self.assertEqual(cells[0], r["dtype"])
            self.assertEqual(cells[1], r["variant"])
            self.assertEqual(cells[2], f"{r['median_us']:.1f}")
            self.assertEqual(cells[3], f"{r['pct_floor']:.1f}%")

    def test_an_error_row_is_an_error_with_its_message(self):
        d = self.data()
        d["rows"][2]["status"] = "error: its output differs from stage 8's on the same inputs: x"
        text = bench_table.multilevel_table(d, "ml.json")
        self.assertIn(f"| {d['rows'][2]['dtype']} | {d['rows'][2]['variant']} | **error** |", text)
        self.assertIn("its output differs from stage 8's", text)
        self.assertNotIn("n/a", text)

    def test_the_script_picks_the_table_by_the_files_kind(self):
        r = subprocess.run([sys.executable, str(SCRIPT), str(self.FILE), "--print"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Multi-level cascade", r.stdout)


class WriterSchema(unittest.TestCase):
    """The file pa-bench's writer makes (bench_json_sample) is what the script reads."""

    ROW_KEYS = ["kernel", "dtype", "kv_dtype", "layout", "seqs", "heads", "kv_heads", "context", "prefix", "head_size", "block_size",
                "kv_bytes", "pool_sets", "pool_bytes", "status", "median_us", "min_us", "p10_us", "p90_us",
                "timed", "warmup_launches", "gbps", "pct_copy", "xcheck_max_abs_vs_optimized", "plan",
                "single_us", "b2b_us", "graph_us", "paged_read_us", "paged_bulk_us", "contiguous_read_us",
                "held_step_ns", "held_read_us", "held_bulk_us"]
    TOP_KEYS = ["gpu", "sm_count", "l2_bytes", "copy_gbps", "copy_bytes_each_way", "read_gbps", "read_bytes",
                "dram_peak_gbps", "iters", "warmup", "warmup_ms",
                "spin_us", "alibi", "kv_dtypes", "layouts", "pool_gb", "kv_bytes_note", "pct_copy_note", "pool_note", "rows", "cascade"]

    def setUp(self):
        if SAMPLE is None:
            self.skipTest("no sample file given (test_bench_table.py SAMPLE_JSON)")
        self.data = json.loads(pathlib.Path(SAMPLE).read_text())

    def test_schema(self):
        self.assertEqual(list(self.data.keys()), self.TOP_KEYS)
        self.assertEqual(len(self.data["rows"]), 3)
        for r in self.data["rows"]:
            self.assertEqual(list(r.keys()), self.ROW_KEYS)

    def test_recorded_pool_agrees_with_the_scripts_formula(self):
        for r in self.data["rows"]:
            recorded = bench_table.kv_pool(r, self.data)
            stripped = {k: v for k, v in r.items() if k not in ("pool_sets", "pool_bytes")}
            self.assertEqual(bench_table.kv_pool(stripped, self.data), recorded)
            self.assertEqual(recorded[0], 110)

    def test_table_from_the_writers_file(self):
        text = bench_table.table(self.data, "sample.json")
        row = [c.strip() for c in table_lines(text)[1].strip("|").split("|")]
        self.assertEqual(row[7], "1.85")
        self.assertEqual(row[8:], ["n/a", "**error**", "15.0 us<br>1118 GB/s (37%)"])

    def test_read_only_ceiling_is_stated(self):
        text = bench_table.table(self.data, "sample.json")
        self.assertIn("a kernel that only reads streams **3150 GB/s** (105% of the copy: the second ceiling)",
                      text.splitlines()[0])


    def test_latency_table(self):
        text = bench_table.latency_table(self.data, "sample.json")
        rows = table_lines(text)[1:]
        self.assertEqual(len(rows), 1, text)  # only the stage 8 row that has latency figures
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        self.assertEqual(cells[5:], ["fp16", "15.0 us", "21.5 us", "16.0 us", "15.2 us"])
        self.assertIn("a 50 us busy-wait before each launch", text)

    def test_paged_read_table(self):
        text = bench_table.paged_read_table(self.data, "sample.json")
        lines = table_lines(text)
        self.assertEqual(lines[0].split("|")[7:-1],
                         [" stage 8 ", " paged, cp.async ", " paged, bulk ", " contiguous ", " paged, held 700 ns ",
                          " paged bulk, held 700 ns "])
        rows = lines[1:]
        self.assertEqual(len(rows), 1, text)  # only the stage 8 row with the reads
        cells = [c.strip() for c in rows[0].strip("|").split("|")]
        # % of the sample's copy bandwidth, from its kv_bytes and each time.
        pct = lambda us: 100 * self.data["rows"][0]["kv_bytes"] / (us * 1e-6) / 1e9 / self.data["copy_gbps"]
        self.assertEqual(cells[4:], ["fp16", "16.8", f"15.0 us ({pct(15.0):.1f}%)", f"9.9 us ({pct(9.9):.1f}%)",
                                     f"10.0 us ({pct(10.0):.1f}%)", f"9.1 us ({pct(9.1):.1f}%)",
                                     f"11.4 us ({pct(11.4):.1f}%)", f"11.6 us ({pct(11.6):.1f}%)"])
        self.assertIn("the paged reads again, each warp held N ns", text)

    def test_paged_read_table_of_a_file_without_the_held_bulk_read(self):
        # Files written before held_bulk_us existed keep their table: no bulk column.
        for r in self.data["rows"]:
            r.pop("held_bulk_us", None)
        text = bench_table.paged_read_table(self.data, "sample.json")
        self.assertEqual(table_lines(text)[0].split("|")[7:-1],
                         [" stage 8 ", " paged, cp.async ", " paged, bulk ", " contiguous ", " paged, held 700 ns "])
        self.assertIn("the cp.async read again, each warp held N ns", text)


class SweepTable(unittest.TestCase):
    """The split sweep's file (bench_json_sample's second file) and its table."""

    SHAPE_KEYS = ["index", "dtype", "kv_dtype", "seqs", "heads", "kv_heads", "head_size", "block_size", "context",
                  "context_lens", "kv_bytes", "pool_sets", "pool_bytes", "units", "ctas_per_sm", "blocks_per_step",
                  "planned_splits", "planned_split_blocks", "planned_us", "best_splits", "best_us",
                  "planned_over_best", "status", "points"]

    def setUp(self):
        if SWEEP is None:
            self.skipTest("no sweep sample given (test_bench_table.py SAMPLE_JSON SWEEP_JSON)")
        self.data = json.loads(pathlib.Path(SWEEP).read_text())
        self.text = bench_table.split_sweep_table(self.data, "sweep.json")
        self.rows = table_lines(self.text)[1:]

    def test_schema_and_derived_figures(self):
        self.assertEqual(self.data["benchmark"], "split_sweep")
        self.assertEqual(len(self.data["shapes"]), 4)
        for r in self.data["shapes"]:
            self.assertEqual(list(r.keys()), self.SHAPE_KEYS)
            self.assertEqual(len(r["context_lens"]), r["seqs"])
            self.assertEqual(max(r["context_lens"]), r["context"])
        a, b = self.data["shapes"][:2]
        self.assertEqual((a["best_splits"], a["best_us"], a["planned_us"], a["planned_over_best"]), (2, 20, 20, 1))
        self.assertEqual((b["best_splits"], b["planned_us"]), (2, 22))
        self.assertAlmostEqual(b["planned_over_best"], 1.1)
        self.assertEqual((self.data["shapes_run"], self.data["shapes_within"]), (2, 1))
        self.assertEqual([p["xcheck_max_abs"] for p in a["points"]], [-1, 1e-4, 1e-4])

    def test_table(self):
        self.assertIn("within 5% of the fastest split count timed on **1 of 2** shapes", self.text)
        self.assertIn("median 1.100, worst 1.100", self.text)
        self.assertEqual(len(self.rows), 4)
        cells = [[c.strip() for c in r.strip("|").split("|")] for r in self.rows]
        self.assertEqual(cells[0][7:], ["2", "2: 20.0 us", "2: 20.0 us", "1.000", "1: 40.0, 2: 20.0, 4: 22.0"])
        self.assertEqual(cells[1][10], "1.100 (**over**)")
        self.assertEqual(cells[2][7:9], ["-", "not built"])
        self.assertEqual(cells[3][7:9], ["-", "**error**"])
        self.assertIn("- **error**: shape 3: `error: cudaErrorIllegalAddress`", self.text)


if __name__ == "__main__":
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        SAMPLE = sys.argv.pop(1)
    if len(sys.argv) > 1 and not sys.argv[1].startswith("-"):
        SWEEP = sys.argv.pop(1)
    unittest.main(verbosity=2)
