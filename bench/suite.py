"""Suite files (bench/suites/*.toml): loading, checking, and expansion into measurements (what
the summary reports) and runs (the processes that produce them). README.md documents the
format; this module is its only reader.

A run is one process: one training run of ours (train_reddit, or train_dist over several
ranks), one bench_spmm / bench_sddmm / bench_graphs invocation (all its widths, precisions and
graphs), or one peer script invocation (all the suite's models of that peer). Every run repeats `repetitions` times; a measurement's median is over its repetitions.
"""

import fnmatch
import os
import re
import tomllib
from dataclasses import dataclass, field

import floors

# Case kinds and the binary each runs.
KINDS = {"train": "train_reddit", "spmm": "bench_spmm", "sddmm": "bench_sddmm", "graphs": "bench_graphs",
         "dist": "train_dist"}
# Peers each kind can have, and the precisions each peer runs.
PEERS = {
    # python: the Python package's gnn.train on the same files (bench/peers/python_train.py,
    # train_reddit's flags and JSON shape), run right after each of ours.
    "train": {"pyg": ("f32", "bf16"), "tgcn": ("f32", "bf16"), "python": ("f32", "bf16", "f16")},
    "spmm": {"cusparse": ("f32",)},
    "sddmm": {"cusparse": ("f32",), "torch": ("f32",)},
    "graphs": {},  # its rows judge our dispatcher; cuSPARSE stays in bench_graphs' own JSON
    "dist": {},
}
# Precisions each kind of ours runs (bench_sddmm times f32 only).
OURS_PRECISIONS = {"train": ("f32", "bf16", "f16"), "spmm": ("f32", "bf16"), "sddmm": ("f32",),
                   "graphs": ("f32", "bf16", "f16"), "dist": ("f32", "bf16", "f16")}
# The train peers same_graph.py trains (one process for all of them per repetition).
SAME_GRAPH_PEERS = ("pyg", "tgcn")
# The script of the `python` train peer.
PYTHON_TRAIN = "bench/peers/python_train.py"
# Shortcuts: the train_reddit flags that turn each off (they are on by default). train-rows: a
# GCN's, GraphSAGE's or GIN's output layer in training over the train rows' edges alone (at most 90 % of the nodes
# in the train split; one device).
SHORTCUTS = {"input-cache": ["--no-input-cache"], "train-rows": ["--no-train-rows"]}
# Shortcuts a variant may declare that its runs take by themselves, not switched off by
# omission: the output layer on the labelled rows alone, where at most half the nodes are
# labelled (papers100M-shaped graphs; never on Reddit's split).
OBSERVED_SHORTCUTS = ("labelled-output",)
# same-graph: same_graph.py's files; generated: the examples' own generator flags, every run
# generating; saved: generated once per suite invocation by train_dist --save-graph (gnn's
# binary CSR, memory-mapped), every run loading it with --data-dir (dist and train cases).
GRAPH_SOURCES = ("same-graph", "generated", "saved")
# train_dist's --partition values.
PARTITIONS = ("range", "metis", "auto")
# The keys a [[case]] of each kind may hold.
_COMMON_KEYS = {"name", "kind", "precisions", "peers", "flags"}
CASE_KEYS = {
    "train": _COMMON_KEYS | {"model", "layers", "hidden", "epochs", "shortcuts", "graph"},
    "spmm": _COMMON_KEYS | {"k"},
    "sddmm": _COMMON_KEYS | {"k", "torch_reps"},
    "graphs": _COMMON_KEYS | {"k", "graphs"},
    "dist": _COMMON_KEYS | {"model", "layers", "hidden", "epochs", "ranks", "partitions", "graph"},
}
# The models same_graph.py trains (its --models names; tgcn_* is the plain-torch GCN).
SAME_GRAPH_NAMES = {"gcn_2x128", "sage_2x128", "gcn_4x256", "sage_4x256", "tgcn_2x128", "tgcn_4x256",
                    "gcn_2x128_bf16", "sage_2x128_bf16", "gcn_4x256_bf16", "tgcn_2x128_bf16",
                    "tgcn_4x256_bf16", "gat", "gat_bf16"}
# same_graph.py's attention models have one shape each: 2 layers, 8 heads x 8 (hidden 64).
SAME_GRAPH_ATTENTION = {"gat": (2, 64)}


class SuiteError(Exception):
    """A suite file that does not follow the format."""


@dataclass
class Measurement:
    """One row of the summary: one configuration of one implementation."""

    id: str  # "<name>/<peer>", unique in the suite
    name: str
    case: str
    kind: str
    model: str
    precision: str
    shortcuts: list
    peer: str  # "ours" or the peer's name
    k: int = None  # feature width (kernel suites)
    spec: dict = field(default_factory=dict)  # the case's table (graphs: {"graph", "flags"})


@dataclass
class Run:
    """One process to start per repetition and the measurements it yields."""

    name: str  # file stem of its raw JSON and log ("<name>-r<rep>.json")
    kind: str  # train | spmm | sddmm | graphs | dist | same-graph-peers | torch-sddmm
    measurements: list
    binary: str = None  # an example binary from --bin-dir
    script: str = None  # a peer script (path relative to the repository or --anchors-dir)
    args: list = field(default_factory=list)  # arguments; "{json}" / "{out}" / "{scratch}" filled at run time
    epochs: int = None
    graph: list = None  # dist or train on a saved graph: the generator flags of the graph it loads


@dataclass
class Suite:
    """A loaded suite: its settings, measurements and runs."""

    name: str
    path: str
    description: str
    repetitions: int
    timeout_s: int
    versions: dict
    graph: dict
    measurements: list
    runs: list

    def select(self, patterns):
        """The suite restricted to the measurements `patterns` match (fnmatch against the
        case, the measurement name and its id; a pattern naming a case selects all of it),
        and to the runs that still yield one. Raises SuiteError when a pattern matches
        nothing."""
        if not patterns:
            return self
        chosen = set()
        for p in patterns:
            hit = {m.id for m in self.measurements
                   if fnmatch.fnmatchcase(m.case, p) or fnmatch.fnmatchcase(m.name, p)
                   or fnmatch.fnmatchcase(m.id, p)}
            if not hit:
                known = ", ".join(sorted({m.case for m in self.measurements}))
                raise SuiteError(f"--only {p!r} matches no row of suite {self.name} (cases: {known})")
            chosen |= hit
        runs = []
        for r in self.runs:
            ms = [m for m in r.measurements if m.id in chosen]
            if ms:
                runs.append(restrict_run(r, ms))
        # A torch SDDMM peer reads the graph bench_sddmm dumps: keep that run (its own rows
        # are then measured too).
        if any(r.kind == "torch-sddmm" for r in runs) and not any(r.kind == "sddmm" for r in runs):
            src = next(r for r in self.runs if r.kind == "sddmm")
            runs.insert(0, src)
            chosen |= {m.id for m in src.measurements}
        ms = [m for m in self.measurements if m.id in chosen]
        return Suite(self.name, self.path, self.description, self.repetitions, self.timeout_s,
                     self.versions, self.graph, ms, runs)

    def saved_graphs(self):
        """[(folder name, generator flags)] of the saved graphs its runs load, each once, in
        the order of the runs (empty unless [graph] source = "saved")."""
        if self.graph["source"] != "saved":
            return []
        out = {}
        for r in self.runs:
            if r.graph is not None:
                out.setdefault(graph_folder(r.graph), r.graph)
        return list(out.items())

    def python_peers(self):
        """The Python peers its runs start (their versions are checked against `versions`)."""
        return sorted({m.peer for r in self.runs if r.kind in ("same-graph-peers", "torch-sddmm")
                       for m in r.measurements})


def restrict_run(run, measurements):
    """`run` yielding only `measurements` (a peer script then trains only their models,
    bench_graphs builds only their graphs)."""
    if run.kind == "graphs":
        return Run(run.name, run.kind, measurements, run.binary, run.script,
                   graphs_args(measurements, measurements[0].spec["flags"]), run.epochs)
    if run.kind != "same-graph-peers":
        return Run(run.name, run.kind, measurements, run.binary, run.script, run.args, run.epochs, run.graph)
    models = [peer_model(m) for m in measurements]
    return Run(run.name, run.kind, measurements, run.binary, run.script,
               same_graph_peer_args(run.epochs, models), run.epochs)


def peer_model(m):
    """same_graph.py's model name for a pyg / tgcn measurement."""
    s = m.spec
    base = f"{'tgcn' if m.peer == 'tgcn' else s['model']}_{s['layers']}x{s['hidden']}"
    if m.peer != "tgcn" and SAME_GRAPH_ATTENTION.get(s["model"]) == (s["layers"], s["hidden"]):
        base = s["model"]
    return base + ("_bf16" if m.precision == "bf16" else "")


def same_graph_peer_args(epochs, models):
    """same_graph.py's arguments (before the graph's own) for one peer run."""
    return ["--dir", "{graph_dir}", "--epochs", str(epochs), "--models", ",".join(models)]


def _need(table, key, kind, where):
    if key not in table:
        raise SuiteError(f"{where}: missing `{key}`")
    v = table[key]
    if not isinstance(v, kind):
        raise SuiteError(f"{where}: `{key}` must be {kind.__name__ if isinstance(kind, type) else kind}")
    return v


def _strings(table, key, where, default=()):
    v = table.get(key, list(default))
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise SuiteError(f"{where}: `{key}` must be a list of strings")
    return v


def load(path):
    """Reads and checks the suite file at `path`; raises SuiteError with the file named."""
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SuiteError(f"{path}: {e}")
    where = path
    known = {"description", "repetitions", "timeout_s", "versions", "graph", "case"}
    extra = set(doc) - known
    if extra:
        raise SuiteError(f"{where}: unknown keys {sorted(extra)} (known: {sorted(known)})")
    reps = _need(doc, "repetitions", int, where)
    if reps < 1:
        raise SuiteError(f"{where}: repetitions must be >= 1")
    timeout = doc.get("timeout_s", 600)
    if not isinstance(timeout, int) or timeout < 1:
        raise SuiteError(f"{where}: timeout_s must be a positive integer")
    versions = doc.get("versions", {})
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise SuiteError(f"{where}: [versions] maps package names to version prefixes (strings)")
    graph = _need(doc, "graph", dict, where)
    source = _need(graph, "source", str, f"{where} [graph]")
    if source not in GRAPH_SOURCES:
        raise SuiteError(f"{where} [graph]: source {source!r} is not one of {GRAPH_SOURCES}")
    if source == "same-graph":
        _need(graph, "script", str, f"{where} [graph]")
        graph.setdefault("dir", f"/tmp/gnn-bench/{name}-graph")
        _strings(graph, "args", f"{where} [graph]")
    else:
        _strings(graph, "flags", f"{where} [graph]")
    if source == "saved":
        graph.setdefault("dir", f"/tmp/gnn-bench/{name}-graphs")
        if not isinstance(graph["dir"], str):
            raise SuiteError(f"{where} [graph]: `dir` must be a string")
    cases = _need(doc, "case", list, where)
    measurements, runs = [], []
    for i, case in enumerate(cases):
        ms, rs = _expand(case, f"{where} [[case]] #{i + 1}", graph)
        measurements += ms
        runs += rs
    runs = _group_same_graph_peers(runs)
    ids = [m.id for m in measurements]
    dup = sorted({x for x in ids if ids.count(x) > 1})
    if dup:
        raise SuiteError(f"{where}: duplicate rows {dup}")
    return Suite(name, path, doc.get("description", "").strip(), reps, timeout, versions, graph,
                 measurements, runs)


def _expand(case, where, graph):
    """The measurements and runs of one [[case]] table."""
    name = _need(case, "name", str, where)
    kind = _need(case, "kind", str, where)
    extra = set(case) - CASE_KEYS.get(kind, set())
    if kind in KINDS and extra:
        raise SuiteError(f"{where}: unknown keys {sorted(extra)} for kind {kind}")
    if kind not in KINDS:
        raise SuiteError(f"{where}: kind {kind!r} is not one of {sorted(KINDS)}")
    precisions = _strings(case, "precisions", where, ["f32"])
    for p in precisions:
        if p not in OURS_PRECISIONS[kind]:
            raise SuiteError(f"{where}: precision {p!r} is not one of {OURS_PRECISIONS[kind]} for kind {kind}")
    peers = _strings(case, "peers", where)
    for p in peers:
        if p not in PEERS[kind]:
            raise SuiteError(f"{where}: peer {p!r} is not one of {sorted(PEERS[kind])} for kind {kind}")
    flags = _strings(case, "flags", where)
    if graph["source"] == "saved" and kind not in ("dist", "train"):
        raise SuiteError(f"{where}: [graph] source \"saved\" is for dist and train cases (--data-dir)")
    if kind == "train" and "graph" in case and graph["source"] != "saved":
        raise SuiteError(f"{where}: a train case's `graph` names a saved graph ([graph] source = \"saved\")")
    if kind == "train":
        return _expand_train(case, where, name, precisions, peers, flags, graph)
    if kind == "graphs":
        return _expand_graphs(case, where, name, precisions, flags, graph)
    if kind == "dist":
        return _expand_dist(case, where, name, precisions, flags, graph)
    return _expand_kernel(case, where, name, kind, precisions, peers, flags, graph)


def _expand_train(case, where, name, precisions, peers, flags, graph):
    model = _need(case, "model", str, where)
    layers = _need(case, "layers", int, where)
    hidden = _need(case, "hidden", int, where)
    epochs = _need(case, "epochs", int, where)
    variants = case.get("shortcuts", [list(SHORTCUTS)])
    if not isinstance(variants, list) or not all(isinstance(v, list) for v in variants):
        raise SuiteError(f"{where}: `shortcuts` is a list of variants, each a list of shortcut names")
    for v in variants:
        for s in v:
            if s not in SHORTCUTS and s not in OBSERVED_SHORTCUTS:
                raise SuiteError(f"{where}: unknown shortcut {s!r} (known: "
                                 f"{sorted(SHORTCUTS) + list(OBSERVED_SHORTCUTS)})")
    if peers and graph["source"] != "same-graph":
        raise SuiteError(f"{where}: peers {peers} need [graph] source = \"same-graph\" (the peers read its files)")
    spec = {"model": model, "layers": layers, "hidden": hidden, "epochs": epochs}
    # On a saved graph every run loads it with --data-dir; a case's `graph` (generator flags)
    # replaces [graph] flags for its runs, as for dist cases.
    saved = _strings(case, "graph", where, graph["flags"]) if graph["source"] == "saved" else None
    if saved is not None:
        spec.update(graph=saved, graph_folder=graph_folder(saved))
    for p in peers:
        for prec in precisions:
            probe = Measurement("", "", name, "train", "", prec, [], p, spec=spec)
            if p in SAME_GRAPH_PEERS and prec in PEERS["train"][p] and peer_model(probe) not in SAME_GRAPH_NAMES:
                raise SuiteError(f"{where}: same_graph.py has no model {peer_model(probe)} (peer {p}, {prec})")
    label = f"{model} {layers}x{hidden}"
    ms, runs = [], []
    for prec in precisions:
        for v in variants:
            # The shortcuts the variants differ in name each variant's rows.
            varying = [s for s in SHORTCUTS if any((s in w) != (s in variants[0]) for w in variants)]
            tag = "-".join(s if s in v else f"no-{s}" for s in varying)
            mname = f"{name}-{prec}" + (f"-{tag}" if len(variants) > 1 else "")
            m = Measurement(f"{mname}/ours", mname, name, "train", label, prec, sorted(v), "ours", spec=spec)
            off = [f for s in SHORTCUTS if s not in v for f in SHORTCUTS[s]]
            if saved is not None:
                data = ["--data-dir", "{graph_dir}/" + graph_folder(saved)]
            elif graph["source"] == "same-graph":
                data = ["--data-dir", "{graph_dir}"]
            else:
                data = list(graph["flags"])
            args = data + ["--model", model, "--layers", str(layers), "--hidden", str(hidden),
                           "--precision", prec, "--epochs", str(epochs)] + off + flags + [
                               "--save", "{scratch}/weights", "--json", "{json}"]
            ms.append(m)
            runs.append(Run(mname, "train", [m], binary="train_reddit", args=args, epochs=epochs,
                            graph=saved))
            if "python" in peers and prec in PEERS["train"]["python"]:
                # The same flags, right after ours: the pair runs back to back.
                p = Measurement(f"{mname}/python", mname, name, "train", label, prec, sorted(v), "python", spec=spec)
                ms.append(p)
                runs.append(Run(f"{mname}-python", "train", [p], script=PYTHON_TRAIN, args=args, epochs=epochs))
        for p in peers:
            if p not in SAME_GRAPH_PEERS or prec not in PEERS["train"][p]:
                continue
            mname = f"{name}-{prec}"
            m = Measurement(f"{mname}/{p}", mname, name, "train", label, prec, [], p, spec=spec)
            ms.append(m)
            runs.append(Run("same-graph-peers", "same-graph-peers", [m], script=graph["script"], epochs=epochs))
    return ms, runs


def graph_folder(flags):
    """The folder (under [graph] dir) of the saved graph that generator `flags` make: the
    flags joined by dashes, without their leading dashes ("--scale 4" -> "scale-4"), or
    "default" for none."""
    text = "-".join(f.lstrip("-") for f in flags)
    return re.sub(r"[^A-Za-z0-9.@]+", "-", text).strip("-") or "default"


def _expand_dist(case, where, name, precisions, flags, graph):
    """train_dist over each rank count x partition x precision: one row per combination (one
    rank: one row, the range partition; nothing is cut). On a saved graph every run loads it
    with --data-dir; a case's `graph` (generator flags) replaces [graph] flags for its runs."""
    if graph["source"] == "same-graph":
        raise SuiteError(f"{where}: kind dist reads a generated or saved graph, not same_graph.py's files")
    model = _need(case, "model", str, where)
    layers = _need(case, "layers", int, where)
    hidden = _need(case, "hidden", int, where)
    epochs = _need(case, "epochs", int, where)
    ranks = case.get("ranks", [2])
    if not isinstance(ranks, list) or not ranks or not all(isinstance(r, int) and r > 0 for r in ranks) \
            or len(set(ranks)) != len(ranks):
        raise SuiteError(f"{where}: `ranks` must be a list of distinct positive rank counts")
    partitions = _strings(case, "partitions", where, ["range"])
    if not partitions or any(p not in PARTITIONS for p in partitions) or len(set(partitions)) != len(partitions):
        raise SuiteError(f"{where}: `partitions` must be distinct names of {PARTITIONS}")
    gflags = _strings(case, "graph", where, graph["flags"])
    if graph["source"] == "saved":
        data = ["--data-dir", "{graph_dir}/" + graph_folder(gflags)]
    else:
        data = list(gflags)
    label = f"{model} {layers}x{hidden}"
    ms, runs = [], []
    for prec in precisions:
        for p in ranks:
            for part in (partitions if p > 1 else ["range"]):
                mname = f"{name}-{prec}-{part}-p{p}"
                spec = {"model": model, "layers": layers, "hidden": hidden, "epochs": epochs, "ranks": p,
                        "partition": part, "graph": gflags,
                        "graph_folder": graph_folder(gflags) if graph["source"] == "saved" else None}
                m = Measurement(f"{mname}/ours", mname, name, "dist", label, prec, [], "ours", spec=spec)
                args = data + ["--model", model, "--layers", str(layers), "--hidden", str(hidden),
                               "--precision", prec, "--epochs", str(epochs), "--ranks", str(p),
                               "--partition", part] + flags + ["--json", "{json}"]
                ms.append(m)
                runs.append(Run(mname, "dist", [m], binary=KINDS["dist"], args=args, epochs=epochs,
                                graph=gflags if graph["source"] == "saved" else None))
    return ms, runs


def _group_same_graph_peers(runs):
    """One same_graph.py invocation per epoch count: it trains all its models in one process."""
    out, groups = [], {}
    for r in runs:
        if r.kind != "same-graph-peers":
            out.append(r)
            continue
        g = groups.get(r.epochs)
        if g is None:
            stem = "same-graph-peers" if not groups else f"same-graph-peers-e{r.epochs}"
            g = groups[r.epochs] = Run(stem, r.kind, [], script=r.script, epochs=r.epochs)
            out.append(g)
        g.measurements += r.measurements
    for g in groups.values():
        g.args = same_graph_peer_args(g.epochs, [peer_model(m) for m in g.measurements])
    # Peers first in each repetition: their run rewrites the graph files ours then read.
    return [r for r in out if r.kind == "same-graph-peers"] + [r for r in out if r.kind != "same-graph-peers"]


def _expand_kernel(case, where, name, kind, precisions, peers, flags, graph):
    if graph["source"] != "generated":
        raise SuiteError(f"{where}: kind {kind} generates its graph: [graph] source must be \"generated\"")
    ks = _widths(case, where)
    ms = []
    for k in ks:
        for prec in precisions:
            mname = f"{name}-k{k}-{prec}"
            ms.append(Measurement(f"{mname}/ours", mname, name, kind, kind, prec, [], "ours", k=k))
            for p in peers:
                if prec in PEERS[kind][p]:
                    ms.append(Measurement(f"{mname}/{p}", mname, name, kind, kind, prec, [], p, k=k))
    ks_arg = ",".join(str(k) for k in ks)
    args = list(graph["flags"]) + ["--k", ks_arg] + flags
    if kind == "spmm" and "bf16" in precisions:
        args.append("--kernels")  # the per-kernel table: its "auto" column is the bf16 SpMM
    torch_peer = kind == "sddmm" and "torch" in peers
    if torch_peer:
        args += ["--dump", "{scratch}/sddmm-csr"]
    own = [m for m in ms if m.peer != "torch"]
    runs = [Run(name, kind, own, binary=KINDS[kind], args=args + ["--json", "{json}"])]
    if torch_peer:
        reps = case.get("torch_reps", 10)
        runs.append(Run(f"{name}-torch", "torch-sddmm", [m for m in ms if m.peer == "torch"],
                        script="bench/peers/torch_sddmm.py",
                        args=["--dir", "{scratch}/sddmm-csr", "--k", ks_arg, "--reps", str(reps),
                              "--json", "{json}"]))
    return ms, runs


def _widths(case, where):
    ks = case.get("k")
    if not isinstance(ks, list) or not ks or not all(isinstance(k, int) and k > 0 for k in ks):
        raise SuiteError(f"{where}: `k` must be a non-empty list of positive widths")
    return ks


def graph_slug(graph):
    """A bench_graphs graph name in a row name: spaces as dashes ("reddit@1 rcm" ->
    "reddit@1-rcm")."""
    return graph.replace(" ", "-")


def graphs_args(measurements, flags):
    """bench_graphs' arguments for `measurements`: their graphs, widths and precisions (each
    once, in their order), the case's flags, the outputs."""
    def once(values):
        return list(dict.fromkeys(values))

    graphs = once(m.spec["graph"] for m in measurements)
    ks = once(str(m.k) for m in measurements)
    precs = once(m.precision for m in measurements)
    return ["--graphs", ",".join(graphs), "--k", ",".join(ks), "--precision", ",".join(precs)] + list(flags) + [
        "--out", "{scratch}/bench-graphs", "--json", "{json}"]


def _expand_graphs(case, where, name, precisions, flags, graph):
    """bench_graphs over `graphs` x `k` x `precisions`: one row per combination, the
    dispatcher's SpMM (its pick, the fastest candidate and the regret in the row's info)."""
    if graph["source"] != "generated" or graph.get("flags"):
        raise SuiteError(f"{where}: kind graphs builds its own graphs: [graph] source = \"generated\", flags = []")
    ks = _widths(case, where)
    graphs = _strings(case, "graphs", where)
    if not graphs:
        raise SuiteError(f"{where}: `graphs` must name bench_graphs' graphs (its --graphs)")
    dup = sorted({g for g in graphs if graphs.count(g) > 1})
    if dup or any("," in g for g in graphs):
        raise SuiteError(f"{where}: `graphs` must be distinct names without commas ({dup or graphs})")
    ms = []
    for g in graphs:
        for k in ks:
            for prec in precisions:
                mname = f"{name}-{graph_slug(g)}-k{k}-{prec}"
                ms.append(Measurement(f"{mname}/ours", mname, name, "graphs", "spmm", prec, [], "ours", k=k,
                                      spec={"graph": g, "flags": flags}))
    return ms, [Run(name, "graphs", ms, binary=KINDS["graphs"], args=graphs_args(ms, flags))]


def spmm_operand_nnz(kind, nodes, edges):
    """Non-zeros of the operand our model aggregates over, from the loaded graph's: GCN
    aggregates over A + I, GraphSAGE over A without self loops. Both graph sources of the
    suites (the generator of train_reddit / bench_*, and same_graph.py) hold exactly one self
    loop per node, so A + I has `edges` non-zeros and A without loops `edges - nodes`."""
    if kind in floors.GCN_KINDS:
        return edges
    if kind in floors.MEAN_KINDS:
        return edges - nodes
    return None
