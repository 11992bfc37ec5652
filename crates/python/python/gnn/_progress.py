"""Epoch progress of ``gnn.train``: a tqdm bar when tqdm is installed (``tqdm.auto``: a
widget in notebooks, a text bar in terminals), else one self-rewriting line on a terminal,
else plain lines (logs, pipes, notebooks without tqdm) about every tenth of the run."""

from __future__ import annotations

import sys
from typing import Any, Optional, TextIO


def _describe(log: dict) -> str:
    text = f"loss {log['loss']:.4f}"
    if log.get("val_acc") is not None:
        text += f"  val {log['val_acc']:.3f}"
    return text + f"  {log['epoch_ms']:.0f} ms/epoch"


class Progress:
    """Shows the epochs of one run; ``mode`` is ``True`` (pick), ``False`` (nothing),
    ``"tqdm"``, ``"line"`` or ``"plain"``."""

    def __init__(self, name: str, mode: Any = True, stream: Optional[TextIO] = None) -> None:
        self.name = name
        self.stream = stream if stream is not None else sys.stderr
        self.mode = self._pick(mode)
        self.bar: Any = None
        self.width = 0

    def _pick(self, mode: Any) -> Optional[str]:
        if mode is False or mode is None:
            return None
        if mode not in (True, "tqdm", "line", "plain"):
            raise ValueError(f'progress={mode!r}: expected True, False, "tqdm", "line" or "plain"')
        if mode in (True, "tqdm"):
            try:
                import tqdm.auto  # noqa: F401

                return "tqdm"
            except ImportError:
                if mode == "tqdm":
                    raise
        if mode == "plain":
            return "plain"
        isatty = getattr(self.stream, "isatty", None)
        return "line" if isatty is not None and isatty() else "plain"

    def update(self, log: dict) -> None:
        """Records one epoch (the dict ``on_epoch`` receives)."""
        if self.mode is None:
            return
        epoch, epochs = log["epoch"], log["epochs"]
        if self.mode == "tqdm":
            if self.bar is None:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=epochs, desc=self.name, unit="epoch", file=self.stream)
            postfix = {"loss": f"{log['loss']:.4f}"}
            if log.get("val_acc") is not None:
                postfix["val"] = f"{log['val_acc']:.3f}"
            self.bar.set_postfix(postfix, refresh=False)
            self.bar.update(1)
        elif self.mode == "line":
            filled = int(20 * epoch / max(epochs, 1))
            text = f"\r  [{self.name}] [{'=' * filled}{' ' * (20 - filled)}] {epoch}/{epochs}  {_describe(log)}"
            self.width = max(self.width, len(text))
            self.stream.write(text.ljust(self.width))
            self.stream.flush()
        else:
            step = max(1, epochs // 10)
            if epoch % step == 0 or epoch == epochs or epoch == 1:
                print(f"  [{self.name}] epoch {epoch}/{epochs}  {_describe(log)}", file=self.stream, flush=True)

    def close(self) -> None:
        """Ends the display (the bar stays, the line is finished)."""
        if self.mode == "tqdm" and self.bar is not None:
            self.bar.close()
        elif self.mode == "line" and self.width:
            self.stream.write("\n")
            self.stream.flush()
        self.bar = None
        self.width = 0
