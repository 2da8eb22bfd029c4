"""Progress of the long commands (eval runs, trajectory collection), on a terminal and in a log.

On a terminal :func:`counting_progress` is rich's live bar. Where the console is not an interactive
terminal (a run under ``nohup`` or in CI, its output sent to a file), rich draws nothing until the
bar stops, so a run of hours would leave an empty log; there each step prints one plain line.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn


class CountingProgress(Progress):
    """A rich Progress of counted steps that, off an interactive terminal, prints a line each time a
    task's count, total or description changes (once its total is known):
    ``LABEL DONE/TOTAL DESCRIPTION (H:MM:SS)``."""

    def __init__(self, label: str, console: Console, **kwargs: Any) -> None:
        self.label = label
        columns = (
            TextColumn(f"[bold]{label}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
        )
        super().__init__(*columns, console=console, **kwargs)

    def add_task(
        self,
        description: str,
        start: bool = True,
        total: float | None = 100.0,
        completed: int = 0,
        visible: bool | None = None,
        **fields: Any,
    ) -> TaskID:
        """rich's add_task; unless ``visible`` says otherwise, a task whose total is not known yet stays
        hidden until :meth:`update` gives one (a command refused at its start draws no empty ``0/?``)."""
        shown = total is not None if visible is None else visible
        return super().add_task(description, start, total, completed, shown, **fields)

    def update(self, task_id: TaskID, **kwargs: Any) -> None:
        """rich's update; off a terminal, a line when the count, the total or the description moved."""
        if kwargs.get("total") is not None:
            kwargs.setdefault("visible", True)
        with self._lock:  # rich's own (re-entrant) lock: the count read before and after is one update's
            before = self._counts(task_id)
            super().update(task_id, **kwargs)
            after = self._counts(task_id)
            if self.console.is_interactive or after == before or after[1] is None:
                return
            elapsed = int(self._tasks[task_id].elapsed or 0)
        clock = f"{elapsed // 3600}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}"
        # Printed outside the lock: the display's refresh takes its own lock, then this one.
        self.console.print(
            f"{self.label} {int(after[0])}/{int(after[1])} {after[2]} ({clock})",
            highlight=False,
            markup=False,
        )

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        """rich's advance, through :meth:`update` (so that it prints off a terminal too)."""
        self.update(task_id, advance=advance)

    def _counts(self, task_id: TaskID) -> tuple[float, float | None, str]:
        task = self._tasks[task_id]
        return task.completed, task.total, task.description


def counting_progress(label: str, console: Console) -> CountingProgress:
    """The progress display of a command that counts its steps (``label`` leads each line)."""
    return CountingProgress(label, console, transient=False)
