"""One redraw mechanism for every widget and explorer: the newest request wins, one figure is shown.

A widget's callback can be re-entered (a kernel that handles the next slider or dropdown change
while a slow redraw still runs), or finish out of order. So each request takes a generation
number when it starts, and a figure or status line that arrives for an older generation is
dropped, its figure closed. The figure and the status line of a request are shown together, so
they always describe the same kernel and the same request. The busy state (status text, the old
figure dimmed by style.BUSY_CSS) lasts until the newest request's figure is on screen.

Nothing escapes to JupyterLab's Log Console: figures are built and shown inside the Output,
warnings raised while drawing are recorded (`warnings_seen`), any other exception becomes a status
line, and every figure the request opened is closed, whether it was shown, dropped or half-drawn.

Cost: a request states an estimate of its seconds before it starts; one over BUDGET_S is refused
by the caller (or drawn coarser) and says so (see `over_budget`).
"""

from __future__ import annotations

import html
import time
import warnings
from collections.abc import Callable
from typing import Any

import matplotlib.pyplot as plt

from tinytorch.viz import style

BUDGET_S = 3.0  # a redraw estimated above this is refused or coarsened: the kernel stays usable
BUSY_STYLE = "<i>{}</i>"
ERROR_STYLE = f"<b style='color:{style.FAIL_COLOUR}'>{{}}</b>"  # the request failed


def _display(fig: Any) -> None:
    """Show exactly `fig` (never every open pyplot figure, as plt.show() would)."""
    from IPython.display import display

    display(fig)


class Redraw:
    """Generation-numbered redraws into one Output and one status HTML."""

    def __init__(self, out: Any, status: Any) -> None:
        self.out, self.status = out, status
        self.generation = 0  # the newest request's number
        self.shown_generation: int | None = None  # whose figure the Output holds
        self.shown_title: str | None = None  # and its title (what the tests read)
        self.figures_shown = 0  # every figure ever displayed (at most one on screen)
        self.dropped = 0  # results that arrived for an older request and were thrown away
        self.states: list[str] = []  # every status shown, in order
        self.warnings_seen: list[str] = []  # warnings raised while drawing, kept off the console
        self.display: Callable[[Any], None] = _display
        self.last_seconds: float | None = None  # drawing + showing the last figure shown
        self.busy = False  # from a request's start until its figure (or its message) is shown

    def begin(self, text: str) -> int:
        """A new request: its generation number. The old figure stays, dimmed, until replaced."""
        self.generation += 1
        self._say(BUSY_STYLE.format(text))
        self.out.add_class("tt-busy")
        self.busy = True
        return self.generation

    def current(self, gen: int) -> bool:
        return gen == self.generation

    def _say(self, text: str) -> None:
        self.status.value = text
        self.states.append(text)

    def _idle(self) -> None:
        self.out.remove_class("tt-busy")
        self.busy = False

    def message(self, gen: int, text: str) -> bool:
        """End request `gen` with a status line and no figure; False (nothing done) if stale."""
        if not self.current(gen):
            self.dropped += 1
            return False
        self.out.clear_output()
        self.shown_generation, self.shown_title = gen, None
        self._say(text)
        self._idle()
        return True

    def error(self, gen: int, text: str) -> bool:
        return self.message(gen, ERROR_STYLE.format(html.escape(text)))

    def draw(self, gen: int, make: Callable[[], Any], status: Callable[[Any], str]) -> bool:
        """Build the figure of request `gen` with `make()`, and show it with `status(fig)`.

        Returns True when this request's figure is on screen. A request overtaken before or
        after drawing shows nothing; a ValueError from `make` is the request's message (bad
        input, named); any other exception too, as "drawing failed" (both return False).
        """
        if not self.current(gen):
            self.dropped += 1
            return False
        before = set(plt.get_fignums())
        start = time.perf_counter()
        fig = None
        try:
            with self.out, warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    fig = make()
                    if self.current(gen):
                        fig.canvas.draw()  # render now: the busy state covers the drawing
                except ValueError as exc:
                    self.error(gen, str(exc))
                    return False
                except Exception as exc:  # noqa: BLE001  (a broken drawing must not kill the widget)
                    self.error(gen, f"drawing failed: {type(exc).__name__}: {exc}")
                    return False
                finally:
                    self.warnings_seen += [str(w.message) for w in caught]
                if not self.current(gen):  # overtaken while drawing: the newer one shows
                    self.dropped += 1
                    return False
                text = status(fig)
                self.out.clear_output(wait=True)  # replaces, never stacks
                self.display(fig)
                self.last_seconds = time.perf_counter() - start
                self.figures_shown += 1
                self.shown_generation = gen
                self.shown_title = figure_title(fig)
                self._say(text)
                self._idle()
                return True
        finally:
            for num in set(plt.get_fignums()) - before:  # this request's, shown or half-drawn
                plt.close(num)
            if fig is not None:
                plt.close(fig)


def figure_title(fig: Any) -> str:
    """The suptitle, else the first axes' title: what a student reads as the figure's name."""
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and sup.get_text():
        return sup.get_text()
    return next((ax.get_title() for ax in fig.axes if ax.get_title()), "")


def over_budget(seconds: float, what: str, advice: str) -> str | None:
    """The refusal a widget shows when `seconds` (its estimate) exceeds BUDGET_S, else None."""
    if seconds <= BUDGET_S:
        return None
    return (
        f"Not drawn: {what} would take about {seconds:.0f} s (more than {BUDGET_S:.0f} s keeps"
        f" the notebook busy). {advice}"
    )
