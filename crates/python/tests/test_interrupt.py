"""Ctrl-C: SIGINT to a training process stops it at the next epoch boundary (every rank of a
run on several, after the same epoch); the model keeps its best weights so far and the script
goes on (the report says "interrupt")."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import CORA

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import gnn
    data = gnn.load(sys.argv[1])
    on_epoch = None
    if sys.argv[2] == "callback":
        def on_epoch(log):
            print("EPOCH", log["epoch"], flush=True)
    else:
        print("READY", flush=True)
    devices = int(sys.argv[3]) or None
    model, report = gnn.train(data, hidden=16, epochs=1_000_000, device="cpu",
                              devices=devices, progress=False, on_epoch=on_epoch)
    print("RESULT", json.dumps({
        "stopped": report["stopped"], "epochs_run": report["epochs_run"],
        "history": len(report["history"]), "best_epoch": report["best_epoch"],
        "best_val_acc": report["best_val_acc"], "val": model.evaluate(data)["val"],
    }), flush=True)
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child is POSIX")
@pytest.mark.parametrize("mode,devices", [("callback", 0), ("quiet", 0), ("callback", 2), ("quiet", 3)])
def test_sigint_stops_at_an_epoch_boundary_keeping_the_best_state(mode, devices):
    """`devices` > 0: that many CPU ranks, on threads where Python's handler never runs (the
    calling thread watches for the signal and every rank stops after the same epoch)."""
    child = subprocess.Popen(
        [sys.executable, "-c", SCRIPT, str(CORA), mode, str(devices)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell without job control starts background jobs with SIGINT ignored, and Python
        # keeps an inherited SIG_IGN instead of installing its KeyboardInterrupt handler:
        # give the child the default disposition, as a terminal's Ctrl-C finds it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        want = "EPOCH 3" if mode == "callback" else "READY"
        for line in child.stdout:
            if line.strip() == want:
                break
        else:
            pytest.fail(f"the child ended early: {child.stderr.read()}")
        if mode == "quiet":
            time.sleep(2.0)  # some epochs with neither callback nor progress running
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    result = json.loads(out.split("RESULT", 1)[1])
    assert result["stopped"] == "interrupt"
    assert 3 <= result["epochs_run"] < 1_000_000 and result["history"] == result["epochs_run"]
    assert 1 <= result["best_epoch"] <= result["epochs_run"]
    # The kept weights are those of the best validation epoch (ranks: whole-graph inference
    # sums in another order, so a logit tie may flip).
    assert result["val"] == pytest.approx(result["best_val_acc"], abs=2 / 500 if devices else 1e-12)
    assert "interrupted after epoch" in err and "KeyboardInterrupt" not in err
