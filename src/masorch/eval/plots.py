"""Plots of a run: accuracy vs axis value (one panel per axis of each dataset) and accuracy vs cost
(Pareto view).

matplotlib is the ``plots`` extra, imported lazily with the Agg backend (no display needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from masorch.errors import require_extra
from masorch.eval.metrics import pareto_front
from masorch.eval.summary import Summary


def _pyplot() -> Any:
    require_extra("matplotlib", "plots")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def axis_plot(summary: Summary, path: Path) -> Path | None:
    """Accuracy (with its 95 % interval) vs axis value per system, one panel per axis of each
    MASBench dataset."""
    panels = sorted(
        {(c.dataset, c.axis) for c in summary.cells if c.axis is not None},
        key=lambda p: (summary.datasets.index(p[0]), p[1]),
    )
    if not panels:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.6), squeeze=False)
    for ax, (dataset, axis) in zip(axes[0], panels, strict=True):
        for system in summary.systems:
            cells = sorted(
                (c for c in summary.cells if (c.dataset, c.axis, c.system) == (dataset, axis, system)),
                key=lambda c: c.value or 0,
            )
            if not cells:
                continue
            xs = [c.value for c in cells]
            ys = [100 * c.accuracy.mean for c in cells]
            err = [
                [100 * (c.accuracy.mean - c.accuracy.low) for c in cells],
                [100 * (c.accuracy.high - c.accuracy.mean) for c in cells],
            ]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=system)
        ax.set_title(f"{dataset} ({axis})")
        ax.set_xlabel(f"{axis} value")
        ax.set_ylabel("accuracy %")
        ax.set_ylim(-5, 105)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def cost_plot(summary: Summary, path: Path) -> Path | None:
    """Accuracy vs mean cost per sample (tokens when no cost is known) per system, one panel per dataset.

    The Pareto front (no other system is both cheaper and more accurate) is joined by a line.
    """
    tops = [c for c in summary.cells if c.value is None and c.n > 0]  # no point for a system with none
    if not tops:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(
        1, len(summary.datasets), figsize=(4.5 * len(summary.datasets), 3.6), squeeze=False
    )
    for ax, dataset in zip(axes[0], summary.datasets, strict=True):
        cells = [c for c in tops if c.dataset == dataset]
        use_cost = any(c.cost > 0 for c in cells)
        xs = [c.cost if use_cost else c.tokens for c in cells]
        ys = [100 * c.accuracy.mean for c in cells]
        for c, x, y in zip(cells, xs, ys, strict=True):
            ax.scatter([x], [y], s=40)
            ax.annotate(c.system, (x, y), fontsize=8, xytext=(4, 4), textcoords="offset points")
        front = sorted(pareto_front(list(zip(xs, ys, strict=True))), key=lambda i: xs[i])
        if len(front) > 1:
            ax.plot([xs[i] for i in front], [ys[i] for i in front], "k--", lw=1, alpha=0.6)
        ax.set_title(dataset)
        ax.set_xlabel("mean cost per sample ($)" if use_cost else "mean tokens per sample")
        ax.set_ylabel("accuracy %")
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_plots(summary: Summary, directory: Path) -> list[Path]:
    """Write ``accuracy_vs_axis.png`` (if any MASBench data) and ``accuracy_vs_cost.png``."""
    directory.mkdir(parents=True, exist_ok=True)
    made = [
        axis_plot(summary, directory / "accuracy_vs_axis.png"),
        cost_plot(summary, directory / "accuracy_vs_cost.png"),
    ]
    return [p for p in made if p is not None]
