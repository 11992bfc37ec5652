"""The progress display's three forms: tqdm when installed, one self-rewriting line on a
terminal, plain lines elsewhere."""

from __future__ import annotations

import io

import pytest

from gnn._progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def logs(epochs: int):
    for e in range(1, epochs + 1):
        yield {"epoch": e, "epochs": epochs, "loss": 1.0 / e, "epoch_ms": 3.0,
               "train_acc": 0.5, "val_acc": 0.5 if e % 2 else None, "test_acc": None}


def run(progress: Progress, epochs: int) -> None:
    for log in logs(epochs):
        progress.update(log)
    progress.close()


def test_a_terminal_gets_one_rewritten_line():
    try:
        import tqdm  # noqa: F401
        pytest.skip("tqdm is installed: the bar is tqdm's")
    except ImportError:
        pass
    out = Terminal()
    p = Progress("gcn", True, stream=out)
    assert p.mode == "line"
    run(p, 30)
    text = out.getvalue()
    assert text.count("\r") == 30 and text.endswith("\n") and text.count("\n") == 1
    assert "30/30" in text and "[====================]" in text


def test_a_pipe_gets_plain_lines_about_every_tenth():
    out = io.StringIO()
    p = Progress("sage", "plain", stream=out)
    run(p, 45)
    epochs = [line.split()[2] for line in out.getvalue().splitlines()]
    assert epochs == ["1/45"] + [f"{e}/45" for e in range(4, 45, 4)] + ["45/45"]


def test_tqdm_when_installed():
    pytest.importorskip("tqdm")
    out = io.StringIO()
    p = Progress("gcn", True, stream=out)
    assert p.mode == "tqdm"
    run(p, 5)
    assert "5/5" in out.getvalue()


def test_off_and_bad_modes():
    out = io.StringIO()
    run(Progress("gcn", False, stream=out), 5)
    assert out.getvalue() == ""
    with pytest.raises(ValueError, match="progress='bar'"):
        Progress("gcn", "bar")
