"""The report's figures say each thing once: the heatmap's shared columns are named under the lowest panel
only, and a reason every bar of a cost panel shares is said once for the panel. Text is most of what a figure
costs to draw (``ptxrag report`` answers in seconds because of it), and repeated it tells nothing new."""

from __future__ import annotations

import pytest
from matplotlib.figure import Figure

from ptxrag.bench import plots


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    figs: list[Figure] = []
    png = plots._png

    def keep(fig: Figure, **kw: bool) -> bytes:
        figs.append(fig)
        return png(fig, **kw)

    monkeypatch.setattr(plots, "_png", keep)
    return figs


def _named(fig: Figure) -> list[int]:
    return [i for i, ax in enumerate(fig.axes) if any(t.get_text() for t in ax.get_xticklabels())]


@pytest.mark.parametrize(("columns", "named"), [(8, [3]), (3, [2, 3])])
def test_the_heatmap_names_its_columns_under_the_lowest_panels_only(drawn, columns, named):
    tasks = ["t1", "t2"]
    cols = [f"cond{j}" for j in range(columns)]
    cells = {(t, c): (0.5, "50%") for t in tasks for c in cols}
    panels = [(name, cells, "Blues") for name in ("success", "in SASS", "executed", "rounds to success")]
    plots.task_heatmap(tasks, cols, panels)
    (fig,) = drawn
    assert _named(fig) == named  # one panel per row (8 columns), or two side by side (3 columns)
    labels = [t.get_text() for t in fig.axes[named[0]].get_xticklabels()]
    assert labels == cols


def _notes(fig: Figure) -> list[list[str]]:
    return [[t.get_text() for t in ax.texts] for ax in fig.axes]


def test_a_reason_every_bar_shares_is_said_once_per_panel(drawn):
    rows = [(f"cond{j} (budget 8000)", None, 900.0 + j, None, "n/a: GPU not run") for j in range(6)]
    plots.cost_chart(rows)
    assert _notes(drawn[0]) == [
        ["per solved episode: n/a: GPU not run"],
        ["cost per solved episode: n/a: GPU not run"],
    ]


def test_bars_missing_among_others_are_each_noted(drawn):
    rows = [("a", 1000.0, 900.0, 0.5, ""), ("b", None, 800.0, None, "n/a: none solved"),
            ("c", None, 700.0, None, "n/a: none solved")]  # fmt: skip
    plots.cost_chart(rows)
    assert _notes(drawn[0]) == [["n/a: none solved"] * 2, ["n/a: none solved"] * 2]


def test_success_not_measured_anywhere_is_said_once_and_else_under_each_bar(drawn):
    from test_bench_report import ep

    from ptxrag.bench import metrics

    none = [ep(t, c, s, gpu=False) for t in ("a", "b") for c in ("x", "y", "z") for s in range(2)]
    plots.ablation_chart(metrics.aggregate(none, ("condition", "model")))
    assert _notes(drawn[0]) == [["success n/a for every bar: the GPU stages did not run"]]
    some = [*none[:4], *(ep("a", "w", s, success=True, solved=1) for s in range(2))]
    plots.ablation_chart(metrics.aggregate(some, ("condition", "model")))
    assert _notes(drawn[1]) == [["success n/a\n(GPU not run)"] * 2]


def test_labels_inside_the_axes_are_kept_out_of_the_layout_passes(drawn):
    """They never move the axes' bounds; in the layout, each would be laid out again in every pass."""
    tasks, cols = ["t1", "t2"], ["c1", "c2", "c3"]
    cells = {(t, c): (0.5, "50%\n1/2") for t in tasks for c in cols}
    plots.task_heatmap(tasks, cols, [("success", cells, "Greens"), ("in SASS", cells, "Blues")])
    plots.cost_chart([("a", None, 900.0, None, "n/a: GPU not run"), ("b", 1.0, 2.0, 0.1, "")])
    texts = [t for fig in drawn for ax in fig.axes for t in ax.texts]
    assert len(texts) == 2 * 6 + 2 and not any(t.get_in_layout() for t in texts)


def test_figures_fitted_by_their_layout_are_drawn_once_and_nothing_falls_off_the_canvas(monkeypatch):
    """``bbox_inches="tight"`` draws a figure twice (once to measure it); the failures and cost charts are
    fitted by ``tight_layout`` measured at the saving DPI, drawn once, and their long labels stay whole."""
    draws: list[Figure] = []
    draw = Figure.draw

    def counting(self, renderer):  # type: ignore[no-untyped-def]
        draw(self, renderer)
        draws.append(self)
        canvas = self.bbox
        for ax in self.axes:
            lo, hi = sorted(ax.get_xlim())
            shown = [t for t in ax.get_xticklabels() if lo <= t.get_position()[0] <= hi]  # drawn ones
            for t in [*ax.get_yticklabels(), *shown, *ax.texts]:
                if t.get_text():
                    box = t.get_window_extent(renderer)
                    assert box.x0 >= canvas.x0 - 1 and box.x1 <= canvas.x1 + 1, t.get_text()
                    assert box.y0 >= canvas.y0 - 1 and box.y1 <= canvas.y1 + 1, t.get_text()

    monkeypatch.setattr(Figure, "draw", counting)
    long = "compile failed: compile error: ptxas <file>, line N; error : Unknown modifier '.i32' " * 2
    plots.failures_chart(
        {"warp": [(long, 12), ("static failed: redux.sync not found", 3)], "tma": [("x", 1)]}
    )
    assert len(draws) == 1
    plots.cost_chart([(f"rag+templates/summary (budget 24000)\nreplay:{j}", 10.0 * j, 5.0, None, "n/a")
                      for j in range(5)])  # fmt: skip
    assert len(draws) == 2
