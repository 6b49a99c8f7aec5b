"""PNG plots for the examples (matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker

# A moving average over fewer points than this is as noisy as the points.
_MIN_WINDOW = 5


def save_curve(
    path: str,
    values: Sequence[float],
    ylabel: str,
    title: str,
    points: dict[str, tuple[float, float]] | None = None,
) -> None:
    """Plots one value per step, with a moving average to show the trend.

    The average spans 1/25 of the run, at least 5 steps (fewer are as noisy
    as the steps themselves); runs under 20 steps get none. `points` marks
    other measurements by their label, as `(step, value)` (e.g. a held-out
    loss before and after training).
    """
    y = np.asarray(values, dtype=np.float64)
    fig, ax = plt.subplots(figsize=(6, 4))
    window = max(_MIN_WINDOW, len(y) // 25) if len(y) >= 4 * _MIN_WINDOW else 0
    ax.plot(y, alpha=0.3 if window else 0.8, label="per step")
    if window:
        smooth = np.convolve(y, np.ones(window) / window, mode="valid")
        ax.plot(np.arange(window - 1, len(y)), smooth, label=f"mean of {window}")
    for label, (step, value) in (points or {}).items():
        ax.plot([step], [value], marker="o", markersize=8, linestyle="", label=label)
    shown = np.concatenate([y, [v for _, v in (points or {}).values()]])
    if len(shown) and np.all(shown > 0):
        ax.set_yscale("log")  # Shows progress long after the first fast drop.
        _readable_log_ticks(ax)
    ax.set(xlabel="step", ylabel=ylabel, title=title)
    ax.legend()
    _save(fig, path)


def save_evaluations(
    path: str, steps: Sequence[int], series: dict[str, Sequence[float]]
) -> None:
    """One panel per evaluated quantity (e.g. test loss, test accuracy)."""
    fig, axes = plt.subplots(
        1, len(series), figsize=(4.5 * len(series), 3.5), squeeze=False
    )
    for ax, (name, values) in zip(axes[0], series.items()):
        ax.plot(steps, values, marker="o")
        ax.set(xlabel="step", title=name)
        ax.grid(alpha=0.3)
    _save(fig, path)


def _readable_log_ticks(ax: plt.Axes) -> None:
    """Labels log-scale ticks at 1, 2 and 5 times powers of ten, as plain
    numbers (0.2, 0.5, 1) instead of matplotlib's sparse `10^-1` labels,
    which on a range under a decade may label no tick at all."""
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def save_image_grid(
    path: str,
    images: np.ndarray,
    columns: int,
    titles: Sequence[str] | None = None,
    title_colors: Sequence[str] | None = None,
    row_labels: Sequence[str] | None = None,
    title: str | None = None,
) -> None:
    """Writes `images` (`[N, H, W]` or `[N, H, W, C]`, values in [0, 1]) as a grid."""
    images = np.clip(np.asarray(images, dtype=np.float32), 0.0, 1.0)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    rows = -(-len(images) // columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(columns * 1.1, rows * 1.25), squeeze=False
    )
    for i, ax in enumerate(axes.flat):
        ax.set_xticks([])
        ax.set_yticks([])
        if i >= len(images):
            ax.axis("off")
            continue
        ax.imshow(images[i], cmap="gray", vmin=0.0, vmax=1.0)
        if titles is not None:
            color = title_colors[i] if title_colors is not None else "black"
            ax.set_title(titles[i], fontsize=8, color=color)
    if row_labels is not None:  # Horizontal, left of each row.
        for label, ax in zip(row_labels, axes[:, 0]):
            ax.set_ylabel(label, fontsize=11, rotation=0, ha="right", va="center")
    if title is not None:
        fig.suptitle(title, fontsize=12)
    _save(fig, path)


def _save(fig: plt.Figure, path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
