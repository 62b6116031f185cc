"""The log-log convergence plot of a :func:`bridge.gradcheck` result."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["write_plot"]


def write_plot(result: Any, path: str) -> str:
    """Write the log-log convergence plot of ``result`` (a GradcheckResult)
    to ``path`` (PNG): each remainder with its fitted slope (the fitted steps
    filled), reference lines
    O(h) ... O(h^(k+1)) and the roundoff level the remainders were compared
    with; return the path."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("the convergence plot needs matplotlib, a dependency of tf-julia-bridge that "
                          "is not importable here: pip install matplotlib") from None
    h = result.steps
    fig = Figure(figsize=(6, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)

    def shown(r: np.ndarray) -> np.ndarray:
        return np.where(np.isfinite(r) & (r > 0), r, np.nan)

    labels = ["|f(x+hv) - f(x)|", "|f(x+hv) - f(x) - h gv|", "|f(x+hv) - f(x) - h gv - h$^2$/2 v'Hv|"]
    markers = ["o-", "s-", "^-"]
    styles = ["k--", "k:", "k-."]
    for k, (r, slope) in enumerate(zip(result.remainders, result.slopes)):
        r = shown(r)
        text = f"{slope:.2f}" if np.isfinite(slope) else "n/a"
        line, = ax.loglog(h, r, markers[k], label=f"{labels[k]}  (slope {text})", markerfacecolor="none")
        if k == result.order and result.fitted.any():  # the fitted steps, filled
            ax.loglog(h[result.fitted], r[result.fitted], markers[k][0], color=line.get_color())
        anchor = np.nanmax(r) if np.isfinite(r).any() else 1.0
        ax.loglog(h, anchor * (h / h[0]) ** (k + 1), styles[k], linewidth=0.8,
                  label="O(h)" if k == 0 else f"O(h$^{k + 1}$)")
    if result.roundoff is not None and np.isfinite(result.roundoff).any():
        ax.loglog(h, shown(result.roundoff), color="0.6", linewidth=0.8, label=f"roundoff ({result.dtype})")
    ax.set_xlabel("h")
    ax.set_ylabel("remainder")
    ax.set_title(f"gradcheck{' (order 2)' if result.order == 2 else ''}: {result.verdict}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=100)
    return str(path)
