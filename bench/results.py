#!/usr/bin/env python3
"""Regenerates bench/RESULTS.md from the records under bench/records.

    python3 bench/results.py            # write bench/RESULTS.md
    python3 bench/results.py --check    # exit 1 when bench/RESULTS.md is not what the records give
    python3 bench/results.py --stale    # list record folders no row of RESULTS.md comes from
    python3 bench/results.py --import A.tar.gz ...   # add records packed by run.py --pack, then write

For every suite and row it takes the newest record (by the record's start time) that measured
the row, so a record of a few rows (`run.py --only`) updates those rows and leaves the rest.
The output depends on the records alone (no clock, sorted everywhere): CI checks it is up to date.
"""

import argparse
import json
import math
import os
import shutil
import sys

sys.dont_write_bytecode = True  # no __pycache__ beside the harness (it travels with the tree)
HERE = os.path.dirname(os.path.abspath(__file__))

PRECISION_ORDER = {"f32": 0, "bf16": 1, "f16": 2}


def _tiered(v, hi, mid, digits, suffix=""):
    """`v` with digits[0] decimals at or above `hi`, digits[1] at or above `mid`, else
    digits[2]; "-" for None."""
    if v is None:
        return "-"
    d = digits[0] if v >= hi else digits[1] if v >= mid else digits[2]
    return f"{v:.{d}f}{suffix}"


def fmt_ms(v):
    return _tiered(v, 100, 10, (1, 2, 3))


def fmt_rate(v):
    """Bytes/s as GB/s."""
    return _tiered(None if v is None else v / 1e9, 100, 1, (0, 1, 3))


def fmt_x(v):
    return _tiered(v, 100, 10, (0, 1, 2), "x")


def fmt_bps(v):
    """A machine rate (bytes/s) in TB/s or GB/s."""
    if v is None:
        return "unknown"
    return f"{v / 1e12:.3g} TB/s" if v >= 1e12 else f"{v / 1e9:.3g} GB/s"


def _distance(row, key):
    d = row.get("distance") or {}
    return d.get(key)


def fmt_regret(v):
    return "-" if v is None else f"{v:.2f}x"


def row_key(row):
    return (row.get("case") or "", row.get("k") or 0, PRECISION_ORDER.get(row.get("precision"), 9),
            row.get("peer") != "ours", row.get("peer") or "", row.get("name") or "")


def model_label(row):
    return f"{row['model']} K={row['k']}" if row.get("k") else row["model"]


def shortcuts_label(row):
    return ", ".join(row.get("shortcuts") or []) or "none"


def text_table(rows):
    """The runner's closing table (plain text)."""
    head = ["row", "median ms", "reps", "GB/s", "x HBM", "x gath L1", "x gath L2", "status"]
    body = []
    for r in sorted(rows, key=row_key):
        body.append([r["id"], fmt_ms(r.get("median_ms")), f"{r.get('repetitions', 0)}/{r.get('repetitions_wanted', 0)}",
                     fmt_rate(r.get("achieved_bytes_per_s")), fmt_x(_distance(r, "hbm")),
                     fmt_x(_distance(r, "gather_l1")), fmt_x(_distance(r, "gather_l2")), r.get("status", "")])
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    lines = []
    for j, cells in enumerate([head] + body):
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def load_records(root):
    """[(suite, record folder name, summary, path)] for every root/<suite>/<record>/summary.json."""
    out = []
    if not os.path.isdir(root):
        return out
    for suite in sorted(os.listdir(root)):
        sdir = os.path.join(root, suite)
        if not os.path.isdir(sdir):
            continue
        for rec in sorted(os.listdir(sdir)):
            p = os.path.join(sdir, rec, "summary.json")
            if os.path.isfile(p):
                with open(p) as f:
                    out.append((suite, rec, json.load(f), os.path.join(sdir, rec)))
    return out


def newest_rows(records):
    """{suite: {row id: (row, record)}}: per suite and row, the newest record with a number."""
    chosen = {}
    order = sorted(records, key=lambda r: (r[2].get("started", ""), r[1]))
    for suite, rec, summary, path in order:
        for row in summary.get("rows", []):
            if row.get("median_ms") is None:
                continue
            chosen.setdefault(suite, {})[row["id"]] = (row, (suite, rec, summary, path))
    return chosen


def record_note(rec, summary, link=None):
    """The line under a suite's table that names one record: git hash and floor rates."""
    r = summary.get("rates") or {}
    git = (summary.get("git") or "unknown")
    name = f"[`{rec}`]({link})" if link else f"`{rec}`"
    return (f"- {name}: git {git[:12]}{git[40:] if len(git) > 40 else ''}; floors at HBM "
            f"{fmt_bps(r.get('hbm'))}, L1 {fmt_bps(r.get('l1'))}, L2 {fmt_bps(r.get('l2'))} "
            f"({r.get('source', 'no source')}).")


def is_graphs_suite(rows):
    """A suite of bench_graphs rows (the dispatcher's verdicts), rendered as matrices."""
    return bool(rows) and all(row.get("kind") == "graphs" for row, _ in rows.values())


def graphs_section(rows, out_dir):
    """The lines of a bench_graphs suite: per precision, graphs (by non-zeros) x widths, each
    cell the kernel the dispatcher ran and its regret; the verdict summed up under each."""
    lines = ["", "Each cell: the kernel the SpMM dispatcher ran and its regret (its time over the fastest "
             "candidate's; `1.00x` = it ran the fastest); `-` = not measured. Every candidate's time, the "
             "floors and the distance to them are in the records' summary.json."]
    by_prec, used = {}, {}
    for row, (_, rec, summary, path) in rows.values():
        by_prec.setdefault(row["precision"], []).append(row)
        used[rec] = (summary, os.path.relpath(path, out_dir).replace(os.sep, "/") + "/")
    for prec in sorted(by_prec, key=lambda p: (PRECISION_ORDER.get(p, 9), p)):
        items = by_prec[prec]
        ks = sorted({r["k"] for r in items})
        graphs = sorted({(r.get("nnz") or 0, r.get("graph") or r["name"]) for r in items})
        cell = {(r.get("graph") or r["name"], r["k"]): r for r in items}
        lines += ["", f"### {prec}", "", "| graph | nnz | " + " | ".join(f"K={k}" for k in ks) + " |",
                  "|---|---:|" + "---|" * len(ks)]
        for nnz, g in graphs:
            cells = []
            for k in ks:
                info = (cell.get((g, k)) or {}).get("info")
                cells.append("-" if info is None else f"{info.get('dispatch') or '?'} {fmt_regret(info.get('regret'))}")
            lines.append(f"| {g} | {nnz:,} | " + " | ".join(cells) + " |")
        judged = sorted(((r["info"]["regret"], r.get("graph") or r["name"], r["k"]) for r in items
                         if (r.get("info") or {}).get("regret") is not None), key=lambda t: (-t[0], t[1], t[2]))
        if judged:
            best = sum(1 for v, _, _ in judged if v <= 1.0)
            over = sum(1 for v, _, _ in judged if v > 1.1)
            geo = math.exp(sum(math.log(v) for v, _, _ in judged) / len(judged))
            v, g, k = judged[0]
            lines += ["", f"The pick was the fastest in {best} of {len(judged)} cases and more than 10 % slower "
                          f"in {over}; regret geometric mean {geo:.3f}, worst {fmt_regret(v)} ({g}, K={k})."]
    lines.append("")
    lines += [record_note(rec, summary, link) for rec, (summary, link) in sorted(used.items())]
    return lines


def is_dist_suite(rows):
    """A suite of train_dist rows (several ranks), rendered with its scaling columns."""
    return bool(rows) and all(row.get("kind") == "dist" for row, _ in rows.values())


def fmt_gib(v):
    return "-" if v is None else f"{v / 2**30:.1f}"


def fmt_pct(v):
    return "-" if v is None else f"{100 * v:.0f} %"


def fmt_count(v):
    return "-" if v is None else f"{v:,}"


def dist_section(rows, out_dir):
    """The lines of a train_dist suite: one row per model, precision, partition and rank
    count, with the speed-up over the same case's one-rank row of the same record (rows of
    different records are never compared), the communication share, the largest per-rank
    peak, the rows received per exchange and the partition's edge cut."""
    lines = ["", "Median epoch = the slowest rank's median epoch (ranks meet at every all-reduce); speed-up = "
             "the same case and precision on one rank, in the same record, over this row (`-`: no one-rank row "
             "there); comm = the profiled epoch's communication phase (halo exchange + gradient all-reduce, as "
             "waited for) over its total, mean over ranks; peak = the largest rank's peak allocated GPU memory; "
             "received = rows each rank receives per exchange (mean; the all-gather's rows under it); cut = the "
             "partition's edge cut (share of the non-zeros). Per-rank figures are in the records' summary.json.",
             "", "| row | model | precision | graph | partition | ranks | median ms | speed-up | comm | peak GiB "
             "| received rows | cut | machine | record |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    one = {}
    for row, (_, rec, _, _) in rows.values():
        if row.get("ranks") == 1:
            one[(rec, row["case"], row["precision"])] = row["median_ms"]
    used = {}

    def key(rid):
        row = rows[rid][0]
        return (row.get("case") or "", PRECISION_ORDER.get(row.get("precision"), 9), row.get("partition") != "range",
                row.get("partition") or "", row.get("ranks") or 0)

    for rid in sorted(rows, key=key):
        row, (_, rec, summary, path) = rows[rid]
        info = row.get("info") or {}
        base = one.get((rec, row["case"], row["precision"]))
        speed = "-" if base is None or row.get("ranks") == 1 else f"{base / row['median_ms']:.2f}x"
        received = [r for r in info.get("received_rows_per_rank") or [] if r is not None]
        mean_rx = round(sum(received) / len(received)) if received else None
        cut = info.get("edge_cut_share")
        link = os.path.relpath(path, out_dir).replace(os.sep, "/") + "/"
        lines.append(
            f"| {row['name']} | {row['model']} | {row['precision']} | {row.get('graph') or '-'} "
            f"| {row.get('partition') or '-'} | {row.get('ranks')} | {fmt_ms(row['median_ms'])} | {speed} "
            f"| {fmt_pct(info.get('comm_share'))} | {fmt_gib(info.get('peak_allocated_bytes'))} "
            f"| {fmt_count(mean_rx)} | {'-' if cut is None or row.get('ranks') == 1 else fmt_pct(cut)} "
            f"| {summary.get('machine', '')} | [{rec}]({link}) |")
        used[rec] = summary
    lines.append("")
    lines += [record_note(rec, used[rec]) for rec in sorted(used)]
    return lines


def render(root, out_dir):
    """RESULTS.md's text for the records under `root`, links relative to `out_dir`."""
    records = load_records(root)
    chosen = newest_rows(records)
    lines = [
        "# Benchmark results",
        "",
        "Generated by `python3 bench/results.py` from the records under `bench/records/` (per suite and row, "
        "the newest record that measured it); do not edit by hand. [README.md](README.md) says how to re-run a "
        "row and how the floors are computed (and the guide's "
        "[performance page](../docs/src/performance.md) says why).",
        "",
        "Columns: median ms over the repetitions (a training row's value is its median epoch); GB/s = the "
        "compulsory bytes over that time; `x HBM` = time over the compulsory-bytes floor at the machine's memory "
        "bandwidth, `x L1` / `x L2` = time over the gather floor served at the L1 / L2 rate (1.00x = at the floor; "
        "`-` = the machine's rate is not known). Shortcuts: what ours skips that the peer does (input cache = the "
        "first layer's aggregation of the input computed once, not every epoch; train-rows = the output layer in "
        "training computed for the train nodes alone, its sparse products over their edges alone; labelled-output "
        "= the output layer on the labelled nodes alone).",
    ]
    suites = sorted(chosen, key=lambda s: (s != "headline", s))
    if not suites:
        lines += ["", "No records yet."]
    for suite in suites:
        rows = chosen[suite]
        if is_graphs_suite(rows):
            lines += ["", f"## {suite}", "", f"Suite file: [suites/{suite}.toml](suites/{suite}.toml)."]
            lines += graphs_section(rows, out_dir)
            continue
        if is_dist_suite(rows):
            lines += ["", f"## {suite}", "", f"Suite file: [suites/{suite}.toml](suites/{suite}.toml)."]
            lines += dist_section(rows, out_dir)
            continue
        lines += ["", f"## {suite}", "", f"Suite file: [suites/{suite}.toml](suites/{suite}.toml).", "",
                  "| row | model | precision | shortcuts | peer | median ms | reps | GB/s | x HBM | x L1 | x L2 "
                  "| machine | record |",
                  "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
        used = {}
        for rid in sorted(rows, key=lambda i: row_key(rows[i][0])):
            row, (_, rec, summary, path) = rows[rid]
            link = os.path.relpath(path, out_dir).replace(os.sep, "/") + "/"
            reps = f"{row.get('repetitions')}" + ("" if row.get("status") == "ok" else f" of {row.get('repetitions_wanted')}")
            lines.append(
                f"| {row['name']} | {model_label(row)} | {row['precision']} | {shortcuts_label(row)} | {row['peer']} "
                f"| {fmt_ms(row['median_ms'])} | {reps} | {fmt_rate(row.get('achieved_bytes_per_s'))} "
                f"| {fmt_x(_distance(row, 'hbm'))} | {fmt_x(_distance(row, 'gather_l1'))} "
                f"| {fmt_x(_distance(row, 'gather_l2'))} | {summary.get('machine', '')} | [{rec}]({link}) |")
            used[rec] = summary
        lines.append("")
        lines += [record_note(rec, used[rec]) for rec in sorted(used)]
    return "\n".join(lines) + "\n"


def stale(root):
    """Record folders (relative to root) from which no row is the newest."""
    records = load_records(root)
    chosen = newest_rows(records)
    used = {(suite, rec) for suite, rows in chosen.items() for _, (s, rec, _, _) in rows.values()}
    return [f"{suite}/{rec}" for suite, rec, _, _ in records if (suite, rec) not in used]


def import_pack(pack, root):
    """Unpacks a record tarball (`run.py --pack`: <suite>/<record>/...) into root/<suite>/,
    as <record>-2, -3, ... when that name is taken (two device calls on one day each name
    theirs after the date). Returns the folder it made."""
    import tarfile
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(pack) as tar:
            tops = set()
            for m in tar.getmembers():
                parts = m.name.split("/")
                if m.name.startswith("/") or ".." in parts or len(parts) < 2 or not (m.isfile() or m.isdir()):
                    raise ValueError(f"{pack}: unexpected member {m.name!r} (want <suite>/<record>/...)")
                tops.add(tuple(parts[:2]))
            if len(tops) != 1:
                raise ValueError(f"{pack}: holds {len(tops)} records, want one")
            try:
                tar.extractall(tmp, filter="data")
            except TypeError:  # Python without extraction filters (the members are checked above)
                tar.extractall(tmp)
        suite, rec = tops.pop()
        src = os.path.join(tmp, suite, rec)
        summary_path = os.path.join(src, "summary.json")
        if not os.path.isfile(summary_path):
            raise ValueError(f"{pack}: no {suite}/{rec}/summary.json")
        dest, n = os.path.join(root, suite, rec), 1
        while os.path.exists(dest):
            n += 1
            dest = os.path.join(root, suite, f"{rec}-{n}")
        if n > 1:
            with open(summary_path) as f:
                summary = json.load(f)
            summary["record"] = os.path.basename(dest)
            with open(summary_path, "w") as f:
                json.dump(summary, f, indent=1, sort_keys=True)
                f.write("\n")
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.move(src, dest)
    return dest


def main(argv=None):
    ap = argparse.ArgumentParser(description="Regenerate bench/RESULTS.md from bench/records.")
    ap.add_argument("--records", default=os.path.join(HERE, "records"), help="records root [default: bench/records]")
    ap.add_argument("--output", default=os.path.join(HERE, "RESULTS.md"), help="[default: bench/RESULTS.md]")
    ap.add_argument("--check", action="store_true", help="exit 1 if the output file is not up to date")
    ap.add_argument("--stale", action="store_true", help="list record folders no row comes from, and exit")
    ap.add_argument("--import", dest="packs", nargs="+", metavar="PACK",
                    help="first unpack these record tarballs (run.py --pack) into the records root")
    o = ap.parse_args(argv)
    for p in o.packs or []:
        try:
            print(f"imported {import_pack(p, o.records)}")
        except (OSError, ValueError) as e:
            print(f"bench/results.py: {e}", file=sys.stderr)
            return 2
    if o.stale:
        for s in stale(o.records):
            print(s)
        return 0
    text = render(o.records, os.path.dirname(os.path.abspath(o.output)))
    if o.check:
        try:
            with open(o.output) as f:
                have = f.read()
        except OSError:
            have = None
        if have != text:
            print(f"{o.output} is not up to date with {o.records}: run python3 bench/results.py", file=sys.stderr)
            return 1
        print(f"{o.output} is up to date")
        return 0
    with open(o.output, "w") as f:
        f.write(text)
    print(f"wrote {o.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
