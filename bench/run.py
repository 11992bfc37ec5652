#!/usr/bin/env python3
"""Runs one benchmark suite (bench/suites/SUITE.toml) and writes its record folder.

    python3 bench/run.py SUITE [--bin-dir DIR] [--out DIR] [--only ROW ...] [--reps N]
                               [--pack FILE.tar.gz] [--dry-run] [--graphs-only]

It builds nothing: it runs the example binaries found in --bin-dir (default .dev/bin, where
scripts/bench-pack.sh puts them xz-compressed; *.xz are unpacked beside themselves) and the
peer scripts (--anchors-dir, default .dev/anchors, for same_graph.py; bench/peers/ for the
rest), every repetition, and writes OUT/<suite>/<machine>-<YYYY-MM-DD>[-N]/:

    command.txt    the runner's command line and every command it ran, with exit status
                   (and, before a run, the GPUs that were not idle: see BUSY_MIB)
    env.json       machine (GPUs, driver, CUDA, CPU), peer versions, git hash, binaries' sha256
    <run>-r<N>.json / .log   each run's raw JSON and output
    summary.json   one row per measurement: median, repetitions, bytes moved, achieved
                   bytes/s, the floors and the distance to each (bench/floors.py)

summary.json and the pack are rewritten after every run, so a run cut off by a time limit
leaves what it had. Exit status: 0 when every run passed, 1 when one failed (the others still
ran), 2 when nothing could start (unknown suite or row, missing binary, wrong peer versions).
README.md beside this file says more; bench/results.py turns the records into RESULTS.md.
"""

import argparse
import datetime
import hashlib
import json
import lzma
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib

sys.dont_write_bytecode = True  # no __pycache__ beside the harness (it travels with the tree)
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import floors  # noqa: E402
import results  # noqa: E402
import suite as suites  # noqa: E402

# Where the GPU machine keeps the CUDA 13 libraries the binaries link (prepended to
# LD_LIBRARY_PATH when present).
CUDA_LIB_DIRS = ("/usr/local/cuda-13.0/targets/x86_64-linux/lib",)
# same_graph.py's defaults for the widths the peers' floors need (its --feat / --classes).
SAME_GRAPH_DEFAULTS = {"--feat": 602, "--classes": 41}


class Failure(Exception):
    """A run whose output cannot be used (the message says why)."""


def die(msg):
    print(f"bench/run.py: {msg}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------- machine and environment


def nvidia_gpus():
    """[{name, driver, memory}] from nvidia-smi, [] without one."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if p.returncode != 0:
        return []
    rows = []
    for line in p.stdout.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 3:
            rows.append({"name": parts[0], "driver": parts[1], "memory": parts[2]})
    return rows


# A GPU with more than this much memory in use (MiB) before a run starts is not idle: another
# process holds it (and may be running kernels on it), so the run's times, its "peak in use"
# (the driver's count, every process's memory) and the memory left to it are not its own.
# The 2026-11-27 x4 records show it: from the fault test's resumed run on, every GPU had ~59
# GiB (75 % of 79.2) more in use than the runs' allocators held, and the same scale-1 run went
# from 13.8 ms per epoch (4.4 GiB in use) to 58.5 ms (62.4 GiB in use), 1.22 GiB allocated
# both times (records/faults/h100x4-2026-11-27, whole vs resumed): the scale-4 dist-scaling
# record taken right after read as a memory leak and a slowdown of the engine.
BUSY_MIB = 2048


def parse_occupancy(gpu_csv, apps_csv):
    """nvidia-smi's `--query-gpu=index,uuid,memory.used,utilization.gpu` and
    `--query-compute-apps=gpu_uuid,pid,process_name,used_memory` CSV (noheader, nounits) as
    [{index, used_mib, util, apps: [{pid, name, used_mib}]}]; unparsable lines are skipped."""
    def num(x):
        try:
            return int(float(x))
        except ValueError:
            return None
    gpus, by_uuid = [], {}
    for line in gpu_csv.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) != 4 or num(parts[0]) is None:
            continue
        g = {"index": num(parts[0]), "used_mib": num(parts[2]), "util": num(parts[3]), "apps": []}
        gpus.append(g)
        by_uuid[parts[1]] = g
    for line in apps_csv.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) != 4 or parts[0] not in by_uuid:
            continue
        by_uuid[parts[0]]["apps"].append({"pid": num(parts[1]), "name": parts[2], "used_mib": num(parts[3])})
    return gpus


def gpu_occupancy():
    """Every GPU's memory in use, utilisation and compute processes now ([`parse_occupancy`]),
    or None without nvidia-smi."""
    out = []
    for query in ("--query-gpu=index,uuid,memory.used,utilization.gpu",
                  "--query-compute-apps=gpu_uuid,pid,process_name,used_memory"):
        try:
            p = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True,
                               text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if p.returncode != 0:
            return None
        out.append(p.stdout)
    return parse_occupancy(*out)


def busy_gpus(gpus, limit_mib=BUSY_MIB):
    """The GPUs of `gpus` ([`gpu_occupancy`]) that are not idle: more than `limit_mib` in use,
    or a compute process on them."""
    return [g for g in gpus or [] if (g["used_mib"] or 0) > limit_mib or g["apps"]]


def busy_note(busy):
    """One line naming the busy GPUs and what holds them."""
    def one(g):
        apps = ", ".join(f"pid {a['pid']} {os.path.basename(a['name'])} {a['used_mib']} MiB" for a in g["apps"])
        return f"GPU {g['index']}: {g['used_mib']} MiB in use, {g['util']} % busy" + (f" ({apps})" if apps else "")
    return "GPUs not idle: " + "; ".join(one(g) for g in busy)


def cuda_version():
    """The driver's CUDA version as nvidia-smi prints it, or None."""
    try:
        p = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"CUDA Version:\s*([0-9.]+)", p.stdout)
    return m.group(1) if m else None


def slug(text):
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "machine"


def load_machines(path):
    with open(path, "rb") as f:
        return tomllib.load(f).get("machine", [])


def measure_copy_rate(size=128 << 20, reps=3):
    """Bytes per second of a large memory copy (read + write) through memoryview slice
    assignment (memcpy), median of `reps`: the CPU's stand-in for HBM bandwidth."""
    src = bytearray(size)
    dst = bytearray(size)
    view = memoryview(dst)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        view[:] = src
        times.append(time.perf_counter() - t)
    return 2 * size / statistics.median(times)


def identify_machine(gpus, table):
    """The record's machine name and the rates its floors use."""
    if not gpus:
        rate = measure_copy_rate()
        return "cpu", {"hbm": rate, "l1": None, "l2": None,
                       "source": "hbm: this CPU's memory copy rate, measured by the runner "
                                 "(memcpy of 128 MiB, read + write, median of 3); no cache rates "
                                 "known, so no gather floors"}
    name = gpus[0]["name"]
    entry = next((m for m in table if m.get("match", "\0") in name), None)
    base = entry["name"] if entry else slug(name)
    if len(gpus) > 1:
        base += f"x{len(gpus)}"
    if entry is None:
        return base, {"hbm": None, "l1": None, "l2": None,
                      "source": f"no entry matches {name!r} in bench/machines.toml: no floors"}
    return base, {"hbm": entry.get("hbm_bytes_per_s"), "l1": entry.get("l1_bytes_per_s"),
                  "l2": entry.get("l2_bytes_per_s"), "source": entry.get("source", "bench/machines.toml")}


def proc_field(path, key):
    """The value of the first `key:` line of a /proc file, or None."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_info():
    model = proc_field("/proc/cpuinfo", "model name") or platform.processor() or None
    mem = proc_field("/proc/meminfo", "MemTotal:")
    return {"model": model, "cores": os.cpu_count(), "memory": mem}


PEER_VERSIONS = r"""
import json
d = {}
try:
    import torch
    d["torch"] = torch.__version__
    d["torch_cuda"] = torch.version.cuda
    d["torch_gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
except Exception as e:
    d["torch"] = None
    d["torch_error"] = repr(e)[:200]
try:
    import torch_geometric
    d["torch_geometric"] = torch_geometric.__version__
except Exception as e:
    d["torch_geometric"] = None
    d["torch_geometric_error"] = repr(e)[:200]
print(json.dumps(d))
"""


def peer_versions(env):
    try:
        p = subprocess.run([sys.executable, "-c", PEER_VERSIONS], capture_output=True, text=True,
                           timeout=300, env=env)
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as e:
        return {"torch": None, "torch_geometric": None, "error": repr(e)[:200]}


def version_matches(found, want):
    """`found` (e.g. "2.11.0+cu130") is release `want` (e.g. "2.11")."""
    if not found:
        return False
    release = found.split("+")[0]
    return release == want or release.startswith(want + ".")


def git_head(bin_dir):
    """The commit the binaries were built from: .dev/GIT_HEAD (written by
    scripts/bench-pack.sh with the binaries it packs into .dev/bin, and there where the carried
    checkout has no .git) when the binaries come from .dev/bin, else `git rev-parse HEAD`
    ("+dirty" when tracked files differ from it)."""
    path = os.path.join(REPO, ".dev", "GIT_HEAD")
    packed = os.path.abspath(bin_dir) == os.path.join(REPO, ".dev", "bin")

    def from_file():
        with open(path) as f:
            return {"hash": f.read().strip(), "source": ".dev/GIT_HEAD"}

    if packed and os.path.isfile(path):
        return from_file()
    try:
        p = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO, timeout=30)
        if p.returncode == 0:
            d = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, cwd=REPO, timeout=30)
            return {"hash": p.stdout.strip() + ("+dirty" if d.stdout.strip() else ""), "source": "git"}
    except (OSError, subprocess.TimeoutExpired):
        pass
    if os.path.isfile(path):
        return from_file()
    return {"hash": None, "source": "none: no .dev/GIT_HEAD and no git"}


# The runs' processes start sessions of their own (so a timeout kills a run's whole tree), which
# also means that a runner ended from outside (`timeout`, Ctrl-C, a closed terminal) would leave
# them running: on a GPU machine they keep the GPUs and skew every later measurement. Every
# child is registered here and its process group killed when the runner gets SIGTERM, SIGINT or
# SIGHUP.
CHILDREN = set()


def spawn(argv, **kw):
    """subprocess.Popen(argv, start_new_session=True, **kw), registered in CHILDREN."""
    p = subprocess.Popen(argv, start_new_session=True, **kw)
    CHILDREN.add(p)
    return p


def reap(p):
    """Forgets a finished child."""
    CHILDREN.discard(p)


def kill_children(signum=None, frame=None):
    """Kills every registered child's process group; as a signal handler, then exits 128 + signum."""
    for p in list(CHILDREN):
        # A child already waited for (its pid, and so its group id, may be reused) is skipped.
        if p.returncode is not None or p.poll() is not None:
            continue
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    CHILDREN.clear()
    if signum is not None:
        # os.write, not print: the handler may interrupt a write to stderr in progress.
        os.write(2, f"\nrunner ended by signal {signum}: its runs' processes were killed\n".encode())
        os._exit(128 + signum)


def install_reaper():
    """Kills the children when this process is ended by SIGTERM, SIGINT or SIGHUP."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, kill_children)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def find_binary(bin_dir, name):
    """`bin_dir/name`; where `name.xz` is there, unpacked from it beside itself unless the
    unpacked copy came from this very .xz (its sha256 kept in `.name.xz.sha256`): a warm
    machine keeps the last call's copy, and file times need not survive the carry."""
    path = os.path.join(bin_dir, name)
    packed = path + ".xz"
    if os.path.isfile(packed):
        stamp = os.path.join(bin_dir, f".{name}.xz.sha256")
        digest = sha256(packed)
        try:
            with open(stamp) as f:
                fresh = f.read().strip() == digest and os.path.isfile(path)
        except OSError:
            fresh = False
        if not fresh:
            tmp = path + ".unpacking"
            with lzma.open(packed) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            os.chmod(tmp, 0o755)
            os.replace(tmp, path)
            with open(stamp, "w") as f:
                f.write(digest + "\n")
    if not os.path.isfile(path):
        have = sorted(os.listdir(bin_dir)) if os.path.isdir(bin_dir) else []
        raise FileNotFoundError(f"no {name} (or {name}.xz) in {bin_dir} (it holds: {', '.join(have) or 'nothing'}); "
                                "build and pack it with scripts/bench-pack.sh on the development machine")
    return path


# ---------------------------------------------------------------- records


def record_dir(out, suite_name, machine, date):
    """A new folder OUT/<suite>/<machine>-<date>, suffixed -2, -3, ... when taken."""
    base = os.path.join(out, suite_name, f"{machine}-{date}")
    path, n = base, 1
    while os.path.exists(path):
        n += 1
        path = f"{base}-{n}"
    os.makedirs(path)
    return path


def pack(record, target):
    """record folder -> target (.tar.gz), as <suite>/<record>/..., atomically."""
    tmp = target + ".tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        rel = os.path.join(os.path.basename(os.path.dirname(record)), os.path.basename(record))
        tar.add(record, arcname=rel)
    os.replace(tmp, target)


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------- extraction


def _get(doc, *path):
    cur = doc
    for key in path:
        if not isinstance(cur, dict) or key not in cur:
            raise Failure(f"the run's JSON has no {'.'.join(path)}")
        cur = cur[key]
    return cur


def cache_applies(model, train):
    """Whether the input-aggregation cache ran (gnn_models::Gnn::input_aggregate_reduce): asked
    for, a GCN / GraphSAGE-mean / GIN model, no input dropout, no MaxK from the first layer."""
    act = model.get("activation")
    maxk = not (isinstance(act, str) and act.lower() in ("relu", "elu")) and not model.get("maxk_after_first", False)
    return bool(train.get("cache_input_aggregate")) and model.get("kind") in ("gcn", "sage_mean", "gin") \
        and model.get("input_dropout", 1.0) == 0.0 and not maxk


def labelled_output_applies(train, ds, out_dim):
    """Whether the output layer ran on the labelled rows alone (gnn_train's
    trainer::output::restricts): asked for (the default) and at most half of the nodes
    labelled, or the whole logits past candle's 2^32 - 1 elements."""
    labelled = ds["train"] + ds["val"] + ds["test"]
    return (train.get("labelled_output", True) and 2 * labelled <= ds["nodes"]) \
        or ds["nodes"] * out_dim > 2**32 - 1


def train_rows_applies(model, train, ds):
    """Whether a training pass computed its output layer for the train rows alone (gnn_train's
    trainer::output::trains_on_train_rows): asked for (train_rows_output under labelled_output;
    reports from before the option never did), a GCN, GraphSAGE or GIN of two layers or more, and at
    most 90 % of the nodes in the train split."""
    return bool(train.get("train_rows_output", False)) and bool(train.get("labelled_output", True)) \
        and model.get("kind") in ("gcn", "sage_mean", "sage_pool", "gin") and model.get("layers", 0) >= 2 \
        and 0 < ds["train"] <= 0.9 * ds["nodes"]


def extract_train(doc, m, graph_facts):
    """Ours, one train_reddit report -> the measurement's sample."""
    report = _get(doc, "gnn", "report")
    ds = _get(doc, "dataset_summary")
    model = _get(doc, "gnn", "model")
    train = _get(doc, "train")
    prec = train.get("precision")
    if prec != m.precision:
        raise Failure(f"the report says precision {prec}, the suite asked for {m.precision}")
    want_kind = {"sage": "sage_mean"}.get(m.spec["model"], m.spec["model"])
    if model.get("kind") != want_kind:
        raise Failure(f"the report's model is {model.get('kind')}, the suite asked for {want_kind}")
    if graph_facts and m.spec.get("graph_folder"):
        # A saved-graph suite's facts are per folder.
        graph_facts = graph_facts.get(m.spec["graph_folder"])
    # same_graph.py's facts count the non-zeros as nnz, a saved graph's as edges.
    wrote = graph_facts and (graph_facts["nodes"], graph_facts.get("nnz", graph_facts.get("edges")))
    if wrote and (ds["nodes"], ds["edges"]) != wrote:
        raise Failure(f"loaded {ds['nodes']} nodes / {ds['edges']} edges, but the graph step wrote "
                      f"{wrote[0]} / {wrote[1]}")
    cache = cache_applies(model, train)
    shortcuts = ["input-cache"] if cache else []
    if labelled_output_applies(train, ds, model["out_dim"]):
        shortcuts.append("labelled-output")
    if train_rows_applies(model, train, ds):
        shortcuts.append("train-rows")
    if sorted(shortcuts) != m.shortcuts:
        raise Failure(f"the run's shortcuts are {shortcuts}, the suite declared {m.shortcuts}")
    kind = model["kind"]
    widths = floors.epoch_spmm_widths("ours", kind, model["layers"], model["in_dim"], model["hidden"],
                                      model["out_dim"], cache)
    nnz = suites.spmm_operand_nnz(kind, ds["nodes"], ds["edges"])
    work = None
    if widths is not None and nnz is not None:
        elem, values = floors.element_bytes(prec), kind in floors.GCN_KINDS
        work = floors.epoch_work(ds["nodes"], nnz, widths, elem, values=values)
        if "train-rows" in shortcuts:
            # The output layer's two SpMMs (the last widths: its forward and its backward) run
            # over the train rows' edges alone, counted as the train split's share of the
            # non-zeros (the split is random on the same-graph files; their X and Y rows are
            # counted whole, over by the other rows' Y, under 1 % of the bytes).
            share = ds["train"] / ds["nodes"]
            head = floors.epoch_work(ds["nodes"], nnz, widths[:-2], elem, values=values)
            tail = floors.epoch_work(ds["nodes"], round(nnz * share), widths[-2:], elem, values=values)
            work = floors.Work(head.compulsory + tail.compulsory, head.gather + tail.gather)
    info = {"test_acc": report.get("test_acc"), "peak_allocated_bytes": report.get("peak_allocated_bytes")}
    if m.peer == "python":
        # bench/peers/python_train.py: the wall time between epoch callbacks less the step.
        py = _get(doc, "python")
        info.update({"wall_ms": py.get("wall_ms_median"), "between_ms": py.get("between_ms_median")})
    return {"ms": float(report["epoch_ms_median"]), "work": work,
            "facts": {"nodes": ds["nodes"], "nnz": nnz, "spmm_widths": widths}, "info": info}


def python_overhead(rows, samples):
    """Issue 40's goal, Python-side overhead <= 2 % of the GPU epoch: for every row name that
    ours (train_reddit) and the `python` peer (gnn.train on the same files, run right after)
    both measured, the two epoch medians and `epoch_overhead_pct` = python / ours - 1 (the
    engine's epoch as the package ran it), and `outside_step_pct` = the package's median time
    per epoch outside the step (between its epoch callbacks: the Python hook, the progress
    display and the engine's bookkeeping; median over its repetitions) over ours' epoch (an
    upper bound on what the Python side adds per epoch). `samples`: {row id: [sample]}."""
    by_name = {}
    for r in rows:
        by_name.setdefault(r["name"], {})[r["peer"]] = r
    out = []
    for name in sorted(by_name):
        ours, py = by_name[name].get("ours"), by_name[name].get("python")
        if not ours or not py or ours.get("median_ms") is None or py.get("median_ms") is None:
            continue
        between = [s["info"].get("between_ms") for s in samples.get(py["id"], [])]
        between = [b for b in between if isinstance(b, (int, float))]
        b = statistics.median(between) if between else None
        o = ours["median_ms"]
        out.append({"name": name, "precision": ours["precision"], "ours_ms": o, "python_ms": py["median_ms"],
                    "epoch_overhead_pct": round(100.0 * (py["median_ms"] / o - 1.0), 3),
                    "between_ms": None if b is None else round(b, 4),
                    "outside_step_pct": None if b is None else round(100.0 * b / o, 3),
                    "repetitions": [ours["repetitions"], py["repetitions"]]})
    return out


def overhead_table(entries):
    """python_overhead's rows as the runner prints them."""
    head = ["row", "ours ms", "python ms", "epoch +%", "outside step ms", "outside step %"]
    body = [[e["name"], f"{e['ours_ms']:.3f}", f"{e['python_ms']:.3f}", f"{e['epoch_overhead_pct']:+.2f}",
             "-" if e["between_ms"] is None else f"{e['between_ms']:.3f}",
             "-" if e["outside_step_pct"] is None else f"{e['outside_step_pct']:.2f}"] for e in entries]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))
             for cells in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def graph_args_value(args, flag):
    if flag in args:
        i = args.index(flag)
        if i + 1 < len(args):
            return int(args[i + 1])
    return SAME_GRAPH_DEFAULTS[flag]


def extract_same_graph_peer(doc, m, graph_facts, graph_args):
    """A pyg / tgcn measurement from same_graph.py's JSON."""
    g = _get(doc, "graph")
    if graph_facts and any(g.get(k) != graph_facts.get(k) for k in ("nodes", "nnz", "max_deg", "train", "val", "test")):
        raise Failure(f"the peer's graph {g} differs from the graph step's {graph_facts}")
    name = suites.peer_model(m)
    r = _get(doc, "pyg_runs", name)
    if "error" in r:
        raise Failure(f"{name}: {r['error']}")
    s = m.spec
    kind = "gcn" if m.peer == "tgcn" else s["model"]
    widths = floors.epoch_spmm_widths(m.peer, kind, s["layers"], graph_args_value(graph_args, "--feat"),
                                      s["hidden"], graph_args_value(graph_args, "--classes"), False)
    # No SpMM widths for a model the floors do not count (GAT): no floors, as for ours.
    work = None if widths is None else \
        floors.epoch_work(g["nodes"], g["nnz"], widths, floors.element_bytes(m.precision), values=True)
    info = {"test_acc": r.get("test_acc"), "peak_allocated_bytes":
            round(r["peak_GiB"] * 2**30) if isinstance(r.get("peak_GiB"), (int, float)) else None}
    return {"ms": float(r["epoch_ms_median"]), "work": work,
            "facts": {"nodes": g["nodes"], "nnz": g["nnz"], "spmm_widths": widths}, "info": info}


def _row_at(rows, k, what, **match):
    for r in rows:
        if r.get("k") == k and all(r.get(a) == b for a, b in match.items()):
            return r
    raise Failure(f"no {what} row at K={k} {match or ''}")


def extract_spmm(doc, m):
    g = _get(doc, "graph")
    n, nnz = g["nodes"], g["nnz"]
    if m.peer == "cusparse":
        r = _row_at(_get(doc, "rows"), m.k, "SpMM")
        ms = min(r["cusparse_default_ms"], r["cusparse_csr_alg2_ms"])
        info = {"cusparse_default_ms": r["cusparse_default_ms"], "cusparse_csr_alg2_ms": r["cusparse_csr_alg2_ms"]}
    elif m.precision == "f32":
        r = _row_at(_get(doc, "rows"), m.k, "SpMM")
        ms = r["ours_weighted_sum_ms"]
        info = {"rel_err_vs_cusparse": r.get("rel_err_vs_cusparse")}
    else:
        r = _row_at(_get(doc, "kernels"), m.k, "per-kernel", dtype=m.precision)
        ms = r["auto_ms"]
        info = {"ge_ms": r.get("ge_ms"), "narrow_ms": r.get("narrow_ms"), "hp_ms": r.get("hp_ms")}
    work = floors.spmm_work(n, nnz, m.k, floors.element_bytes(m.precision), values=True)
    return {"ms": float(ms), "work": work, "facts": {"nodes": n, "nnz": nnz}, "info": info}


def extract_sddmm(doc, m):
    if "graph" in doc:
        n, nnz = doc["graph"]["nodes"], doc["graph"]["nnz"]
    else:
        n, nnz = _get(doc, "nodes"), _get(doc, "nnz")
    r = _row_at(_get(doc, "rows"), m.k, "SDDMM")
    key = {"ours": "hp_ms", "cusparse": "cusparse_ms", "torch": "torch_gather_ms"}[m.peer]
    if key not in r:
        raise Failure(f"the SDDMM row at K={m.k} has no {key}")
    work = floors.sddmm_work(n, nnz, m.k, floors.element_bytes(m.precision))
    info = {"hp_npw": r["hp_npw"]} if m.peer == "ours" and "hp_npw" in r else {}
    return {"ms": float(r[key]), "work": work, "facts": {"nodes": n, "nnz": nnz}, "info": info}


def extract_graphs(doc, m):
    """The dispatcher's SpMM of one (graph, K, precision) from bench_graphs' JSON; its info
    carries the verdict (the pick, the fastest candidate, the regret) and every candidate's
    time."""
    g = m.spec["graph"]
    for r in _get(doc, "rows"):
        if r.get("graph") == g and r.get("k") == m.k and r.get("precision") == m.precision:
            break
    else:
        raise Failure(f"no bench_graphs row for {g!r} at K={m.k} {m.precision}")
    n, nnz = r["nodes"], r["nnz"]
    work = floors.spmm_work(n, nnz, m.k, floors.element_bytes(m.precision), values=True)
    info = {key: r.get(key) for key in ("dispatch", "best", "regret", "pick_is_best", "pick_ms", "best_ms",
                                        "ge_ms", "narrow_ms", "hp_ms", "family", "order")}
    return {"ms": float(r["auto_ms"]), "work": work, "facts": {"nodes": n, "nnz": nnz, "graph": g}, "info": info}


def _phase_ms(rank, prefix):
    """A rank's ms per epoch of the breakdown phase whose name starts with `prefix`, or None."""
    for r in rank.get("breakdown") or []:
        if str(r.get("phase", "")).startswith(prefix):
            return r.get("ms_per_epoch")
    return None


# The saved graph's file (gnn_graph::io::binary::FILE_NAME) and the runner's stamp beside it.
GRAPH_FILE = "graph.gnncsr"
STAMP = "bench-graph.json"


def parse_saved_graph_log(text):
    """The graph step's facts from train_dist's output: the dataset's summary line
    (`<name>: N nodes, E edges, F features, C classes, split a/b/c`), the generator's seconds
    and the written file's line; None without the summary."""
    m = re.search(r"^(\S+): (\d+) nodes, (\d+) edges, (\d+) features, (\d+) classes, split (\d+)/(\d+)/(\d+)",
                  text, re.M)
    if not m:
        return None
    facts = {"name": m.group(1), "nodes": int(m.group(2)), "edges": int(m.group(3)),
             "features": int(m.group(4)), "classes": int(m.group(5)),
             "split": [int(m.group(i)) for i in (6, 7, 8)]}
    g = re.search(r"^generated .* in ([0-9.]+) s$", text, re.M)
    w = re.search(r"^wrote \S+ \(([0-9.]+) GB\) in ([0-9.]+) s", text, re.M)
    facts["generate_s"] = float(g.group(1)) if g else None
    facts["write_s"] = float(w.group(2)) if w else None
    return facts


def saved_graph(exe, flags, out, stem, execute, record, scratch):
    """The graph generator `flags` make, in gnn's binary CSR at `out`/graph.gnncsr (runs
    memory-map it with --data-dir): generated by `exe` (train_dist) --save-graph, run through
    `execute(stem, argv)` (its output in `record`/<stem>.log), or reused where `out`'s stamp
    says the same flags and the same binary wrote it (a warm machine keeps /tmp between
    calls; command.txt says so). Returns (facts, None) or (None, error)."""
    stamp_path = os.path.join(out, STAMP)
    want = {"flags": list(flags), "binary_sha256": sha256(exe)}
    stamp = None
    try:
        with open(stamp_path) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        pass
    data = os.path.join(out, GRAPH_FILE)
    if stamp and {k: stamp.get(k) for k in want} == want and os.path.isfile(data) \
            and os.path.getsize(data) == stamp.get("facts", {}).get("file_bytes"):
        with open(os.path.join(record, "command.txt"), "a") as f:
            f.write(f"# {stem}: reused {shown_path(out)} (its {STAMP}: the same flags and binary; "
                    f"written {stamp.get('written', '?')})\n")
        print(f"{stem}: reusing {out}", flush=True)
        return dict(stamp["facts"], reused=True, flags=list(flags), dir=out), None
    if os.path.exists(stamp_path):
        os.remove(stamp_path)
    os.makedirs(out, exist_ok=True)
    argv = [shown_path(exe)] + list(flags) + ["--stats-only", "--ranks", "1", "--partition", "range",
                                              "--save-graph", out, "--json", os.path.join(scratch, "graph-stats.json")]
    rc, secs = execute(stem, argv)
    facts = None
    if rc == 0:
        with open(os.path.join(record, f"{stem}.log")) as f:
            facts = parse_saved_graph_log(f.read())
    if rc != 0 or facts is None or not os.path.isfile(data):
        return None, f"the graph step failed (exit {rc}); see {stem}.log"
    facts.update(file_bytes=os.path.getsize(data), step_s=round(secs, 1))
    write_json(stamp_path, dict(want, facts=facts, written=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
    return dict(facts, reused=False, flags=list(flags), dir=out), None


def extract_dist(doc, m, graph_facts):
    """Ours over several ranks, one train_dist report -> the measurement's sample. The time is
    the slowest rank's median epoch (the ranks meet at every all-reduce, so they differ by
    noise); the info holds the partition and the per-rank figures the scaling tables quote."""
    s = m.spec
    ds = _get(doc, "dataset")
    model = _get(doc, "model")
    train = _get(doc, "train")
    ranks = _get(doc, "ranks")
    part = _get(doc, "partition")
    if train.get("precision") != m.precision:
        raise Failure(f"the report says precision {train.get('precision')}, the suite asked for {m.precision}")
    want_kind = {"sage": "sage_mean"}.get(s["model"], s["model"])
    if model.get("kind") != want_kind or model.get("layers") != s["layers"] or model.get("hidden") != s["hidden"]:
        raise Failure(f"the report's model is {model.get('kind')} {model.get('layers')}x{model.get('hidden')}, "
                      f"the suite asked for {want_kind} {s['layers']}x{s['hidden']}")
    if len(ranks) != s["ranks"] or part.get("parts") != s["ranks"]:
        raise Failure(f"the report has {len(ranks)} ranks ({part.get('parts')} parts), the suite asked for {s['ranks']}")
    chosen = part.get("chosen")
    if s["ranks"] > 1 and s["partition"] != "auto" and chosen != s["partition"]:
        raise Failure(f"the run used the {chosen} partition, the suite asked for {s['partition']}")
    facts = graph_facts.get(s["graph_folder"]) if graph_facts and s.get("graph_folder") else None
    if facts and (ds["nodes"] != facts["nodes"] or ds["edges"] != facts["edges"]):
        raise Failure(f"loaded {ds['nodes']} nodes / {ds['edges']} edges, but the graph step wrote "
                      f"{facts['nodes']} / {facts['edges']}")
    used = next((r for r in part.get("compared") or []
                 if r.get("method") == chosen and r.get("parts") == s["ranks"]), None)
    if used is None:
        raise Failure(f"the report's partition.compared has no {chosen} row of {s['ranks']} parts")
    epoch = max(float(r["epoch_ms_median"]) for r in ranks)
    comm_ms = [_phase_ms(r, "communication") for r in ranks]
    total_ms = [_phase_ms(r, "epoch total") for r in ranks]
    shares = [c / t for c, t in zip(comm_ms, total_ms) if c is not None and t]
    peaks = [r.get("peak_allocated_bytes") for r in ranks]
    metis = used.get("metis") or {}
    info = {
        "ranks": s["ranks"], "partition": chosen, "partition_requested": part.get("requested"),
        "exchange": doc.get("exchange"), "fused_aggregation": doc.get("fused_aggregation"),
        "comm": doc.get("comm"),
        "epoch_ms_per_rank": [r["epoch_ms_median"] for r in ranks],
        # The profiled epoch's communication phase (halo exchange + gradient all-reduce, as
        # the rank waited for it) over its total, per rank and their mean.
        "comm_ms_per_rank": comm_ms,
        "comm_share_per_rank": [round(x, 4) for x in shares],
        "comm_share": round(sum(shares) / len(shares), 4) if shares else None,
        "comm_bytes_per_epoch_per_rank": [r.get("comm_bytes_per_epoch") for r in ranks],
        "peak_allocated_bytes_per_rank": peaks,
        "peak_allocated_bytes": max((p for p in peaks if p is not None), default=None),
        "peak_device_bytes_per_rank": [r.get("peak_device_bytes") for r in ranks],
        # Rows each rank receives per exchange (the all-gather's rows under it), and the
        # partition's halo rows (the point-to-point volume) and edge cut.
        "received_rows_per_rank": [r.get("halo") for r in ranks],
        "halo_rows_per_rank": used.get("halo"), "total_halo_rows": used.get("total_halo"),
        "edge_cut": used.get("edge_cut"), "edge_cut_share": used.get("edge_cut_share"),
        "nnz_imbalance": used.get("nnz_imbalance"), "partition_s": used.get("seconds"),
        "metis_edge_sample": metis.get("edge_sample"),
        "test_acc": doc.get("test_acc"), "time_to_accuracy": doc.get("time_to_accuracy"),
        "wall_s": doc.get("wall_s"),
    }
    return {"ms": epoch, "work": None,
            "facts": {"nodes": ds["nodes"], "nnz": ds["edges"], "graph": ds.get("name"), "ranks": s["ranks"],
                      "partition": chosen},
            "info": info}


# ---------------------------------------------------------------- summary


def summarize(measurement, samples, failures, reps_wanted, rates):
    """One summary row from a measurement's samples (one per passed repetition)."""
    m = measurement
    row = {"id": m.id, "name": m.name, "case": m.case, "kind": m.kind, "model": m.model,
           "precision": m.precision, "shortcuts": m.shortcuts, "peer": m.peer, "k": m.k,
           "repetitions": len(samples), "repetitions_wanted": reps_wanted,
           "times_ms": [round(s["ms"], 4) for s in samples], "raw": [s["raw"] for s in samples],
           "failures": failures, "status": "ok" if samples and not failures else "failed"}
    if not samples:
        row.update({"median_ms": None, "bytes_moved": None, "gather_bytes": None, "achieved_bytes_per_s": None,
                    "floor_ms": None, "distance": None})
        return row
    median = statistics.median(s["ms"] for s in samples)
    row["median_ms"] = round(median, 4)
    first = samples[0]
    row.update({k: v for k, v in first["facts"].items()})
    row["info"] = first["info"]
    work = first["work"]
    if work is None:
        row.update({"bytes_moved": None, "gather_bytes": None, "achieved_bytes_per_s": None,
                    "floor_ms": None, "distance": None})
    else:
        f = floors.floors(work, floors.Rates(rates.get("hbm"), rates.get("l1"), rates.get("l2")), median)
        row.update(f)
    return row


def print_table(rows):
    print()
    print(results.text_table(rows))


# ---------------------------------------------------------------- running


def shown_path(path):
    """`path` relative to the repository root (where every command runs) when inside it, so
    command.txt reads the same on every machine."""
    full = os.path.abspath(path)
    if not full.startswith(REPO + os.sep):
        return path
    rel = os.path.relpath(full, REPO)
    return rel if os.sep in rel else os.path.join(".", rel)  # never a bare name (PATH lookup)


def fill(args, values):
    return [a.format(**values) if "{" in a else a for a in args]


class Runner:
    def __init__(self, opts, suite, record, env, rates, graph_dir, anchors_dir, scratch):
        self.o = opts
        self.suite = suite
        self.record = record
        self.env = env
        # What command.txt shows beside each line: the variables run.py sets, and those of
        # the caller's environment that change what runs (NCCL's settings, the GPUs seen).
        self.env_added = {k: v for k, v in env.items()
                          if k in ("LD_LIBRARY_PATH", "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES")
                          or k.startswith("NCCL_")}
        self.rates = rates
        self.graph_dir = graph_dir
        self.anchors_dir = anchors_dir
        self.scratch = scratch
        self.samples = {m.id: [] for m in suite.measurements}
        self.failures = {m.id: [] for m in suite.measurements}
        self.run_failures = []
        self.graph_facts = None
        self.summary_head = {}
        # Runs that started on a GPU another process held ([`busy_gpus`]).
        self.busy = []

    def log_command(self, stem, argv, env_extra, rc, secs):
        envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in env_extra.items())
        with open(os.path.join(self.record, "command.txt"), "a") as f:
            f.write(f"# {stem}: exit {rc}, {secs:.1f} s\n{(envs + ' ') if envs else ''}{shlex.join(argv)}\n")

    def check_idle(self, stem):
        """Notes (command.txt, summary.json's busy_gpus, the console) when a GPU is not idle
        as `stem` starts: its numbers then share the GPU with another process."""
        busy = busy_gpus(gpu_occupancy())
        if not busy:
            return
        note = busy_note(busy)
        self.busy.append({"run": stem, "gpus": busy})
        with open(os.path.join(self.record, "command.txt"), "a") as f:
            f.write(f"# before {stem}: {note}\n")
        print(f"[{time.strftime('%H:%M:%S')}] WARNING before {stem}: {note}", flush=True)

    def execute(self, stem, argv, env_extra=None):
        """Runs argv with its output in <stem>.log; returns (exit status or 'timeout', seconds)."""
        env = dict(self.env)
        env.update(env_extra or {})
        log = os.path.join(self.record, stem + ".log")
        self.check_idle(stem)
        print(f"[{time.strftime('%H:%M:%S')}] {stem}: {shlex.join(argv)}", flush=True)
        t = time.monotonic()
        with open(log, "w") as out:
            p = spawn(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
            try:
                rc = p.wait(timeout=self.suite.timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = "timeout"
            reap(p)
        secs = time.monotonic() - t
        self.log_command(stem, argv, {**self.env_added, **(env_extra or {})}, rc, secs)
        print(f"[{time.strftime('%H:%M:%S')}] {stem}: exit {rc} ({secs:.1f} s)", flush=True)
        return rc, secs

    def graph_step(self):
        """same-graph suites: write the graph files once (the peers' runs rewrite the same);
        saved-graph suites: [`saved_graph_step`]."""
        g = self.suite.graph
        if g["source"] == "saved":
            return self.saved_graph_step()
        if g["source"] != "same-graph":
            return True
        script = shown_path(os.path.join(self.anchors_dir, g["script"]))
        argv = [sys.executable, script, "--dir", self.graph_dir, "--skip-pyg"] + list(g.get("args", []))
        rc, _ = self.execute("graph", argv)
        facts = None
        if rc == 0:
            with open(os.path.join(self.record, "graph.log")) as f:
                for line in f:
                    if line.startswith("{"):
                        try:
                            facts = json.loads(line).get("graph")
                        except ValueError:
                            facts = None
                        break
        if rc != 0 or not facts:
            self.run_failures.append({"run": "graph", "error": f"the graph step failed (exit {rc}); see graph.log"})
            return False
        self.graph_facts = facts
        write_json(os.path.join(self.record, "graph.json"), facts)
        return True

    def saved_graph_step(self):
        """saved-graph suites: each graph its runs load, made or reused by [`saved_graph`]
        in <graph dir>/<folder>."""
        facts_all = {}
        exe = find_binary(self.o.bin_dir, suites.KINDS["dist"])
        for folder, flags in self.suite.saved_graphs():
            facts, error = saved_graph(exe, flags, os.path.join(self.graph_dir, folder), f"graph-{folder}",
                                       self.execute, self.record, self.scratch)
            if error:
                self.run_failures.append({"run": f"graph-{folder}", "error": error})
                return False
            facts_all[folder] = facts
        self.graph_facts = facts_all
        write_json(os.path.join(self.record, "graph.json"), facts_all)
        return True

    def one(self, run, rep):
        stem = f"{run.name}-r{rep}"
        raw = os.path.join(self.record, stem + ".json")
        values = {"json": shown_path(raw), "scratch": self.scratch, "graph_dir": self.graph_dir}
        env_extra = {}
        args = list(run.args)
        if run.kind == "sddmm" and rep > 1 and "--dump" in args:
            i = args.index("--dump")  # the graph is dumped once (same seed every repetition)
            del args[i:i + 2]
        if run.binary:
            argv = [shown_path(find_binary(self.o.bin_dir, run.binary))] + fill(args, values)
        elif run.kind == "same-graph-peers":
            peer_out = os.path.join(self.scratch, "peer-out")
            os.makedirs(peer_out, exist_ok=True)
            env_extra["OUT"] = peer_out
            argv = [sys.executable, shown_path(os.path.join(self.anchors_dir, run.script))] + fill(args, values) + \
                list(self.suite.graph.get("args", []))
        else:
            argv = [sys.executable, run.script] + fill(args, values)
        rc, _ = self.execute(stem, argv, env_extra)
        error = None
        doc = None
        if run.kind == "same-graph-peers" and rc == 0:
            src = os.path.join(env_extra["OUT"], "same_graph_pyg.json")
            if os.path.isfile(src):
                shutil.move(src, raw)
        if rc != 0:
            error = f"exit {rc}; see {stem}.log"
        elif not os.path.isfile(raw):
            error = f"exit 0 but no {os.path.basename(raw)}; see {stem}.log"
        else:
            try:
                with open(raw) as f:
                    doc = json.load(f)
            except ValueError as e:
                error = f"{os.path.basename(raw)} is not JSON: {e}"
        if error:
            self.run_failures.append({"run": stem, "error": error})
            for m in run.measurements:
                self.failures[m.id].append(stem)
            return
        for m in run.measurements:
            try:
                if run.kind == "train":
                    s = extract_train(doc, m, self.graph_facts)
                elif run.kind == "same-graph-peers":
                    s = extract_same_graph_peer(doc, m, self.graph_facts, self.suite.graph.get("args", []))
                elif run.kind == "spmm":
                    s = extract_spmm(doc, m)
                elif run.kind == "graphs":
                    s = extract_graphs(doc, m)
                elif run.kind == "dist":
                    s = extract_dist(doc, m, self.graph_facts)
                else:
                    s = extract_sddmm(doc, m)
            except (Failure, KeyError, TypeError, ValueError) as e:
                msg = str(e) if isinstance(e, Failure) else f"unexpected JSON ({type(e).__name__}: {e})"
                self.run_failures.append({"run": stem, "row": m.id, "error": msg})
                self.failures[m.id].append(stem)
                continue
            s["raw"] = os.path.basename(raw)
            self.samples[m.id].append(s)

    def rows(self):
        if self.o.graphs_only:
            return []
        return [summarize(m, self.samples[m.id], self.failures[m.id], self.reps, self.rates)
                for m in self.suite.measurements]

    def write_summary(self):
        doc = dict(self.summary_head)
        doc["rows"] = self.rows()
        if any(m.peer == "python" for m in self.suite.measurements):
            doc["python_overhead"] = python_overhead(doc["rows"], self.samples)
        doc["run_failures"] = self.run_failures
        doc["busy_gpus"] = self.busy
        write_json(os.path.join(self.record, "summary.json"), doc)
        if self.o.pack:
            pack(self.record, self.o.pack)

    def go(self, reps):
        self.reps = reps
        self.write_summary()
        if not self.graph_step() or self.o.graphs_only:
            self.write_summary()
            return
        for rep in range(1, reps + 1):
            for run in self.suite.runs:
                self.one(run, rep)
                self.write_summary()
                if self.run_failures and self.o.fail_fast:
                    return


def main(argv=None):
    install_reaper()
    ap = argparse.ArgumentParser(description="Run one benchmark suite and write its record folder.")
    ap.add_argument("suite", help="a suite name (bench/suites/NAME.toml) or a path to a suite file")
    ap.add_argument("--bin-dir", default=os.path.join(REPO, ".dev", "bin"),
                    help="where the example binaries (or their .xz) are [default: .dev/bin]")
    ap.add_argument("--anchors-dir", default=os.path.join(REPO, ".dev", "anchors"),
                    help="where same_graph.py is [default: .dev/anchors]")
    ap.add_argument("--out", default=os.path.join(HERE, "records"),
                    help="records root: the record goes to OUT/<suite>/<machine>-<date> [default: bench/records]")
    ap.add_argument("--only", action="append", default=[], metavar="ROW",
                    help="run only these rows: a case name, a row name or id (fnmatch patterns; repeatable, "
                         "or comma-separated)")
    ap.add_argument("--reps", type=int, help="repetitions instead of the suite's")
    ap.add_argument("--graph-dir", help="where a same-graph suite writes its graph files [default: the suite's]")
    ap.add_argument("--machine", help="the record's machine name instead of the detected one")
    ap.add_argument("--pack", metavar="FILE", help="also keep FILE (.tar.gz) holding the record, rewritten after every run")
    ap.add_argument("--any-versions", action="store_true", help="run even when the peers' versions differ from the suite's")
    ap.add_argument("--fail-fast", action="store_true", help="stop at the first failed run")
    ap.add_argument("--dry-run", action="store_true", help="print the runs and exit")
    ap.add_argument("--graphs-only", action="store_true",
                    help="a saved-graph suite: only make (or check) the graphs of the selected rows, so the runs "
                         "of a later command find them; the record holds no rows")
    o = ap.parse_args(argv)

    path = o.suite if o.suite.endswith(".toml") else os.path.join(HERE, "suites", o.suite + ".toml")
    if not os.path.isfile(path):
        have = sorted(f[:-5] for f in os.listdir(os.path.join(HERE, "suites")) if f.endswith(".toml"))
        die(f"no suite {o.suite!r} (suites: {', '.join(have)})")
    try:
        s = suites.load(path).select([p for x in o.only for p in x.split(",") if p])
    except suites.SuiteError as e:
        die(str(e))
    reps = o.reps or s.repetitions
    if reps < 1:
        die("--reps must be >= 1")
    graph_dir = o.graph_dir or s.graph.get("dir", "")
    if o.graphs_only and s.graph["source"] not in ("saved", "same-graph"):
        die(f"--graphs-only: suite {s.name}'s runs make their own graphs (source {s.graph['source']!r})")

    if o.dry_run:
        print(f"suite {s.name}: {len(s.measurements)} rows, {len(s.runs)} runs x {reps} repetitions")
        if s.graph["source"] == "same-graph":
            print(f"  graph: {os.path.join(o.anchors_dir, s.graph['script'])} --dir {graph_dir} --skip-pyg "
                  + " ".join(s.graph.get("args", [])))
        for folder, flags in s.saved_graphs():
            print(f"  graph-{folder}: {os.path.join(o.bin_dir, suites.KINDS['dist'])} {shlex.join(flags)} "
                  f"--stats-only --ranks 1 --partition range --save-graph {os.path.join(graph_dir, folder)} "
                  f"(skipped where its {STAMP} matches)")
        for r in s.runs:
            exe = os.path.join(o.bin_dir, r.binary) if r.binary else r.script
            print(f"  {r.name}: {exe} {shlex.join(r.args)}")
            for m in r.measurements:
                print(f"      -> {m.id}")
        return 0

    env = dict(os.environ)
    libs = [d for d in CUDA_LIB_DIRS if os.path.isdir(d)]
    if libs:
        env["LD_LIBRARY_PATH"] = ":".join(libs + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast (the GPU machines' rule; NCCL runs)

    binaries = {}
    try:
        for name in sorted({r.binary for r in s.runs if r.binary}):
            p = find_binary(o.bin_dir, name)
            binaries[name] = {"path": shown_path(p), "sha256": sha256(p), "bytes": os.path.getsize(p)}
    except (FileNotFoundError, OSError, lzma.LZMAError) as e:
        die(str(e))
    if s.graph["source"] == "same-graph":
        need = os.path.join(o.anchors_dir, s.graph["script"])
        if not os.path.isfile(need):
            die(f"no {need}: scripts/bench-pack.sh copies the anchors there (or pass --anchors-dir)")

    versions = peer_versions(env)
    python_peers = s.python_peers()
    if python_peers or s.graph["source"] == "same-graph":
        bad = {k: (want, versions.get(k)) for k, want in s.versions.items() if not version_matches(versions.get(k), want)}
        if bad and not o.any_versions:
            die("peer versions differ from the suite's: " + ", ".join(f"{k} {f} (want {w})" for k, (w, f) in bad.items())
                + " (--any-versions runs anyway)")

    gpus = nvidia_gpus()
    machines = load_machines(os.path.join(HERE, "machines.toml"))
    machine, rates = identify_machine(gpus, machines)
    machine = o.machine or machine
    now = datetime.datetime.now(datetime.timezone.utc)
    record = record_dir(o.out, s.name, machine, now.strftime("%Y-%m-%d"))
    git = git_head(o.bin_dir)
    env_doc = {"machine": machine, "gpus": gpus, "cuda_driver_version": cuda_version(), "cuda_lib_dirs": libs,
               "cpu": cpu_info(), "os": platform.platform(), "python": platform.python_version(),
               "peers": versions, "expected_versions": s.versions, "git": git, "binaries": binaries,
               "rates": rates, "started": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
    write_json(os.path.join(record, "env.json"), env_doc)
    with open(os.path.join(record, "command.txt"), "w") as f:
        f.write(f"# runner: python3 bench/run.py {shlex.join(sys.argv[1:] if argv is None else argv)}\n"
                f"# cwd: the repository root; every command below ran from there\n")
    scratch = tempfile.mkdtemp(prefix="gnn-bench-")
    runner = Runner(o, s, record, env, rates, graph_dir, o.anchors_dir, scratch)
    runner.summary_head = {"suite": s.name, "description": s.description, "record": os.path.basename(record),
                           "machine": machine, "date": now.strftime("%Y-%m-%d"),
                           "started": env_doc["started"], "git": git["hash"], "rates": rates,
                           "only": [p for x in o.only for p in x.split(",") if p]}
    if o.graphs_only:
        runner.summary_head["graphs_only"] = True
    try:
        runner.go(reps)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    runner.write_summary()
    rows = runner.rows()
    print_table(rows)
    if any(m.peer == "python" for m in s.measurements):
        print("\nPython-side overhead (the package's gnn.train against train_reddit, same files, back to back):")
        print(overhead_table(python_overhead(rows, runner.samples)))
    print(f"\nrecord: {os.path.relpath(record, REPO) if record.startswith(REPO) else record}")
    if runner.busy:
        print(f"WARNING: {len(runner.busy)} run(s) started on a GPU another process held (command.txt, "
              f"summary.json busy_gpus): their times and 'peak in use' are not the engine's alone", file=sys.stderr)
    if runner.run_failures:
        print(f"{len(runner.run_failures)} failed:", file=sys.stderr)
        for f in runner.run_failures:
            print(f"  {f['run']}{' ' + f['row'] if 'row' in f else ''}: {f['error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
