#!/usr/bin/env python3
"""Tests of the benchmark harness (stdlib unittest, no build needed):

    python3 bench/test_harness.py

Floor arithmetic against hand-computed values and docs' figures, suite loading and row
selection, RESULTS.md generation (newest record per row, deterministic, --check), and the
runner end to end on a fake train_reddit that writes a report shaped like the real one.
"""

import json
import lzma
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.dont_write_bytecode = True  # no __pycache__ beside the harness (it travels with the tree)
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import floors  # noqa: E402
import results  # noqa: E402
import suite as suites  # noqa: E402

# The Reddit-shaped graph of the docs' floor figures.
N, NNZ = 232_965, 114_500_000


class FloorTests(unittest.TestCase):
    def test_spmm_bytes_by_hand(self):
        # n=3, nnz=5, K=2, f32: indices 20 + values 20 + X and Y 48 + row pointers 16.
        self.assertEqual(floors.spmm_compulsory_bytes(3, 5, 2, 4, values=True), 104)
        self.assertEqual(floors.spmm_compulsory_bytes(3, 5, 2, 4, values=False), 84)
        self.assertEqual(floors.spmm_gather_bytes(5, 2, 4), 40)

    def test_sddmm_bytes_by_hand(self):
        # indices 20 + row pointers 16 + both operands 48 + scores 20; gather 5 * 2 * 4 (B_j
        # per non-zero, A_i resident over its row: gnn_kernels::verify::floor's count).
        self.assertEqual(floors.sddmm_compulsory_bytes(3, 5, 2, 4), 104)
        self.assertEqual(floors.sddmm_gather_bytes(5, 2, 4), 40)

    def test_reddit_figures(self):
        # The guide's K=128 figures: 1.16 GB f32 with values, 0.70 GB without, 0.58 GB bf16
        # without; gather 58.6 GB f32 (nnz K s); 0.35 ms at 3.35 TB/s, 1.78 ms at 33 TB/s.
        self.assertAlmostEqual(floors.spmm_compulsory_bytes(N, NNZ, 128, 4, True) / 1e9, 1.16, delta=0.01)
        self.assertAlmostEqual(floors.spmm_compulsory_bytes(N, NNZ, 128, 4, False) / 1e9, 0.70, delta=0.01)
        self.assertAlmostEqual(floors.spmm_compulsory_bytes(N, NNZ, 128, 2, False) / 1e9, 0.58, delta=0.01)
        self.assertEqual(floors.spmm_gather_bytes(NNZ, 128, 4), 58_624_000_000)
        f = floors.floors(floors.spmm_work(N, NNZ, 128, 4), floors.Rates(3.35e12, 33e12, 7e12), 8.0)
        self.assertAlmostEqual(f["floor_ms"]["hbm"], 0.345, delta=0.001)
        self.assertAlmostEqual(f["floor_ms"]["gather_l1"], 1.776, delta=0.001)
        self.assertAlmostEqual(f["floor_ms"]["gather_l2"], 8.375, delta=0.001)
        # An 8.0 ms kernel: 4.5x the L1 gather floor, at 0.96x the L2 one (L2-bound).
        self.assertAlmostEqual(f["distance"]["gather_l1"], 8.0 / 1.776, delta=0.01)
        self.assertAlmostEqual(f["distance"]["gather_l2"], 0.955, delta=0.001)
        self.assertAlmostEqual(f["achieved_bytes_per_s"], f["bytes_moved"] / 8.0e-3)

    def test_missing_rates_give_no_floor(self):
        f = floors.floors(floors.Work(1000, 5000), floors.Rates(hbm=1e6), 2.0)
        self.assertEqual(f["floor_ms"], {"hbm": 1.0, "gather_l1": None, "gather_l2": None})
        self.assertEqual(f["distance"], {"hbm": 2.0, "gather_l1": None, "gather_l2": None})
        self.assertEqual(f["achieved_bytes_per_s"], 500_000)

    def test_epoch_widths(self):
        w = floors.epoch_spmm_widths
        # Ours: GCN aggregates at min(in, out); the cache drops the first layer's products.
        self.assertEqual(w("ours", "gcn", 2, 602, 128, 41, False), [128, 128, 41, 41])
        self.assertEqual(w("ours", "gcn", 2, 602, 128, 41, True), [41, 41])
        self.assertEqual(w("ours", "gcn", 4, 602, 256, 41, True), [256, 256, 256, 256, 41, 41])
        self.assertEqual(w("ours", "gcn", 4, 602, 256, 41, False), [256, 256] + [256, 256, 256, 256, 41, 41])
        self.assertEqual(w("ours", "sage_mean", 2, 602, 128, 41, True), [41, 41])
        # A first layer that widens aggregates its input first: no backward product there.
        self.assertEqual(w("ours", "gcn", 2, 16, 64, 4, False), [16, 4, 4])
        # PyG: GCNConv transforms first everywhere, SAGEConv aggregates first everywhere.
        self.assertEqual(w("pyg", "gcn", 2, 602, 128, 41, False), [128, 128, 41, 41])
        self.assertEqual(w("pyg", "sage", 2, 602, 128, 41, False), [602, 128, 128])
        self.assertEqual(w("tgcn", "gcn", 4, 602, 256, 41, False), [256] * 6 + [41, 41])
        self.assertIsNone(w("ours", "gat", 2, 602, 64, 41, False))
        self.assertIsNone(w("tgcn", "sage", 2, 602, 128, 41, False))

    def test_epoch_work_sums_spmms(self):
        work = floors.epoch_work(N, NNZ, [41, 41], 2, values=True)
        one = floors.spmm_work(N, NNZ, 41, 2, values=True)
        self.assertEqual(work.compulsory, 2 * one.compulsory)
        self.assertEqual(work.gather, 2 * one.gather)

    def test_unknown_precision(self):
        with self.assertRaises(ValueError):
            floors.element_bytes("f64")


class MachineTests(unittest.TestCase):
    def test_gpu_names_and_rates(self):
        import run
        table = run.load_machines(os.path.join(HERE, "machines.toml"))
        h100 = {"name": "NVIDIA H100 80GB HBM3", "driver": "580.1", "memory": "81559 MiB"}
        name, rates = run.identify_machine([h100, h100], table)
        self.assertEqual((name, rates["hbm"], rates["l1"], rates["l2"]), ("h100x2", 3.35e12, 33e12, 9e12))
        name, rates = run.identify_machine([{"name": "NVIDIA H200", "driver": "", "memory": ""}], table)
        self.assertEqual((name, rates["hbm"]), ("h200", 4.8e12))
        name, rates = run.identify_machine([{"name": "NVIDIA A100-SXM4-80GB", "driver": "", "memory": ""}], table)
        self.assertEqual((name, rates["hbm"]), ("nvidia-a100-sxm4-80gb", None))

    def test_versions(self):
        import run
        self.assertTrue(run.version_matches("2.11.0+cu130", "2.11"))
        self.assertTrue(run.version_matches("2.8.0.post1", "2.8"))
        self.assertFalse(run.version_matches("2.1.0", "2.11"))
        self.assertFalse(run.version_matches(None, "2.8"))

    def test_busy_gpus(self):
        import run
        # nvidia-smi's CSV as the x4 host printed it during the 2026-11-27 scale-4 suite (GPU 1
        # held ~59 GiB by another process) and idle (GPU 0).
        gpus = run.parse_occupancy(
            "0, GPU-aaa, 1, 0\n1, GPU-bbb, 60825, 97\nnot, a, gpu, line\n",
            "GPU-bbb, 4242, /usr/bin/python3, 60818\nGPU-zzz, 1, gone, 5\n")
        self.assertEqual([g["index"] for g in gpus], [0, 1])
        self.assertEqual(gpus[1]["apps"], [{"pid": 4242, "name": "/usr/bin/python3", "used_mib": 60818}])
        busy = run.busy_gpus(gpus)
        self.assertEqual([g["index"] for g in busy], [1])
        note = run.busy_note(busy)
        self.assertIn("GPU 1: 60825 MiB in use, 97 % busy (pid 4242 python3 60818 MiB)", note)
        # A compute process marks a GPU busy whatever its memory; nothing known: nothing busy.
        quiet = run.parse_occupancy("0, GPU-aaa, 500, 0\n", "GPU-aaa, 7, x, 499\n")
        self.assertEqual(len(run.busy_gpus(quiet)), 1)
        self.assertEqual(run.busy_gpus(run.parse_occupancy("0, GPU-aaa, 500, 3\n", "")), [])
        self.assertEqual(run.busy_gpus(None), [])


class SuiteTests(unittest.TestCase):
    def load(self, name):
        return suites.load(os.path.join(HERE, "suites", name + ".toml"))

    def test_every_suite_loads(self):
        names = sorted(f[:-5] for f in os.listdir(os.path.join(HERE, "suites")) if f.endswith(".toml"))
        self.assertTrue({"headline", "spmm", "sddmm", "cpu-smoke"} <= set(names))
        for n in names:
            s = self.load(n)
            self.assertTrue(s.measurements, n)
            for r in s.runs:
                self.assertTrue(r.measurements, f"{n}: run {r.name} yields nothing")

    def test_headline_rows(self):
        s = self.load("headline")
        ids = {m.id for m in s.measurements}
        for want in ("gcn-2x128-f32-input-cache-train-rows/ours",
                     "gcn-2x128-bf16-no-input-cache-train-rows/ours",
                     "gcn-2x128-bf16-no-input-cache-no-train-rows/ours",
                     "gcn-2x128-f32/pyg", "gcn-2x128-bf16/tgcn", "sage-2x128-bf16/ours",
                     "sage-2x128-f32/pyg", "gcn-4x256-bf16/ours", "gcn-4x256-bf16/tgcn",
                     "gat-2x64-bf16/ours", "gat-2x64-bf16/pyg"):
            self.assertIn(want, ids)
        self.assertEqual(s.versions, {"torch": "2.11", "torch_geometric": "2.8"})
        # Each variant turns off what it leaves out.
        args = {m.id: r.args for r in s.runs for m in r.measurements}
        self.assertNotIn("--no-train-rows", args["gcn-2x128-bf16-input-cache-train-rows/ours"])
        self.assertIn("--no-input-cache", args["gcn-2x128-bf16-no-input-cache-train-rows/ours"])
        self.assertNotIn("--no-train-rows", args["gcn-2x128-bf16-no-input-cache-train-rows/ours"])
        self.assertIn("--no-train-rows", args["gcn-2x128-bf16-no-input-cache-no-train-rows/ours"])
        self.assertNotIn("--no-train-rows", args["sage-2x128-bf16/ours"])
        self.assertIn("--no-train-rows", args["gat-2x64-bf16/ours"])
        # The peers run first, one process per epoch count and repetition (60 epochs; GAT's 20),
        # same_graph.py's GAT under its own name.
        peers = [r for r in s.runs if r.kind == "same-graph-peers"]
        self.assertEqual([r.kind for r in s.runs[:2]], ["same-graph-peers"] * 2)
        self.assertEqual(sorted(r.epochs for r in peers), [20, 60])
        self.assertIn("gat,gat_bf16", " ".join(next(r for r in peers if r.epochs == 20).args))

    def test_only_a_case(self):
        s = self.load("headline").select(["gcn-4x256"])
        self.assertEqual(sorted(m.id for m in s.measurements),
                         ["gcn-4x256-bf16/ours", "gcn-4x256-bf16/pyg", "gcn-4x256-bf16/tgcn"])
        peers = [r for r in s.runs if r.kind == "same-graph-peers"][0]
        self.assertIn("gcn_4x256_bf16,tgcn_4x256_bf16", " ".join(peers.args))
        with self.assertRaises(suites.SuiteError):
            self.load("headline").select(["no-such-row"])

    def test_only_torch_sddmm_keeps_the_dump(self):
        s = self.load("sddmm").select(["*/torch"])
        self.assertEqual([r.kind for r in s.runs], ["sddmm", "torch-sddmm"])

    def test_dispatch_rows_and_args(self):
        s = self.load("dispatch")
        (run,) = s.runs
        self.assertEqual((run.kind, run.binary), ("graphs", "bench_graphs"))
        graphs = run.args[run.args.index("--graphs") + 1].split(",")
        self.assertGreaterEqual(len(graphs), 20)
        self.assertTrue({"cora", "reddit@1", "mesh-4M", "sparse-2.5M", "reddit@1 louvain"} <= set(graphs))
        self.assertEqual(run.args[run.args.index("--k") + 1], "1,2,4,8,16,32,64,128,256,602")
        self.assertEqual(run.args[run.args.index("--precision") + 1], "f32,bf16")
        self.assertIn("--dispatch-only", run.args)
        self.assertEqual(run.args[-4:], ["--out", "{scratch}/bench-graphs", "--json", "{json}"])
        self.assertEqual(len(s.measurements), len(graphs) * 10 * 2)
        m = {x.id: x for x in s.measurements}["dispatch-reddit@1-rcm-k602-bf16/ours"]
        self.assertEqual((m.spec["graph"], m.k, m.precision, m.kind), ("reddit@1 rcm", 602, "bf16", "graphs"))
        # --only one graph: bench_graphs builds only it, at every width and precision.
        r = s.select(["dispatch-reddit@1-rcm-*"])
        self.assertEqual(len(r.measurements), 20)
        self.assertEqual(r.runs[0].args[:2], ["--graphs", "reddit@1 rcm"])
        self.assertIn("--dispatch-only", r.runs[0].args)

    def test_graphs_case_checks(self):
        with tempfile.TemporaryDirectory() as d:
            def load(graph_flags, case):
                p = os.path.join(d, "g.toml")
                with open(p, "w") as f:
                    f.write(f'repetitions = 1\n[graph]\nsource = "generated"\nflags = {graph_flags}\n'
                            f'[[case]]\nname = "g"\nkind = "graphs"\nk = [8]\n{case}\n')
                return suites.load(p)
            self.assertEqual(len(load("[]", 'graphs = ["cora", "reddit@1"]').measurements), 2)
            with self.assertRaisesRegex(suites.SuiteError, "builds its own graphs"):
                load('["--scale", "1"]', 'graphs = ["cora"]')
            with self.assertRaisesRegex(suites.SuiteError, "distinct"):
                load("[]", 'graphs = ["cora", "cora"]')
            with self.assertRaisesRegex(suites.SuiteError, "must name"):
                load("[]", "graphs = []")
            with self.assertRaisesRegex(suites.SuiteError, "peer"):
                load("[]", 'graphs = ["cora"]\npeers = ["cusparse"]')

    def test_spmm_bf16_asks_for_the_kernel_table(self):
        s = self.load("spmm")
        self.assertIn("--kernels", s.runs[0].args)
        self.assertNotIn("spmm-k128-bf16/cusparse", {m.id for m in s.measurements})

    def test_bad_suite_names_its_error(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "bad.toml")
            with open(p, "w") as f:
                f.write('repetitions = 1\n[graph]\nsource = "generated"\nflags = []\n'
                        '[[case]]\nname = "x"\nkind = "train"\nmodel = "gcn"\nlayers = 2\nhidden = 8\n'
                        'epochs = 3\npeers = ["pyg"]\n')
            with self.assertRaisesRegex(suites.SuiteError, "same-graph"):
                suites.load(p)


def fake_record(root, suite, rec, started, rows, machine="h100"):
    path = os.path.join(root, suite, rec)
    os.makedirs(path)
    with open(os.path.join(path, "summary.json"), "w") as f:
        json.dump({"suite": suite, "record": rec, "machine": machine, "started": started, "git": "a" * 40,
                   "rates": {"hbm": 3.35e12, "l1": 33e12, "l2": 7e12, "source": "test"}, "rows": rows}, f)


def fake_graphs_row(graph, k, prec, pick, regret, nnz):
    name = f"dispatch-{graph.replace(' ', '-')}-k{k}-{prec}"
    return {"id": f"{name}/ours", "name": name, "case": "dispatch", "kind": "graphs", "model": "spmm",
            "precision": prec, "shortcuts": [], "peer": "ours", "k": k, "median_ms": 1.0, "repetitions": 1,
            "repetitions_wanted": 1, "status": "ok", "graph": graph, "nodes": 100, "nnz": nnz,
            "info": {"dispatch": pick, "regret": regret}}


def fake_row(rid, ms, peer="ours", status="ok"):
    name = rid.split("/")[0]
    return {"id": rid, "name": name, "case": name.rsplit("-", 1)[0], "kind": "train", "model": "gcn 2x128",
            "precision": "f32", "shortcuts": [], "peer": peer, "k": None, "median_ms": ms, "repetitions": 3,
            "repetitions_wanted": 3, "status": status, "achieved_bytes_per_s": 1e12,
            "distance": {"hbm": 2.0, "gather_l1": 3.0, "gather_l2": 1.5}}


class ResultsTests(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.root = os.path.join(self.d, "records")
        fake_record(self.root, "headline", "h100-2026-01-01", "2026-01-01T10:00:00Z",
                    [fake_row("a-f32/ours", 10.0), fake_row("b-f32/ours", 20.0)])
        fake_record(self.root, "headline", "h100-2026-01-02", "2026-01-02T10:00:00Z",
                    [fake_row("a-f32/ours", 11.0), fake_row("b-f32/ours", None, status="failed")])

    def tearDown(self):
        shutil.rmtree(self.d)

    def test_newest_record_per_row(self):
        text = results.render(self.root, self.d)
        self.assertIn("| a-f32 | gcn 2x128 | f32 | none | ours | 11.00 | 3 |", text)
        self.assertIn("[h100-2026-01-02](records/headline/h100-2026-01-02/)", text)
        # b failed in the newer record: the older number stays.
        self.assertIn("| b-f32 | gcn 2x128 | f32 | none | ours | 20.00 | 3 |", text)
        self.assertIn("[h100-2026-01-01](records/headline/h100-2026-01-01/)", text)

    def test_deterministic_and_check(self):
        out = os.path.join(self.d, "RESULTS.md")
        self.assertEqual(results.render(self.root, self.d), results.render(self.root, self.d))
        self.assertEqual(results.main(["--records", self.root, "--output", out]), 0)
        self.assertEqual(results.main(["--records", self.root, "--output", out, "--check"]), 0)
        fake_record(self.root, "headline", "h100-2026-01-03", "2026-01-03T10:00:00Z", [fake_row("a-f32/ours", 9.0)])
        self.assertEqual(results.main(["--records", self.root, "--output", out, "--check"]), 1)

    def test_import_renames_a_taken_record(self):
        import tarfile
        src = os.path.join(self.d, "device")
        fake_record(src, "headline", "h100-2026-01-02", "2026-01-02T12:00:00Z", [fake_row("c-f32/ours", 5.0)])
        pack = os.path.join(self.d, "rec.tar.gz")
        with tarfile.open(pack, "w:gz") as t:
            t.add(os.path.join(src, "headline", "h100-2026-01-02"), arcname="headline/h100-2026-01-02")
        out = os.path.join(self.d, "RESULTS.md")
        self.assertEqual(results.main(["--records", self.root, "--output", out, "--import", pack]), 0)
        with open(os.path.join(self.root, "headline", "h100-2026-01-02-2", "summary.json")) as f:
            self.assertEqual(json.load(f)["record"], "h100-2026-01-02-2")
        with open(os.path.join(self.root, "headline", "h100-2026-01-02", "summary.json")) as f:
            self.assertEqual(len(json.load(f)["rows"]), 2)  # the earlier record is untouched
        with open(out) as f:
            self.assertIn("| c-f32 | gcn 2x128 | f32 | none | ours | 5.000 |", f.read())

    def test_graphs_suite_renders_as_matrices(self):
        fake_record(self.root, "dispatch", "h100-2026-01-05", "2026-01-05T10:00:00Z", [
            fake_graphs_row("reddit@1 rcm", 1, "f32", "narrow", 1.0, 114_543_559),
            fake_graphs_row("reddit@1 rcm", 602, "f32", "ge", 1.3, 114_543_559),
            fake_graphs_row("cora", 1, "f32", "hp", 1.0, 13_264),
            fake_graphs_row("cora", 1, "bf16", "hp", 1.05, 13_264)])
        text = results.render(self.root, self.d)
        section = text[text.index("## dispatch"):]
        self.assertIn("### f32\n\n| graph | nnz | K=1 | K=602 |\n|---|---:|---|---|\n"
                      "| cora | 13,264 | hp 1.00x | - |\n| reddit@1 rcm | 114,543,559 | narrow 1.00x | ge 1.30x |",
                      section)
        self.assertIn("fastest in 2 of 3 cases and more than 10 % slower in 1; regret geometric mean 1.091, "
                      "worst 1.30x (reddit@1 rcm, K=602).", section)
        self.assertIn("### bf16\n\n| graph | nnz | K=1 |\n|---|---:|---|\n| cora | 13,264 | hp 1.05x |", section)
        self.assertIn("- [`h100-2026-01-05`](records/dispatch/h100-2026-01-05/): git aaaaaaaaaaaa", section)
        # The other suites keep their row tables.
        self.assertIn("| a-f32 | gcn 2x128 | f32 | none | ours | 11.00 | 3 |", text)

    def test_stale(self):
        fake_record(self.root, "headline", "h100-2026-01-03", "2026-01-03T10:00:00Z",
                    [fake_row("a-f32/ours", 9.0), fake_row("b-f32/ours", 19.0)])
        self.assertEqual(results.stale(self.root), ["headline/h100-2026-01-01", "headline/h100-2026-01-02"])


# A stand-in for train_reddit: takes the flags the suites pass and writes a report with the
# fields the runner reads. FAKE_FAIL_MODEL=<model> makes that model's runs exit 3.
FAKE_TRAIN = textwrap.dedent("""\
    #!/usr/bin/env python3
    import json, os, sys
    a = sys.argv[1:]
    def val(flag, default=None):
        return a[a.index(flag) + 1] if flag in a else default
    model = val("--model", "gcn")
    if os.environ.get("FAKE_FAIL_MODEL") == model:
        print("failing on purpose"); sys.exit(3)
    kind = {"sage": "sage_mean"}.get(model, model)
    nodes, edges = 2330, 40000
    if "--data-dir" in a:
        with open(os.path.join(val("--data-dir"), "facts.json")) as f:
            g = json.load(f)
        # same_graph.py's facts say nnz, a saved graph's (FAKE_DIST) edges.
        nodes, edges = g["nodes"], g.get("nnz", g.get("edges"))
    # Reddit's split: every node labelled (66 / 10 / 24 %); a saved (papers-shaped) graph:
    # 1.2 % labelled, so the output layer takes the labelled rows alone.
    split = {"train": nodes * 66 // 100, "val": nodes // 10}
    split["test"] = nodes - split["train"] - split["val"]
    if "--data-dir" in a and "edges" in g:
        split = {"train": nodes // 100, "val": nodes // 1000, "test": nodes // 1000}
    doc = {"dataset_summary": {"nodes": nodes, "edges": edges, "features": 602, "classes": 41,
                               **split},
           "gnn": {"model": {"kind": kind, "layers": int(val("--layers")), "in_dim": 602,
                             "hidden": int(val("--hidden")), "out_dim": 41, "input_dropout": 0.0,
                             "activation": "relu", "maxk_after_first": False},
                   "report": {"epoch_ms_median": 2.0 if "--no-input-cache" in a else 1.0,
                              "test_acc": 0.5, "peak_allocated_bytes": None}},
           "train": {"precision": val("--precision", "f32"),
                     "cache_input_aggregate": "--no-input-cache" not in a,
                     "labelled_output": "--all-output-rows" not in a,
                     "train_rows_output": "--no-train-rows" not in a}}
    with open(val("--json"), "w") as f:
        json.dump(doc, f)
    print("ok")
    """)


# A stand-in for same_graph.py: prints its graph line, writes the files' facts into --dir and,
# without --skip-pyg, $OUT/same_graph_pyg.json for every model of --models.
FAKE_SAME_GRAPH = textwrap.dedent("""\
    import json, os, sys
    a = sys.argv[1:]
    def val(flag, default=None):
        return a[a.index(flag) + 1] if flag in a else default
    graph = {"nodes": 5000, "nnz": 250000, "max_deg": 300, "train": 3300, "val": 500, "test": 1200}
    os.makedirs(val("--dir"), exist_ok=True)
    with open(os.path.join(val("--dir"), "facts.json"), "w") as f:
        json.dump(graph, f)
    res = {"device": "fake", "torch": "2.11.0+cu130", "graph": graph}
    print(json.dumps(res), flush=True)
    if "--skip-pyg" in a:
        sys.exit(0)
    res["pyg"] = "2.8.0"
    res["pyg_runs"] = {m: {"epoch_ms_median": 100.0 + i, "test_acc": 1.0, "peak_GiB": 9.5}
                       for i, m in enumerate(val("--models").split(","))}
    with open(os.path.join(os.environ["OUT"], "same_graph_pyg.json"), "w") as f:
        json.dump(res, f)
    """)

# Stand-ins for bench_spmm and bench_sddmm: their JSON documents' shape.
FAKE_SPMM = textwrap.dedent("""\
    #!/usr/bin/env python3
    import json, sys
    a = sys.argv[1:]
    ks = [int(k) for k in a[a.index("--k") + 1].split(",")]
    rows = [{"k": k, "ours_weighted_sum_ms": k / 16, "ours_mean_ms": k / 16, "cusparse_default_ms": k / 4,
             "cusparse_csr_alg2_ms": k / 5, "speedup_vs_best_cusparse": 3.2, "rel_err_vs_cusparse": 1e-7,
             "sweep": []} for k in ks]
    kernels = [{"k": k, "dtype": d, "ge_ms": 1.0, "narrow_ms": 1.0, "hp_ms": 1.0,
                "auto_ms": k / 32 if d == "bf16" else k / 16} for k in ks for d in ("f32", "bf16")]
    doc = {"graph": {"name": "synthetic-reddit", "nodes": 1000, "nnz": 50000, "max_row": 99},
           "reps": 20, "rows": rows, "kernels": kernels if "--kernels" in a else [], "column_blocks": []}
    json.dump(doc, open(a[a.index("--json") + 1], "w"))
    """)
FAKE_GRAPHS = textwrap.dedent("""\
    #!/usr/bin/env python3
    import json, sys
    a = sys.argv[1:]
    def val(flag):
        return a[a.index(flag) + 1]
    rows = [{"graph": g, "nodes": 1000, "nnz": 50000 + i, "k": int(k), "precision": p,
             "auto_ms": int(k) / 10, "dispatch": "ge", "best": "hp", "regret": 1.25, "pick_is_best": False,
             "ge_ms": int(k) / 10, "narrow_ms": None, "hp_ms": int(k) / 12.5}
            for i, g in enumerate(val("--graphs").split(",")) for k in val("--k").split(",")
            for p in val("--precision").split(",")]
    json.dump({"rows": rows, "dispatch_only": "--dispatch-only" in a}, open(val("--json"), "w"))
    """)
FAKE_SDDMM = textwrap.dedent("""\
    #!/usr/bin/env python3
    import json, sys
    a = sys.argv[1:]
    ks = [int(k) for k in a[a.index("--k") + 1].split(",")]
    rows = [{"k": k, "hp_ms": k / 20, "hp_npw": "32", "rows_ms": k / 10, "cusparse_ms": k / 18} for k in ks]
    doc = {"graph": {"nodes": 1000, "nnz": 50000, "max_row": 99, "scale": 1.0}, "reps": 20, "rows": rows}
    json.dump(doc, open(a[a.index("--json") + 1], "w"))
    """)


# A stand-in for the Python package, for bench/peers/python_train.py (the `python` train peer):
# `load` reads the facts same_graph.py's stand-in wrote, `train` calls `on_epoch` for every
# epoch and returns a report of the fields the script reads; its epoch is 1 % slower than
# FAKE_TRAIN's.
FAKE_GNN = textwrap.dedent("""\
    import json, os
    __version__ = "0.0.0"
    CUDA = False
    class Data:
        def __init__(self, g):
            self.num_nodes, self.num_edges, self.num_features, self.num_classes = g["nodes"], g["nnz"], 602, 41
            self.train_idx, self.val_idx, self.test_idx = [0] * g["train"], [0] * g["val"], [0] * g["test"]
    def load(path, name=None, split_seed=0):
        with open(os.path.join(path, "facts.json")) as f:
            return Data(json.load(f))
    class Model:
        def save(self, path):
            open(path + ".safetensors", "w").close()
    def train(data, model, *, layers, hidden, epochs, precision, input_cache, on_epoch, eval_every, **kw):
        history = []
        for e in range(1, epochs + 1):
            log = {"epoch": e, "epoch_ms": 0.0, "loss": 1.0 / e, "val_acc": 0.5 if e % eval_every == 0 else None}
            on_epoch(log)
            history.append({"epoch": e, "loss": log["loss"]})
        kind = {"sage": "sage_mean"}.get(model, model)
        cfg = {"kind": kind, "layers": layers, "in_dim": 602, "hidden": hidden, "out_dim": 41,
               "input_dropout": kw["input_dropout"], "activation": "relu", "maxk_after_first": False}
        base = 1.0 if input_cache else 2.0
        report = {"dataset": "reddit", "device": "fake", "graph_prep_s": 0.1, "kernels_used": {}, "model": cfg,
                  "train": {"precision": precision, "cache_input_aggregate": input_cache, "warmup": 3},
                  "breakdown_rows": [], "history": history, "epoch_ms_median": base * 1.01,
                  "test_acc": 0.5, "peak_allocated_bytes": None}
        return Model(), report
    """)


def write_exe(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


class GpuSuiteTests(unittest.TestCase):
    """The GPU suites' runs and readers, on stand-ins for the binaries and the peer script."""

    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.bin = os.path.join(self.d, "bin")
        self.anchors = os.path.join(self.d, "anchors")
        os.makedirs(self.bin)
        os.makedirs(self.anchors)
        write_exe(os.path.join(self.bin, "train_reddit"), FAKE_TRAIN)
        write_exe(os.path.join(self.bin, "bench_spmm"), FAKE_SPMM)
        write_exe(os.path.join(self.bin, "bench_sddmm"), FAKE_SDDMM)
        write_exe(os.path.join(self.bin, "bench_graphs"), FAKE_GRAPHS)
        with open(os.path.join(self.anchors, "same_graph.py"), "w") as f:
            f.write(FAKE_SAME_GRAPH)
        self.out = os.path.join(self.d, "records")

    def tearDown(self):
        shutil.rmtree(self.d)

    def run_suite(self, name, *extra, env=None):
        p = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), name, "--bin-dir", self.bin,
                            "--anchors-dir", self.anchors, "--out", self.out, "--machine", "fakegpu",
                            "--reps", "1", "--any-versions", *extra],
                           capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.stdout = p.stdout
        (rec,) = os.listdir(os.path.join(self.out, name))
        with open(os.path.join(self.out, name, rec, "summary.json")) as f:
            self.summary = json.load(f)
        return {r["id"]: r for r in self.summary["rows"]}, os.path.join(self.out, name, rec)

    def test_python_overhead(self):
        """The `python` train peer: bench/peers/python_train.py on a stand-in package, right
        after each train_reddit run, and the overhead the runner derives."""
        site = os.path.join(self.d, "site", "gnn")
        os.makedirs(site)
        with open(os.path.join(site, "__init__.py"), "w") as f:
            f.write(FAKE_GNN)
        rows, rec = self.run_suite("python-overhead", "--graph-dir", os.path.join(self.d, "g"),
                                   env={"PYTHONPATH": os.path.dirname(site)})
        self.assertEqual(sorted(rows), ["gcn-2x128-bf16/ours", "gcn-2x128-bf16/python",
                                        "gcn-2x128-f32/ours", "gcn-2x128-f32/python"])
        py = rows["gcn-2x128-bf16/python"]
        self.assertEqual((py["median_ms"], py["spmm_widths"], py["status"]), (1.01, [41, 41], "ok"))
        self.assertIsNotNone(py["info"]["between_ms"])
        over = {e["name"]: e for e in self.summary["python_overhead"]}
        self.assertEqual(sorted(over), ["gcn-2x128-bf16", "gcn-2x128-f32"])
        self.assertAlmostEqual(over["gcn-2x128-f32"]["epoch_overhead_pct"], 1.0, places=6)
        self.assertGreaterEqual(over["gcn-2x128-f32"]["outside_step_pct"], 0.0)
        self.assertIn("Python-side overhead", self.stdout)
        with open(os.path.join(rec, "command.txt")) as f:
            commands = [l for l in f.read().splitlines() if not l.startswith("#")]
        # Each python run right after its train_reddit run, with the same flags.
        self.assertIn("train_reddit", commands[1])
        self.assertIn("bench/peers/python_train.py", commands[2])
        self.assertEqual(commands[1].split("train_reddit", 1)[1].replace("-r1.json", ""),
                         commands[2].split("python_train.py", 1)[1].replace("-python-r1.json", ""))
        # A suite may not ask the python peer of a case without same-graph files.
        with tempfile.TemporaryDirectory() as tmp:
            p = os.path.join(tmp, "bad.toml")
            with open(p, "w") as f:
                f.write('repetitions = 1\n[graph]\nsource = "generated"\nflags = []\n[[case]]\nname = "x"\n'
                        'kind = "train"\nmodel = "gcn"\nlayers = 2\nhidden = 8\nepochs = 2\npeers = ["python"]\n')
            with self.assertRaisesRegex(suites.SuiteError, "same-graph"):
                suites.load(p)

    def test_headline_case(self):
        rows, rec = self.run_suite("headline", "--only", "gcn-2x128", "--graph-dir", os.path.join(self.d, "g"))
        variants = ["input-cache-train-rows", "no-input-cache-train-rows", "no-input-cache-no-train-rows"]
        self.assertEqual(sorted(rows), sorted([f"gcn-2x128-{p}-{v}/ours" for p in ("f32", "bf16") for v in variants]
                                              + [f"gcn-2x128-{p}/{peer}" for p in ("f32", "bf16")
                                                 for peer in ("pyg", "tgcn")]))
        self.assertEqual(rows["gcn-2x128-bf16-input-cache-train-rows/ours"]["shortcuts"],
                         ["input-cache", "train-rows"])
        self.assertEqual(rows["gcn-2x128-bf16-no-input-cache-no-train-rows/ours"]["shortcuts"], [])
        self.assertTrue(all(r["status"] == "ok" for r in rows.values()))
        # The models in the order same_graph.py was given them: gcn_2x128 first.
        self.assertEqual(rows["gcn-2x128-f32/pyg"]["median_ms"], 100.0)
        pyg = rows["gcn-2x128-bf16/pyg"]
        self.assertEqual(pyg["spmm_widths"], [128, 128, 41, 41])
        self.assertEqual(pyg["bytes_moved"], floors.epoch_work(5000, 250000, [128, 128, 41, 41], 2, True).compulsory)
        ours = rows["gcn-2x128-bf16-input-cache-train-rows/ours"]
        self.assertEqual((ours["nodes"], ours["nnz"], ours["spmm_widths"]), (5000, 250000, [41, 41]))
        # The train rows' output layer: its two SpMMs over the train split's share (66 %) of the
        # non-zeros.
        self.assertEqual(ours["bytes_moved"], floors.epoch_work(5000, 165000, [41, 41], 2, True).compulsory)
        every = rows["gcn-2x128-bf16-no-input-cache-no-train-rows/ours"]
        self.assertEqual(every["bytes_moved"], floors.epoch_work(5000, 250000, [128, 128, 41, 41], 2, True).compulsory)
        self.assertTrue(os.path.isfile(os.path.join(rec, "graph.json")))
        with open(os.path.join(rec, "command.txt")) as f:
            commands = f.read()
        self.assertIn("--models gcn_2x128,tgcn_2x128,gcn_2x128_bf16,tgcn_2x128_bf16", commands)
        self.assertIn("--skip-pyg", commands)

    def test_gat_peer_has_no_floors(self):
        # same_graph.py's GAT: a time and its facts, no SpMM widths, so no floors (no error).
        rows, _ = self.run_suite("gat-sparse", "--graph-dir", os.path.join(self.d, "g"))
        for prec, ms in (("f32", 100.0), ("bf16", 101.0)):
            pyg = rows[f"gat-2x64-{prec}/pyg"]
            self.assertEqual((pyg["status"], pyg["median_ms"]), ("ok", ms))
            self.assertIsNone(pyg["spmm_widths"])
            self.assertIsNone(pyg["bytes_moved"])

    def test_spmm(self):
        rows, _ = self.run_suite("spmm")
        self.assertEqual(len(rows), 18)
        self.assertEqual(rows["spmm-k128-f32/ours"]["median_ms"], 8.0)
        self.assertEqual(rows["spmm-k128-bf16/ours"]["median_ms"], 4.0)
        self.assertEqual(rows["spmm-k128-f32/cusparse"]["median_ms"], 128 / 5)  # the faster algorithm
        self.assertEqual(rows["spmm-k128-bf16/ours"]["bytes_moved"], floors.spmm_compulsory_bytes(1000, 50000, 128, 2))
        self.assertIsNone(rows["spmm-k16-f32/ours"]["distance"]["gather_l1"])  # no GPU here: no cache rates

    def test_dispatch_graphs(self):
        rows, rec = self.run_suite("dispatch", "--only", "dispatch-cora-*,dispatch-reddit@1-rcm-k602-*")
        self.assertEqual(len(rows), 22)
        r = rows["dispatch-reddit@1-rcm-k602-bf16/ours"]
        self.assertEqual((r["median_ms"], r["graph"], r["nnz"], r["status"]), (60.2, "reddit@1 rcm", 50001, "ok"))
        self.assertEqual((r["info"]["dispatch"], r["info"]["best"], r["info"]["regret"]), ("ge", "hp", 1.25))
        self.assertEqual(r["bytes_moved"], floors.spmm_compulsory_bytes(1000, 50001, 602, 2))
        self.assertEqual(rows["dispatch-cora-k1-f32/ours"]["gather_bytes"], floors.spmm_gather_bytes(50000, 1, 4))
        with open(os.path.join(rec, "command.txt")) as f:
            commands = f.read()
        self.assertIn("--graphs 'cora,reddit@1 rcm'", commands)
        text = results.render(self.out, self.d)
        self.assertIn("| reddit@1 rcm | 50,001 | - | - | - | - | - | - | - | - | - | ge 1.25x |", text)

    def test_sddmm_without_torch(self):
        rows, _ = self.run_suite("sddmm", "--only", "*/ours,*/cusparse")
        self.assertEqual(len(rows), 10)
        self.assertAlmostEqual(rows["sddmm-k64-f32/cusparse"]["median_ms"], 64 / 18, places=4)
        self.assertEqual(rows["sddmm-k64-f32/ours"]["gather_bytes"], floors.sddmm_gather_bytes(50000, 64, 4))


# A real train_dist report (bench/testdata: `train_dist --cpu --ranks 2 --scale 0.05 --epochs 5
# --partition metis`, trimmed to the fields the runner reads).
DIST_FIXTURE = os.path.join(HERE, "testdata", "train_dist-cpu-metis-p2.json")

# A stand-in for train_dist: the graph step (--save-graph: writes the file, prints the summary
# line) and training runs (--data-dir): the fixture's report reshaped to the flags (model, ranks,
# partition, precision), with GPU-like peaks and an epoch of 100 ms / ranks.
FAKE_DIST = textwrap.dedent("""\
    #!/usr/bin/env python3
    import copy, json, os, sys
    a = sys.argv[1:]
    def val(flag, default=None):
        return a[a.index(flag) + 1] if flag in a else default
    if "--save-graph" in a:
        out = val("--save-graph")
        os.makedirs(out, exist_ok=True)
        scale = float(val("--scale", "1"))
        nodes, edges = int(10000 * scale), int(500000 * scale)
        with open(os.path.join(out, "graph.gnncsr"), "wb") as f:
            f.write(b"x" * (100 + int(100 * scale)))
        with open(os.path.join(out, "facts.json"), "w") as f:
            json.dump({"nodes": nodes, "edges": edges, "name": "fake@%g" % scale}, f)
        print("generated fake@%g (seed 0): %d nodes, %d directed edges incl. self loops, 128 features, "
              "172 classes in 1.5 s" % (scale, nodes, edges))
        print("fake@%g: %d nodes, %d edges, 128 features, 172 classes, split 10/20/30" % (scale, nodes, edges))
        print("wrote %s/graph.gnncsr (0.00 GB) in 0.2 s; --data-dir %s loads it" % (out, out))
        sys.exit(0)
    if "--tcp-rendezvous" in a:
        # One rank of a multi-process run: every epoch a heartbeat file, and an "all-reduce"
        # that waits for every rank's; a rank gone longer than --comm-timeout ends this one
        # with train_dist's watchdog error. Rank 0 checkpoints; --resume continues from it.
        import time
        rank, world, port = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), os.environ["MASTER_PORT"]
        epochs, every, timeout = int(val("--epochs")), int(val("--checkpoint-every")), float(val("--comm-timeout"))
        stem = val("--checkpoint")
        beat = os.path.join(os.path.dirname(stem), "beat-" + port + "-%d")
        start, losses = 0, []
        if "--resume" in a:
            with open(val("--resume") + ".json") as f:
                st = json.load(f)
            start, losses = st["epoch"], st["losses"]
        for e in range(start + 1, epochs + 1):
            with open(beat % rank, "w") as f:
                f.write(str(e))
            t = time.time()
            while True:
                behind = []
                for q in range(world):
                    try:
                        with open(beat % q) as f:
                            v = int(f.read() or 0)
                    except (OSError, ValueError):
                        v = 0
                    if v < e:
                        behind.append(q)
                if not behind:
                    break
                if time.time() - t > timeout:
                    sys.stderr.write("Error: rank %d: all-reduce at epoch %d (gradient all-reduce) did not finish "
                                     "within %g s (waiting for rank %d); the communicator was aborted: a rank died "
                                     "or stalled\\n" % (rank, e, timeout, behind[0]))
                    sys.exit(1)
                time.sleep(0.005)
            losses.append(3.0 / (1 + e))
            print("  epoch %4d/%d  loss %.4f  acc train 0.500 val 0.500 test 0.500  10 ms/epoch"
                  % (e, epochs, losses[-1]), flush=True)
            if rank == 0 and e % every == 0:
                with open(stem + ".json.tmp", "w") as f:
                    json.dump({"epoch": e, "losses": losses}, f)
                os.replace(stem + ".json.tmp", stem + ".json")
            time.sleep(0.03)
        with open(val("--json")[:-len(".json")] + ".rank%d.json" % rank, "w") as f:
            json.dump({"loss_curve": losses, "test_acc": 0.5, "resumed_from": val("--resume")}, f)
        sys.exit(0)
    with open(os.environ["FAKE_DIST_FIXTURE"]) as f:
        doc = json.load(f)
    with open(os.path.join(val("--data-dir"), "facts.json")) as f:
        g = json.load(f)
    p = int(val("--ranks"))
    part = val("--partition")
    chosen = "range" if p == 1 or part == "auto" else part
    doc["dataset"].update(nodes=g["nodes"], edges=g["edges"], name=g["name"])
    doc["model"].update(kind={"sage": "sage_mean"}.get(val("--model"), val("--model")),
                        layers=int(val("--layers")), hidden=int(val("--hidden")))
    doc["train"]["precision"] = val("--precision")
    row = doc["partition"]["compared"][1 if chosen == "metis" else 0]
    doc["partition"].update(chosen=chosen, requested=part, parts=p,
                            compared=[dict(row, method=chosen, parts=p, halo=[row["halo"][0]] * p)])
    ranks = []
    for r in range(p):
        x = copy.deepcopy(doc["ranks"][r % 2])
        x.update(rank=r, epoch_ms_median=100.0 / p + r, peak_allocated_bytes=(r + 1) * 2**30,
                 halo=x["halo"] if p > 1 else 0)
        ranks.append(x)
    doc["ranks"] = ranks
    with open(val("--json"), "w") as f:
        json.dump(doc, f)
    print("ok")
    """)

DIST_SUITE = textwrap.dedent("""\
    description = "test"
    repetitions = 1
    [graph]
    source = "saved"
    dir = "GRAPHS"
    flags = ["--dataset", "papers100m", "--scale", "1", "--seed", "0"]
    [[case]]
    name = "gcn-3x8"
    kind = "dist"
    model = "gcn"
    layers = 3
    hidden = 8
    epochs = 4
    precisions = ["bf16"]
    ranks = [1, 2, 4]
    partitions = ["range", "metis"]
    flags = ["--nccl"]
    [[case]]
    name = "sage-3x8-small"
    kind = "dist"
    model = "sage"
    layers = 3
    hidden = 8
    epochs = 4
    precisions = ["bf16"]
    ranks = [4]
    graph = ["--dataset", "papers100m", "--scale", "0.1", "--seed", "0"]
    flags = ["--nccl"]
    """)


class DistTests(unittest.TestCase):
    """The dist kind: suite expansion, the report reader on a real report, the runner end to
    end on a stand-in (saved graphs made once and reused), and the scaling table."""

    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.bin = os.path.join(self.d, "bin")
        os.makedirs(self.bin)
        write_exe(os.path.join(self.bin, "train_dist"), FAKE_DIST)
        self.suite = os.path.join(self.d, "dist-test.toml")
        with open(self.suite, "w") as f:
            f.write(DIST_SUITE.replace("GRAPHS", os.path.join(self.d, "graphs")))
        self.out = os.path.join(self.d, "records")

    def tearDown(self):
        shutil.rmtree(self.d)

    def run_py(self, suite, *extra):
        """run.py on `suite` with the stand-ins; its completed process."""
        # An NCCL setting of the caller's: command.txt must show it beside each command.
        env = dict(os.environ, FAKE_DIST_FIXTURE=DIST_FIXTURE, NCCL_MAX_P2P_NCHANNELS="7")
        return subprocess.run([sys.executable, os.path.join(HERE, "run.py"), suite, "--bin-dir", self.bin,
                               "--out", self.out, "--machine", "fake4", *extra],
                              capture_output=True, text=True, timeout=300, env=env)

    def run_suite(self, *extra, suite=None, name="dist-test"):
        p = self.run_py(suite or self.suite, *extra)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        recs = sorted(os.listdir(os.path.join(self.out, name)))
        rec = os.path.join(self.out, name, recs[-1])
        with open(os.path.join(rec, "summary.json")) as f:
            return {r["id"]: r for r in json.load(f)["rows"]}, rec

    def test_train_cases_on_a_saved_graph(self):
        """A train case on a saved graph: the graph step writes it once with train_dist, the
        run loads it with --data-dir, and the report is checked against that graph's facts."""
        write_exe(os.path.join(self.bin, "train_reddit"), FAKE_TRAIN)
        path = os.path.join(self.d, "saved-train.toml")
        with open(path, "w") as f:
            f.write(textwrap.dedent("""\
                description = "train on a saved graph"
                repetitions = 1
                [graph]
                source = "saved"
                dir = "%s"
                flags = ["--dataset", "papers100m", "--scale", "0.1", "--seed", "0"]
                [[case]]
                name = "gcn-2x8-order"
                kind = "train"
                model = "gcn"
                layers = 2
                hidden = 8
                epochs = 3
                shortcuts = [["input-cache", "labelled-output"]]
                flags = ["--reorder", "degree"]
                """ % os.path.join(self.d, "graphs")))
        rows, rec = self.run_suite(suite=path, name="saved-train")
        row = rows["gcn-2x8-order-f32/ours"]
        self.assertEqual((row["status"], row["median_ms"]), ("ok", 1.0))
        folder = "dataset-papers100m-scale-0.1-seed-0"
        with open(os.path.join(rec, "command.txt")) as f:
            commands = f.read()
        self.assertIn("--save-graph", commands)
        self.assertIn("--data-dir " + os.path.join(self.d, "graphs", folder), commands)
        self.assertIn("--reorder degree", commands)
        self.assertEqual(row["shortcuts"], ["input-cache", "labelled-output"])
        self.assertNotIn("--all-output-rows", commands)
        # Undeclared, the labelled rows' shortcut fails the row: figures name their shortcuts.
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace('shortcuts = [["input-cache", "labelled-output"]]', ""))
        p = self.run_py(path)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("the suite declared ['input-cache', 'train-rows']", p.stdout + p.stderr)
        # A case's `graph` names a saved graph: not without one.
        with open(path, "w") as f:
            f.write(text.replace('source = "saved"', 'source = "generated"').replace(
                'epochs = 3', 'epochs = 3\ngraph = ["--scale", "1"]'))
        with self.assertRaisesRegex(suites.SuiteError, "names a saved graph"):
            suites.load(path)

    def test_the_suites(self):
        s = suites.load(os.path.join(HERE, "suites", "dist-scaling.toml"))
        self.assertEqual(len(s.measurements), 15)  # GCN, GraphSAGE at two scales and GAT at one, 1-2-4 ranks
        run = {r.name: r for r in s.runs}["gcn-3x256-s4-bf16-range-p4"]
        self.assertEqual((run.kind, run.binary), ("dist", "train_dist"))
        a = run.args
        self.assertEqual(a[:2], ["--data-dir", "{graph_dir}/dataset-reddit-scale-4-seed-0"])
        for flag, v in (("--ranks", "4"), ("--partition", "range"), ("--precision", "bf16"), ("--layers", "3"),
                        ("--hidden", "256"), ("--json", "{json}")):
            self.assertEqual(a[a.index(flag) + 1], v, flag)
        self.assertIn("--nccl", a)
        self.assertEqual([f for f, _ in s.saved_graphs()],
                         ["dataset-reddit-scale-1-seed-0", "dataset-reddit-scale-4-seed-0"])
        self.assertEqual([f for f, _ in s.select(["*-s1"]).saved_graphs()], ["dataset-reddit-scale-1-seed-0"])
        self.assertEqual(len(s.select(["*-s1"]).measurements), 9)
        p = suites.load(os.path.join(HERE, "suites", "dist-papers.toml"))
        ids = {m.id for m in p.measurements}
        self.assertIn("gcn-3x128-full-bf16-range-p4/ours", ids)
        self.assertIn("sage-3x256-s0.1-bf16-metis-p4/ours", ids)
        self.assertNotIn("gcn-3x128-full-bf16-metis-p4/ours", ids)  # no METIS at full size
        self.assertEqual([f for f, _ in p.select(["gcn-3x256-s0.1"]).saved_graphs()],
                         ["dataset-papers100m-scale-0.1-seed-0"])

    def test_case_checks(self):
        def load(case, source='source = "saved"\nflags = []'):
            path = os.path.join(self.d, "x.toml")
            with open(path, "w") as f:
                f.write(f'repetitions = 1\n[graph]\n{source}\n[[case]]\nname = "x"\nmodel = "gcn"\nlayers = 2\n'
                        f'hidden = 8\nepochs = 2\n{case}\n')
            return suites.load(path)
        s = load('kind = "dist"\nranks = [1, 2]\npartitions = ["metis", "range"]')
        # One rank: one row (nothing is cut); more: one per partition.
        self.assertEqual([m.name for m in s.measurements], ["x-f32-range-p1", "x-f32-metis-p2", "x-f32-range-p2"])
        with self.assertRaisesRegex(suites.SuiteError, "ranks"):
            load('kind = "dist"\nranks = [0]')
        with self.assertRaisesRegex(suites.SuiteError, "ranks"):
            load('kind = "dist"\nranks = [2, 2]')
        with self.assertRaisesRegex(suites.SuiteError, "partitions"):
            load('kind = "dist"\npartitions = ["hash"]')
        with self.assertRaisesRegex(suites.SuiteError, "not same_graph"):
            load('kind = "dist"', 'source = "same-graph"\nscript = "same_graph.py"')
        spmm = os.path.join(self.d, "y.toml")
        with open(spmm, "w") as f:
            f.write('repetitions = 1\n[graph]\nsource = "saved"\nflags = []\n[[case]]\nname = "x"\n'
                    'kind = "spmm"\nk = [8]\n')
        with self.assertRaisesRegex(suites.SuiteError, "is for dist and train cases"):
            suites.load(spmm)
        with self.assertRaisesRegex(suites.SuiteError, "unknown keys"):
            load('kind = "dist"\nshortcuts = [[]]')
        # A generated graph goes on every run's command line.
        g = load('kind = "dist"\ngraph = ["--scale", "2"]', 'source = "generated"\nflags = ["--scale", "1"]')
        self.assertEqual(g.runs[0].args[:2], ["--scale", "2"])
        self.assertEqual(g.saved_graphs(), [])

    def test_reads_a_real_report(self):
        import run
        with open(DIST_FIXTURE) as f:
            doc = json.load(f)
        spec = {"model": "gcn", "layers": 2, "hidden": 128, "ranks": 2, "partition": "metis", "graph_folder": "g"}
        m = suites.Measurement("x/ours", "x", "x", "dist", "gcn 2x128", "f32", [], "ours", spec=spec)
        s = run.extract_dist(doc, m, {"g": {"nodes": 11648, "edges": 1280344}})
        self.assertEqual(s["ms"], 453.848664)  # the slower rank's median epoch
        info = s["info"]
        self.assertEqual((info["partition"], info["exchange"], info["edge_cut"]), ("metis", "all-gather", 390150))
        self.assertAlmostEqual(info["edge_cut_share"], 0.3047227932493142)
        self.assertEqual(info["comm_share_per_rank"], [round(41.18 / 422.42, 4), round(24.33 / 431.59, 4)])
        self.assertAlmostEqual(info["comm_share"], (41.18 / 422.42 + 24.33 / 431.59) / 2, places=3)
        self.assertEqual(info["halo_rows_per_rank"], [5957, 5412])
        self.assertEqual(info["total_halo_rows"], 11369)
        self.assertEqual(info["received_rows_per_rank"], [6108, 6108])
        self.assertEqual(info["comm_bytes_per_epoch_per_rank"], [2147016.0, 2333320.0])
        self.assertEqual(info["peak_allocated_bytes_per_rank"], [None, None])  # the CPU has none
        self.assertIsNone(info["peak_allocated_bytes"])
        self.assertEqual(info["time_to_accuracy"]["epoch"], 5)
        self.assertEqual(s["facts"], {"nodes": 11648, "nnz": 1280344, "graph": "synthetic-reddit@0.05",
                                      "ranks": 2, "partition": "metis"})
        for change, msg in (({"partition": "range"}, "asked for range"), ({"ranks": 4}, "asked for 4"),
                            ({"hidden": 256}, "asked for gcn 2x256")):
            bad = suites.Measurement("x/ours", "x", "x", "dist", "", "f32", [], "ours", spec=dict(spec, **change))
            with self.assertRaisesRegex(run.Failure, msg):
                run.extract_dist(doc, bad, None)
        with self.assertRaisesRegex(run.Failure, "graph step wrote"):
            run.extract_dist(doc, m, {"g": {"nodes": 1, "edges": 2}})
        with self.assertRaisesRegex(run.Failure, "precision"):
            run.extract_dist(doc, suites.Measurement("x/ours", "x", "x", "dist", "", "bf16", [], "ours", spec=spec),
                             None)

    def test_end_to_end_and_the_scaling_table(self):
        rows, rec = self.run_suite()
        self.assertEqual(len(rows), 6)
        self.assertTrue(all(r["status"] == "ok" for r in rows.values()))
        p4 = rows["gcn-3x8-bf16-metis-p4/ours"]
        self.assertEqual((p4["median_ms"], p4["ranks"], p4["partition"], p4["nodes"]), (28.0, 4, "metis", 10000))
        self.assertEqual(p4["info"]["peak_allocated_bytes_per_rank"], [2**30, 2**31, 3 * 2**30, 2**32])
        self.assertEqual(p4["info"]["peak_allocated_bytes"], 2**32)
        self.assertIsNone(p4["bytes_moved"])  # no floors for a distributed epoch
        self.assertEqual(rows["gcn-3x8-bf16-range-p1/ours"]["median_ms"], 100.0)
        self.assertEqual(rows["sage-3x8-small-bf16-range-p4/ours"]["nodes"], 1000)
        with open(os.path.join(rec, "graph.json")) as f:
            graphs = json.load(f)
        self.assertEqual(sorted(graphs), ["dataset-papers100m-scale-0.1-seed-0", "dataset-papers100m-scale-1-seed-0"])
        self.assertFalse(graphs["dataset-papers100m-scale-1-seed-0"]["reused"])
        self.assertEqual(graphs["dataset-papers100m-scale-1-seed-0"]["generate_s"], 1.5)
        with open(os.path.join(rec, "command.txt")) as f:
            commands = f.read()
        self.assertIn("--stats-only --ranks 1 --partition range --save-graph", commands)
        self.assertIn("NCCL_MAX_P2P_NCHANNELS=7 ", commands)
        self.assertIn("--data-dir " + os.path.join(self.d, "graphs", "dataset-papers100m-scale-1-seed-0"), commands)
        text = results.render(self.out, self.d)
        section = text[text.index("## dist-test"):]
        self.assertIn("| gcn-3x8-bf16-range-p1 | gcn 3x8 | bf16 | fake@1 | range | 1 | 100.0 | - | 10 % | 1.0 "
                      "| 0 | - | fake4 |", section)
        self.assertIn("| gcn-3x8-bf16-range-p2 | gcn 3x8 | bf16 | fake@1 | range | 2 | 51.00 | 1.96x |", section)
        self.assertIn("| gcn-3x8-bf16-metis-p4 | gcn 3x8 | bf16 | fake@1 | metis | 4 | 28.00 | 3.57x | 8 % | 4.0 "
                      "| 6,108 | 30 % |", section)
        # range rows first, by rank count, then METIS.
        self.assertLess(section.index("range-p4"), section.index("metis-p2"))
        self.assertLess(section.index("range-p1"), section.index("range-p2"))
        # The second invocation reuses both graphs (same flags, same binary).
        _, rec2 = self.run_suite("--only", "sage-3x8-small")
        with open(os.path.join(rec2, "command.txt")) as f:
            self.assertIn("reused", f.read())
        self.assertFalse(os.path.exists(os.path.join(rec2, "graph-dataset-papers100m-scale-0.1-seed-0.log")))
        # Its one-rank-less record gives no speed-up of its own.
        text = results.render(self.out, self.d)
        self.assertIn("| sage-3x8-small-bf16-range-p4 | sage 3x8 | bf16 | fake@0.1 | range | 4 | 28.00 | - |", text)
        # Another binary: the graph is made again.
        with open(os.path.join(self.bin, "train_dist"), "a") as f:
            f.write("# changed\n")
        _, rec3 = self.run_suite("--only", "sage-3x8-small")
        self.assertTrue(os.path.isfile(os.path.join(rec3, "graph-dataset-papers100m-scale-0.1-seed-0.log")))

    def test_graphs_only_then_the_runs(self):
        _, rec = self.run_suite("--graphs-only", "--only", "sage-3x8-small")
        with open(os.path.join(rec, "summary.json")) as f:
            summary = json.load(f)
        self.assertEqual((summary["rows"], summary["graphs_only"]), ([], True))
        with open(os.path.join(rec, "graph.json")) as f:
            self.assertEqual(list(json.load(f)), ["dataset-papers100m-scale-0.1-seed-0"])
        rows, rec = self.run_suite("--only", "sage-3x8-small")
        self.assertEqual(list(rows), ["sage-3x8-small-bf16-range-p4/ours"])
        with open(os.path.join(rec, "graph.json")) as f:
            self.assertTrue(json.load(f)["dataset-papers100m-scale-0.1-seed-0"]["reused"])
        p = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "spmm", "--graphs-only"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("make their own graphs", p.stderr)

    def test_dry_run_lists_the_graph_steps(self):
        p = subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "dist-papers", "--dry-run", "--only",
                            "gcn-3x256-s0.1"], capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("graph-dataset-papers100m-scale-0.1-seed-0: ", p.stdout)
        self.assertIn("--save-graph /tmp/gnn-bench/dist-papers-graphs/dataset-papers100m-scale-0.1-seed-0", p.stdout)
        self.assertIn("-> gcn-3x256-s0.1-bf16-metis-p4/ours", p.stdout)
        self.assertNotIn("scale-1-seed", p.stdout)


class FaultTestTests(unittest.TestCase):
    """bench/fault_test.py end to end on the stand-in's multi-process mode (heartbeat files for
    NCCL, its watchdog error for the real one's)."""

    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.bin = os.path.join(self.d, "bin")
        os.makedirs(self.bin)
        write_exe(os.path.join(self.bin, "train_dist"), FAKE_DIST)

    def tearDown(self):
        shutil.rmtree(self.d)

    def fault_test(self, *extra):
        p = subprocess.run([sys.executable, os.path.join(HERE, "fault_test.py"), "--bin-dir", self.bin, "--out",
                            os.path.join(self.d, "records"), "--graph-dir", os.path.join(self.d, "graphs"),
                            "--machine", "testbox", "--scale", "0.5", "--epochs", "30", "--checkpoint-every", "5",
                            "--comm-timeout", "1", "--goal-s", "20", "--timeout", "120", *extra],
                           capture_output=True, text=True, timeout=300)
        (rec,) = os.listdir(os.path.join(self.d, "records", "faults"))
        rec = os.path.join(self.d, "records", "faults", rec)
        with open(os.path.join(rec, "fault.json")) as f:
            return p, json.load(f), rec

    def test_kill_one_rank_of_three_then_resume(self):
        p, doc, rec = self.fault_test("--world", "3", "--kill-rank", "1", "--kill-epoch", "12")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(doc["passed"], doc["checks"])
        cut = doc["cut"]
        self.assertGreaterEqual(cut["epoch_at_kill"], 12)
        self.assertIn(cut["checkpoint_epoch"], (10, 15))  # 15 only where the kill came late (a busy machine)
        self.assertEqual(sorted(cut["survivors"]), ["0", "2"])
        for s in cut["survivors"].values():
            self.assertEqual(s["exit"], 1)
            self.assertTrue(s["names_dead_rank"] and s["names_epoch"], s)
            self.assertRegex(s["message"], r"^Error: rank [02]: all-reduce at epoch 1[2-5] .*waiting for rank 1")
            self.assertGreaterEqual(s["exit_s_after_kill"], 0.5)  # the stand-in's 1 s watchdog
        match = doc["resume_vs_whole"]
        self.assertTrue(match["bit_identical"])
        self.assertEqual(match["epochs"], 30)
        with open(os.path.join(rec, "command.txt")) as f:
            commands = f.read()
        for want in ("RANK=2 LOCAL_RANK=2", "MASTER_ADDR=127.0.0.1", "--tcp-rendezvous", "--checkpoint-every 5",
                     "# cut: SIGKILL to rank 1", "--resume", "--deterministic", "--save-graph"):
            self.assertIn(want, commands)
        for f in ("README.md", "graph.json", "whole-rank0.log", "cut-rank2.log", "resumed.rank1.json"):
            self.assertTrue(os.path.isfile(os.path.join(rec, f)), f)
        with open(os.path.join(rec, "README.md")) as f:
            self.assertIn("| at most 5 epochs lost | yes |", f.read())

    def test_a_failed_check_exits_1(self):
        # Survivors that take longer than the goal fail the test (and say so).
        p, doc, _ = self.fault_test("--kill-epoch", "8", "--goal-s", "0.5")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertFalse(doc["passed"])
        self.assertIn("FAIL  rank 0 exited within 0.5 s", p.stdout)


class ReaperTests(unittest.TestCase):
    def test_a_terminated_runner_kills_its_runs(self):
        # A runner ended from outside (`timeout` sends SIGTERM) must not leave its runs, which
        # have sessions of their own, holding the GPUs for the next command.
        code = ("import sys, time; sys.path.insert(0, %r); import run; run.install_reaper(); "
                "p = run.spawn(['sleep', '60']); print(p.pid, flush=True); time.sleep(60)" % HERE)
        r = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        child = int(r.stdout.readline())
        os.kill(child, 0)  # running
        r.terminate()
        r.wait(timeout=10)
        self.assertEqual(r.returncode, 128 + 15)
        self.assertIn("processes were killed", r.stderr.read())
        for _ in range(100):
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            # A killed child not yet reaped by init is a zombie: gone in all but name.
            with open(f"/proc/{child}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):
                    break
            time.sleep(0.05)
        else:
            self.fail(f"pid {child} outlived its runner")


class RunnerTests(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.mkdtemp()
        self.bin = os.path.join(self.d, "bin")
        os.makedirs(self.bin)
        # Packed only: the runner must unpack it.
        with lzma.open(os.path.join(self.bin, "train_reddit.xz"), "wb") as f:
            f.write(FAKE_TRAIN.encode())
        self.out = os.path.join(self.d, "records")

    def tearDown(self):
        shutil.rmtree(self.d)

    def run_suite(self, *extra, env=None):
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run([sys.executable, os.path.join(HERE, "run.py"), "cpu-smoke", "--bin-dir", self.bin,
                               "--out", self.out, "--machine", "testbox", *extra],
                              capture_output=True, text=True, env=e, timeout=300)

    def record(self):
        (rec,) = os.listdir(os.path.join(self.out, "cpu-smoke"))
        return os.path.join(self.out, "cpu-smoke", rec)

    def test_end_to_end(self):
        p = self.run_suite("--reps", "2")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertTrue(os.access(os.path.join(self.bin, "train_reddit"), os.X_OK))
        rec = self.record()
        self.assertRegex(os.path.basename(rec), r"^testbox-\d{4}-\d{2}-\d{2}$")
        with open(os.path.join(rec, "summary.json")) as f:
            summary = json.load(f)
        rows = {r["id"]: r for r in summary["rows"]}
        self.assertEqual(sorted(rows), ["gcn-2x16-f32-input-cache/ours", "gcn-2x16-f32-no-input-cache/ours",
                                        "sage-2x16-f32/ours"])
        cached = rows["gcn-2x16-f32-input-cache/ours"]
        self.assertEqual((cached["median_ms"], cached["repetitions"], cached["status"]), (1.0, 2, "ok"))
        self.assertEqual(cached["spmm_widths"], [16, 16])  # 602 -> 16 -> 16: layer 2 only
        self.assertEqual(rows["gcn-2x16-f32-no-input-cache/ours"]["spmm_widths"], [16, 16, 16, 16])
        want = floors.epoch_work(2330, 40000, [16, 16], 4, values=True)
        self.assertEqual(cached["bytes_moved"], want.compulsory)
        self.assertAlmostEqual(cached["achieved_bytes_per_s"], want.compulsory / 1e-3)
        self.assertEqual(rows["sage-2x16-f32/ours"]["nnz"], 40000 - 2330)  # A without self loops
        self.assertIsNone(cached["distance"]["gather_l1"])  # the CPU has no cache rates
        for i in (1, 2):
            for stem in ("gcn-2x16-f32-input-cache", "sage-2x16-f32"):
                self.assertTrue(os.path.isfile(os.path.join(rec, f"{stem}-r{i}.json")))
                self.assertTrue(os.path.isfile(os.path.join(rec, f"{stem}-r{i}.log")))
        with open(os.path.join(rec, "command.txt")) as f:
            commands = f.read()
        self.assertIn("--no-input-cache", commands)
        self.assertEqual(commands.count("exit 0"), 6)
        with open(os.path.join(rec, "env.json")) as f:
            env = json.load(f)
        self.assertEqual(env["machine"], "testbox")
        self.assertIn("hash", env["git"])
        self.assertEqual(set(env["binaries"]), {"train_reddit"})
        self.assertIn("sage-2x16-f32/ours", p.stdout)  # the closing table
        # The results page of this record.
        text = results.render(self.out, self.d)
        self.assertIn("| gcn-2x16-f32-input-cache | gcn 2x16 | f32 | input-cache | ours | 1.000 | 2 |", text)

    def test_unpacks_again_when_the_xz_changes(self):
        import run
        path = run.find_binary(self.bin, "train_reddit")
        os.utime(path, (1, 1))  # older than the .xz: file times must not matter
        self.assertEqual(run.find_binary(self.bin, "train_reddit"), path)
        with lzma.open(os.path.join(self.bin, "train_reddit.xz"), "wb") as f:
            f.write(b"#!/bin/sh\necho new\n")
        os.utime(os.path.join(self.bin, "train_reddit.xz"), (0, 0))  # and older than the copy
        with open(run.find_binary(self.bin, "train_reddit")) as f:
            self.assertIn("echo new", f.read())

    def test_failed_run_exits_nonzero(self):
        p = self.run_suite("--reps", "1", env={"FAKE_FAIL_MODEL": "sage"})
        self.assertEqual(p.returncode, 1)
        self.assertIn("sage-2x16-f32-r1: exit 3", p.stderr)
        with open(os.path.join(self.record(), "summary.json")) as f:
            rows = {r["id"]: r for r in json.load(f)["rows"]}
        self.assertEqual(rows["sage-2x16-f32/ours"]["status"], "failed")
        self.assertEqual(rows["gcn-2x16-f32-input-cache/ours"]["status"], "ok")

    def test_only_and_pack(self):
        pack = os.path.join(self.d, "rec.tar.gz")
        p = self.run_suite("--reps", "1", "--only", "sage-2x16", "--pack", pack)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.record(), "summary.json")) as f:
            self.assertEqual([r["id"] for r in json.load(f)["rows"]], ["sage-2x16-f32/ours"])
        import tarfile
        with tarfile.open(pack) as t:
            names = t.getnames()
        self.assertIn(f"cpu-smoke/{os.path.basename(self.record())}/summary.json", names)

    def test_missing_binary_and_unknown_row(self):
        os.remove(os.path.join(self.bin, "train_reddit.xz"))
        p = self.run_suite()
        self.assertEqual(p.returncode, 2)
        self.assertIn("bench-pack.sh", p.stderr)
        p = self.run_suite("--only", "nope")
        self.assertEqual(p.returncode, 2)
        self.assertIn("matches no row", p.stderr)


if __name__ == "__main__":
    unittest.main()
