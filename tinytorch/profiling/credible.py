"""Module 14: which measured figures can be believed. One set of rules for Part B, `tito bench`
and the charts.

- A rate above CREDIBLE x the ceiling measured for it cannot happen: one of the two was timed
  while other work slowed the machine. The rate is withheld (not credited, not drawn), with why.
- A ceiling is measured in several rounds. When its rounds disagree by more than the noise rule
  (the best over the worst above 1 + NOISY_SPREAD), it "moved": the machine changed under the run.
- A ceiling at more threads below the one at fewer threads, beyond the noise rule, is not a
  ceiling (the machine can always run the fewer-thread code): it is withheld, with why.
- On a busy machine the verdict still stands, and so does a ratio of two figures timed in the same
  round; an absolute rate does not (BUSY_TRUST says so in one sentence).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from tinytorch.profiling.timing import NOISY_SPREAD

CREDIBLE = 1.2  # a rate above this x its measured ceiling is not credible
# Backends that run on a GPU: this CPU's ceilings do not bound them (an Apple GPU's GEMM is far
# above the CPU's FMA peak, and rightly so), so no rule here withholds their figures.
OFF_CPU_BACKENDS = frozenset({"mps", "triton"})


def bounded_by_cpu(backend: str) -> bool:
    """True when the CPU's ceilings bound the backend's figures (it runs on this CPU)."""
    return backend not in OFF_CPU_BACKENDS


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def above_ceiling(rate: float | None, ceiling: float | None) -> bool:
    """True when `rate` is above CREDIBLE x `ceiling` (both GFLOP/s, or both GB/s)."""
    if not (_number(rate) and _number(ceiling)) or ceiling <= 0:
        return False
    return rate > CREDIBLE * ceiling


def above_ceiling_reason(rate: float, ceiling: float, unit: str, name: str = "ceiling") -> str:
    """Why a rate is withheld: the figures, and what makes them impossible together."""
    return (
        f"{rate:.4g} {unit} is above {CREDIBLE} x the measured {name} ({ceiling:.4g} {unit}): "
        "impossible, other work slowed one of the two"
    )


def moved(values: Sequence[float]) -> bool:
    """True when rounds of one ceiling disagree beyond the noise rule: best / worst > 1 + NOISY_SPREAD."""
    good = [v for v in values if _number(v) and v > 0]
    return len(good) >= 2 and max(good) / min(good) > 1 + NOISY_SPREAD


def not_a_ceiling(per_thread: Mapping[int, float]) -> dict[int, str]:
    """{threads: why} for each figure below the one at fewer threads beyond the noise rule."""
    out: dict[int, str] = {}
    counts = sorted(t for t, v in per_thread.items() if _number(v))
    for i, t in enumerate(counts):
        fewer = [c for c in counts[:i] if c < t]
        if not fewer:
            continue
        best = max(fewer, key=lambda c: per_thread[c])
        if per_thread[t] * (1 + NOISY_SPREAD) < per_thread[best]:
            out[t] = (
                f"{per_thread[t]:.3g} on {t} threads is below {per_thread[best]:.3g} on {best}: "
                f"impossible for a ceiling ({t} threads can do what {best} do), so another "
                "process held a core during its rounds"
            )
    return out


def busy_trust(verdict: str, ratios: str) -> str:
    """The one sentence a busy run prints: what can still be trusted, and what cannot."""
    return (
        f"What a busy machine leaves standing: {verdict}, always; ratios of two figures timed in "
        f"the same round ({ratios}), yes; absolute rates (GFLOP/s, GB/s), no."
    )
