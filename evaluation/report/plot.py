"""scores.png: per-task bars, one bar per model (matplotlib, imported when a plot is drawn)."""

from __future__ import annotations

import os
from pathlib import Path

PLOT_DPI = 110
PLOT_MAX_WIDTH_IN = 9.0  # × 110 dpi: at most 990 px, inside a 1,000 px column without scaling


def plot_scores(labels, keys, values, target: Path, title: str) -> None:
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    shown = [k for k in keys if k[0] != "average" and any(values.get((label, *k)) is not None for label in labels)]
    width = min(PLOT_MAX_WIDTH_IN, max(6.0, 0.6 * len(shown) + 2))
    # constrained layout makes room for the legend outside the axes: below the bars, never over them
    fig, ax = plt.subplots(figsize=(width, 5.0), dpi=PLOT_DPI, layout="constrained")
    bar = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        heights = [values.get((label, *k)) or 0.0 for k in shown]
        ax.bar(np.arange(len(shown)) + (i - (len(labels) - 1) / 2) * bar, heights, width=bar, label=label)
    ax.set_xticks(np.arange(len(shown)))
    names = [f"{t}\n{m}" for t, m in shown]
    # a tick's slot is width × dpi / ticks pixels; at 7 pt a character takes about 4.5 px: long task names
    # (scirepeval/...) that would run into their neighbours are slanted instead
    slot = width * PLOT_DPI / max(1, len(shown))
    slanted = max((len(t) for t, _ in shown), default=0) * 4.5 > slot
    ax.set_xticklabels(names, fontsize=7, rotation=30 if slanted else 0, ha="right" if slanted else "center")
    ax.set_ylabel("score × 100")
    ax.set_title(textwrap.fill(title, 100), fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    if labels:
        fig.legend(loc="outside lower center", ncols=min(2, len(labels)), fontsize=7, frameon=False)
    tmp = target.with_name(target.name + ".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, target)
