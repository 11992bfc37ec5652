#!/usr/bin/env python3
"""The multi-process fault test of train_dist on one GPU machine (issue 39), in one command:

    python3 bench/fault_test.py [--world 2] [--kill-rank 1] [--kill-epoch 23] [--epochs 100]
                                [--checkpoint-every 5] [--comm-timeout 45] [--out DIR] ...

Every run is `--world` processes of train_dist on this host, one GPU each, meeting over TCP
(--tcp-rendezvous with MASTER_ADDR=127.0.0.1, a free MASTER_PORT, RANK / WORLD_SIZE /
LOCAL_RANK in each one's environment: torchrun's variables), on a graph written once by
train_dist --save-graph and memory-mapped by every process. It mirrors the CPU test
`a_failed_rank_ends_the_run_and_a_resumed_run_equals_an_uninterrupted_one` (crates/train,
dist/run.rs) with a real process death:

1. whole: the run uninterrupted, checkpointing every N epochs;
2. cut: the same run; once a surviving rank prints epoch `--kill-epoch`, rank `--kill-rank`
   gets SIGKILL. Each survivor's exit status, seconds from the kill to its exit, and its
   error (which should name the dead rank and the epoch) are recorded; a survivor still
   alive after --survivor-timeout seconds is killed and recorded as hung. The last
   checkpoint's epoch is read back (epochs lost = the epoch the kill came at - it);
3. resumed: the run again on every rank with --resume from the cut run's checkpoint, to the
   end; its loss curve is compared with the whole run's (bit for bit, and the largest
   relative difference).

It writes OUT/faults/<machine>-<date>[-N]/ (default OUT: bench/records): command.txt (every
command, its environment additions, exit status and seconds), fault.json (the results),
README.md (the same in words), each process's log and JSON report, graph.json. Exit status
0 when every check passed (survivors exited within --goal-s, naming the rank and epoch; the
resumed run matched within --loss-rtol; at most N epochs lost), 1 when one failed, 2 when
nothing could start. Stdlib only; bench/run.py's helpers find and unpack the binary
(.dev/bin/train_dist.xz from scripts/bench-pack.sh --features nccl train_dist).
"""

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import run as runner  # noqa: E402

EPOCH_LINE = re.compile(r"^\s*epoch\s+(\d+)/(\d+)\s+loss\s", re.M)


def free_port():
    """A TCP port nothing listens on now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Test:
    def __init__(self, o, record, env, exe, scratch):
        self.o = o
        self.record = record
        self.env = env
        self.exe = exe
        self.scratch = scratch
        self.env_added = {k: env[k] for k in ("LD_LIBRARY_PATH",) if k in env}

    def note(self, text):
        with open(os.path.join(self.record, "command.txt"), "a") as f:
            f.write(text)

    def check_idle(self, stem):
        """Notes in command.txt (and on the console) a GPU another process holds as `stem`
        starts (run.py's BUSY_MIB): the survivors' times and memory then are not theirs alone."""
        busy = runner.busy_gpus(runner.gpu_occupancy())
        if busy:
            note = runner.busy_note(busy)
            self.note(f"# before {stem}: {note}\n")
            print(f"[{time.strftime('%H:%M:%S')}] WARNING before {stem}: {note}", flush=True)

    def execute(self, stem, argv):
        """One process to its end (the graph step): (exit status or 'timeout', seconds)."""
        self.check_idle(stem)
        t = time.monotonic()
        with open(os.path.join(self.record, stem + ".log"), "w") as out:
            p = runner.spawn(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                             cwd=runner.REPO)
            try:
                rc = p.wait(timeout=self.o.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = "timeout"
            runner.reap(p)
        secs = time.monotonic() - t
        self.note(f"# {stem}: exit {rc}, {secs:.1f} s\n{shlex.join(argv)}\n")
        print(f"[{time.strftime('%H:%M:%S')}] {stem}: exit {rc} ({secs:.1f} s)", flush=True)
        return rc, secs

    def args(self, phase, extra):
        o = self.o
        a = ["--data-dir", self.graph_dir, "--tcp-rendezvous", "--model", o.model, "--layers", str(o.layers),
             "--hidden", str(o.hidden), "--precision", o.precision, "--epochs", str(o.epochs), "--eval-every", "1",
             "--partition", "range", "--seed", "0", "--comm-timeout", str(o.comm_timeout),
             "--checkpoint-every", str(o.checkpoint_every),
             "--checkpoint", os.path.join(self.scratch, f"ckpt-{phase}"),
             "--json", os.path.join(self.record, f"{phase}.json")]
        if o.deterministic:
            a.append("--deterministic")
        return a + list(extra) + o.flag

    def start(self, phase, extra=()):
        """The run's processes, started; [(rank, Popen, log path)]."""
        self.check_idle(phase)
        port = free_port()
        procs = []
        for rank in range(self.o.world):
            env_extra = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(self.o.world),
                         "RANK": str(rank), "LOCAL_RANK": str(rank)}
            env = dict(self.env)
            env.update(env_extra)
            argv = [runner.shown_path(self.exe)] + self.args(phase, extra)
            log = os.path.join(self.record, f"{phase}-rank{rank}.log")
            with open(log, "w") as out:
                p = runner.spawn(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                 cwd=runner.REPO)
            shown = " ".join(f"{k}={shlex.quote(v)}" for k, v in {**self.env_added, **env_extra}.items())
            self.note(f"# {phase} rank {rank} (pid {p.pid}, started {time.strftime('%H:%M:%S')})\n"
                      f"{shown} {shlex.join(argv)}\n")
            procs.append((rank, p, log))
        print(f"[{time.strftime('%H:%M:%S')}] {phase}: {self.o.world} processes, MASTER_PORT={port}", flush=True)
        return procs

    def wait_all(self, phase, procs, t0):
        """Waits for every process (killing all at --timeout); {rank: (status, seconds)}."""
        out = {}
        deadline = t0 + self.o.timeout
        for rank, p, _ in procs:
            try:
                rc = p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = "timeout"
            out[rank] = (rc, time.monotonic() - t0)
        for rank, (rc, secs) in out.items():
            self.note(f"# {phase} rank {rank}: exit {rc}, {secs:.1f} s\n")
        print(f"[{time.strftime('%H:%M:%S')}] {phase}: exits {[out[r][0] for r in sorted(out)]}", flush=True)
        return out

    def report(self, phase, rank=0):
        path = os.path.join(self.record, f"{phase}.rank{rank}.json")
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def plain(self, phase, extra=()):
        """One run to its end: its exits and rank 0's report."""
        t0 = time.monotonic()
        exits = self.wait_all(phase, self.start(phase, extra), t0)
        return {"exits": {str(r): rc for r, (rc, _) in exits.items()},
                "wall_s": round(max(s for _, s in exits.values()), 1)}, self.report(phase)

    def cut(self):
        """The run with one process killed: what each survivor did after the kill."""
        o = self.o
        t0 = time.monotonic()
        procs = self.start("cut")
        watch_rank, watch, watch_log = next(x for x in procs if x[0] != o.kill_rank)
        victim = next(p for r, p, _ in procs if r == o.kill_rank)
        seen = 0
        deadline = t0 + o.timeout
        while time.monotonic() < deadline:
            with open(watch_log, errors="replace") as f:
                epochs = [int(m.group(1)) for m in EPOCH_LINE.finditer(f.read())]
            seen = max(epochs, default=0)
            if seen >= o.kill_epoch or any(p.poll() is not None for _, p, _ in procs):
                break
            time.sleep(0.02)
        result = {"kill_rank": o.kill_rank, "kill_epoch_asked": o.kill_epoch, "watched_rank": watch_rank}
        if seen < o.kill_epoch or victim.poll() is not None:
            for _, p, _ in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            result["error"] = (f"no kill: rank {watch_rank} printed epoch {seen} of the {o.kill_epoch} awaited "
                               f"before a process ended or {o.timeout} s passed")
            self.note(f"# cut: {result['error']}\n")
            return result
        os.kill(victim.pid, signal.SIGKILL)
        t_kill = time.monotonic()
        victim.wait()
        result["killed_at_s"] = round(t_kill - t0, 2)
        result["epoch_at_kill"] = seen  # the last epoch the watched rank had printed
        self.note(f"# cut: SIGKILL to rank {o.kill_rank} (pid {victim.pid}) at {result['killed_at_s']} s, after "
                  f"rank {watch_rank} printed epoch {seen}\n")
        print(f"[{time.strftime('%H:%M:%S')}] cut: killed rank {o.kill_rank} after epoch {seen}", flush=True)
        survivors = {}
        for rank, p, log in procs:
            if rank == o.kill_rank:
                continue
            try:
                rc = p.wait(timeout=max(0.0, t_kill + o.survivor_timeout - time.monotonic()))
                hung = False
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc, hung = "killed (hung)", True
            secs = time.monotonic() - t_kill
            with open(log, errors="replace") as f:
                text = f.read()
            errors = [ln.strip() for ln in text.splitlines() if re.search(r"\b(Error|error|failed|aborted)\b", ln)]
            # The rank's own error (anyhow's "Error: ..." line) first, else the first such line.
            message = next((ln for ln in errors if ln.startswith("Error")), errors[0] if errors else None)
            survivors[str(rank)] = {
                "exit": rc, "hung": hung, "exit_s_after_kill": round(secs, 2), "message": message,
                "error_lines": errors[:6],
                "names_dead_rank": bool(message and re.search(rf"\brank {o.kill_rank}\b", " ".join(errors))),
                "names_epoch": bool(message and re.search(r"\bepoch \d+", " ".join(errors))),
            }
            self.note(f"# cut rank {rank}: exit {rc}, {secs:.1f} s after the kill\n")
        result["survivors"] = survivors
        state = os.path.join(self.scratch, "ckpt-cut.json")
        try:
            with open(state) as f:
                result["checkpoint_epoch"] = json.load(f)["epoch"]
        except (OSError, ValueError, KeyError):
            result["checkpoint_epoch"] = None
        return result


def compare(whole, resumed):
    """The resumed run's losses against the uninterrupted run's."""
    if not whole or not resumed:
        return {"error": "a run wrote no report"}
    a, b = whole.get("loss_curve") or [], resumed.get("loss_curve") or []
    if not a or len(a) != len(b):
        return {"error": f"loss curves of {len(a)} and {len(b)} epochs"}
    rel = [abs(x - y) / abs(x) if x else abs(y) for x, y in zip(a, b)]
    return {"epochs": len(a), "final_loss_whole": a[-1], "final_loss_resumed": b[-1],
            "final_rel_diff": rel[-1], "max_rel_diff": max(rel), "bit_identical": a == b,
            "test_acc_whole": whole.get("test_acc"), "test_acc_resumed": resumed.get("test_acc"),
            "resumed_from": resumed.get("resumed_from")}


def verdict(o, cut, match):
    """[(check, passed, detail)]."""
    checks = []
    surv = cut.get("survivors") or {}
    checks.append(("the kill happened", "error" not in cut, cut.get("error", f"after epoch {cut.get('epoch_at_kill')}")))
    for rank, s in sorted(surv.items()):
        checks.append((f"rank {rank} exited within {o.goal_s} s", not s["hung"] and s["exit"] != 0
                       and s["exit_s_after_kill"] <= o.goal_s, f"exit {s['exit']} after {s['exit_s_after_kill']} s"))
        checks.append((f"rank {rank}'s error names rank {o.kill_rank} and the epoch",
                       s["names_dead_rank"] and s["names_epoch"], s["message"] or "no error line"))
    ck, at = cut.get("checkpoint_epoch"), cut.get("epoch_at_kill")
    checks.append((f"at most {o.checkpoint_every} epochs lost", ck is not None and at is not None
                   and 0 <= at - ck <= o.checkpoint_every, f"checkpoint at epoch {ck}, killed after epoch {at}"))
    checks.append((f"the resumed run's losses within {o.loss_rtol:g} of the uninterrupted run's",
                   "error" not in match and match["max_rel_diff"] <= o.loss_rtol,
                   match.get("error") or f"largest relative difference {match['max_rel_diff']:.3g}, final "
                   f"{match['final_loss_resumed']:.6f} vs {match['final_loss_whole']:.6f}"
                   f"{' (bit for bit)' if match['bit_identical'] else ''}"))
    return checks


def readme(o, doc):
    cut, match = doc["cut"], doc["resume_vs_whole"]
    lines = [f"# Fault test: {o.world} processes over TCP rendezvous, rank {o.kill_rank} killed (SIGKILL)", "",
             f"`python3 bench/fault_test.py` on {doc['machine']} ({doc['date']}, git {doc['git'] or 'unknown'}); "
             f"{o.model} {o.layers}x{o.hidden} {o.precision}, {o.epochs} epochs, checkpoint every "
             f"{o.checkpoint_every}, --comm-timeout {o.comm_timeout}, graph {doc['graph']['name']}. "
             "Every command is in command.txt; the numbers in fault.json.", "",
             "| check | passed | detail |", "|---|---|---|"]
    for name, ok, detail in doc["checks"]:
        lines.append(f"| {name} | {'yes' if ok else 'NO'} | {str(detail).replace('|', '/')} |")
    lines.append("")
    for rank, s in sorted((cut.get("survivors") or {}).items()):
        lines.append(f"Rank {rank}'s error lines ({s['exit_s_after_kill']} s after the kill):")
        lines += ["", "```text"] + (s["error_lines"] or ["(none)"]) + ["```", ""]
    if "error" not in match:
        lines.append(f"Loss after {match['epochs']} epochs: {match['final_loss_whole']:.6f} uninterrupted, "
                     f"{match['final_loss_resumed']:.6f} resumed from epoch {cut.get('checkpoint_epoch')}.")
    return "\n".join(lines) + "\n"


def main(argv=None):
    runner.install_reaper()
    ap = argparse.ArgumentParser(description="Kill one train_dist process of a multi-process run; check the "
                                             "survivors' exit and the resume.")
    ap.add_argument("--bin-dir", default=os.path.join(runner.REPO, ".dev", "bin"))
    ap.add_argument("--out", default=os.path.join(HERE, "records"), help="records root [default: bench/records]")
    ap.add_argument("--machine", help="the record's machine name instead of the detected one")
    ap.add_argument("--pack", metavar="FILE", help="also write the record as FILE (.tar.gz)")
    ap.add_argument("--graph-dir", default="/tmp/gnn-bench/faults-graph")
    ap.add_argument("--dataset", default="reddit", help="the generated graph (reddit or papers100m; written "
                                                        "once with --seed 0, then memory-mapped)")
    ap.add_argument("--scale", default="1", help="its scale [default: 1]")
    ap.add_argument("--world", type=int, default=2, help="processes (one GPU each)")
    ap.add_argument("--kill-rank", type=int, default=1)
    ap.add_argument("--kill-epoch", type=int, default=23, help="SIGKILL once a surviving rank printed this epoch")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--checkpoint-every", type=int, default=5)
    ap.add_argument("--comm-timeout", type=int, default=45)
    ap.add_argument("--model", default="gcn")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--no-deterministic", dest="deterministic", action="store_false",
                    help="let the GPU's sparse reductions use float atomics (the resume then matches only "
                         "up to rounding)")
    ap.add_argument("--flag", action="append", default=[], metavar="ARG",
                    help="one more train_dist argument, as --flag=--name (repeatable)")
    ap.add_argument("--goal-s", type=float, default=60.0, help="survivors must exit within this [default: 60]")
    ap.add_argument("--survivor-timeout", type=float, default=180.0)
    ap.add_argument("--loss-rtol", type=float, default=1e-3)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one run may take")
    o = ap.parse_args(argv)
    if not 0 <= o.kill_rank < o.world or o.world < 2:
        runner.die("--world must be >= 2 and --kill-rank one of its ranks")
    if not 0 < o.checkpoint_every < o.kill_epoch < o.epochs:
        runner.die("want 0 < --checkpoint-every < --kill-epoch < --epochs")
    try:
        exe = runner.find_binary(o.bin_dir, "train_dist")
    except (FileNotFoundError, OSError) as e:
        runner.die(str(e))
    env = dict(os.environ)
    libs = [d for d in runner.CUDA_LIB_DIRS if os.path.isdir(d)]
    if libs:
        env["LD_LIBRARY_PATH"] = ":".join(libs + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink multicast (the GPU machines' rule)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS",
              "SLURM_LOCALID"):
        env.pop(k, None)
    gpus = runner.nvidia_gpus()
    machine, _ = runner.identify_machine(gpus, runner.load_machines(os.path.join(HERE, "machines.toml")))
    machine = o.machine or machine
    now = datetime.datetime.now(datetime.timezone.utc)
    record = runner.record_dir(o.out, "faults", machine, now.strftime("%Y-%m-%d"))
    git = runner.git_head(o.bin_dir)
    with open(os.path.join(record, "command.txt"), "w") as f:
        f.write(f"# runner: python3 bench/fault_test.py {shlex.join(sys.argv[1:] if argv is None else argv)}\n"
                "# cwd: the repository root; every command below ran from there\n")
    scratch = tempfile.mkdtemp(prefix="gnn-faults-")
    test = Test(o, record, env, exe, scratch)
    doc = {"machine": machine, "date": now.strftime("%Y-%m-%d"), "started": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
           "git": git["hash"], "gpus": gpus, "binary": {"path": runner.shown_path(exe), "sha256": runner.sha256(exe)},
           "settings": {k: v for k, v in vars(o).items() if k not in ("out", "pack", "bin_dir")}}
    try:
        flags = ["--dataset", o.dataset, "--scale", o.scale, "--seed", "0"]
        facts, error = runner.saved_graph(exe, flags, os.path.join(o.graph_dir, runner.suites.graph_folder(flags)),
                                          "graph", test.execute, record, scratch)
        if error:
            runner.write_json(os.path.join(record, "fault.json"), dict(doc, error=error))
            print(f"bench/fault_test.py: {error}", file=sys.stderr)
            return 2
        runner.write_json(os.path.join(record, "graph.json"), facts)
        test.graph_dir = facts["dir"]
        doc["graph"] = {k: facts.get(k) for k in ("name", "nodes", "edges", "reused")}
        doc["whole"], whole = test.plain("whole")
        resumed = None
        if whole is None or any(rc != 0 for rc in doc["whole"]["exits"].values()):
            doc["cut"] = {"error": "skipped: the uninterrupted run failed (see whole-rank*.log)"}
        else:
            doc["cut"] = test.cut()
        if doc["cut"].get("checkpoint_epoch") is None:
            doc["resumed"] = {"skipped": "no kill or no checkpoint to resume from"}
        else:
            doc["resumed"], resumed = test.plain("resumed", ["--resume", os.path.join(scratch, "ckpt-cut")])
        doc["resume_vs_whole"] = compare(whole, resumed)
        doc["checks"] = verdict(o, doc["cut"], doc["resume_vs_whole"])
        doc["passed"] = all(ok for _, ok, _ in doc["checks"])
        runner.write_json(os.path.join(record, "fault.json"), doc)
        with open(os.path.join(record, "README.md"), "w") as f:
            f.write(readme(o, doc))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if o.pack:
            runner.pack(record, o.pack)
    for name, ok, detail in doc["checks"]:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    print(f"record: {os.path.relpath(record, runner.REPO) if record.startswith(runner.REPO) else record}")
    return 0 if doc["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
