"""Module 14: the machine's ceilings, measured one way: FMA peak (GFLOP/s) and copy bandwidth (GB/s).

Method (the only one in TinyTorch; `tito bench`, Part B and the notebook's roofline all use it):
  - compute: the C++ FMA micro-benchmark (12 independent FMA chains per thread), at 1 and 2
    threads. Without the C++ build, BLAS sgemm on 1024^3 stands in (it is below the true peak).
  - memory: a copy of 64 MiB (16 MiB with quick), far past the caches, counted as read + write:
    the C++ parallel copy at each thread count, or np.copyto without the build.
  - rounds are interleaved and the BEST round counts: a ceiling is what the machine can do, and
    other processes only ever slow a round down. Rounds that disagree beyond the noise rule mark
    the figure "moved"; a figure that cannot be a ceiling is withheld (profiling.credible).
  - Part B spreads single rounds over its run, between the rows they bound (combine_rounds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinytorch.profiling.credible import moved, not_a_ceiling
from tinytorch.profiling.timing import interleaved, per_call


@dataclass(frozen=True)
class Ceilings:
    """Measured ceilings per thread count: {threads: GFLOP/s} and {threads: GB/s}.

    moved: the figures ("fma_gflops_2t", ...) whose rounds disagreed beyond the noise rule;
    withheld: {figure: why} for figures that cannot be a ceiling (profiling.credible), left out
    of fma_gflops / copy_gbs.
    """

    fma_gflops: dict[int, float]
    copy_gbs: dict[int, float]
    how: str
    notes: list[str] = field(default_factory=list)
    moved: tuple[str, ...] = ()
    withheld: dict[str, str] = field(default_factory=dict)

    @property
    def gflops(self) -> float:
        """The highest compute ceiling measured (any thread count)."""
        return max(self.fma_gflops.values())

    @property
    def gbps(self) -> float:
        """The highest copy bandwidth measured (any thread count)."""
        return max(self.copy_gbs.values())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"how": self.how, "notes": list(self.notes)}
        for t, v in self.fma_gflops.items():
            out[f"fma_gflops_{t}t"] = v
        for t, v in self.copy_gbs.items():
            out[f"copy_gbs_{t}t"] = v
        out["fma_gflops"], out["copy_gbs"] = self.gflops, self.gbps
        out["moved"], out["withheld"] = list(self.moved), dict(self.withheld)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ceilings:
        """The inverse of to_dict (what a child process sends back as JSON-able data)."""

        def per_thread(prefix: str) -> dict[int, float]:
            keys = [k for k in d if k.startswith(prefix) and k.endswith("t")]
            return {int(k[len(prefix) : -1]): float(d[k]) for k in keys}

        fma, copy = per_thread("fma_gflops_"), per_thread("copy_gbs_")
        if not fma or not copy:
            raise ValueError(
                f"Ceilings.from_dict: no fma_gflops_<n>t / copy_gbs_<n>t in {sorted(d)}"
            )
        moved = tuple(str(m) for m in d.get("moved") or ())
        withheld = {str(k): str(v) for k, v in (d.get("withheld") or {}).items()}
        return cls(fma, copy, str(d.get("how", "")), list(d.get("notes", [])), moved, withheld)


def _withhold_impossible(
    fma: dict[int, float], copy: dict[int, float]
) -> tuple[dict[int, float], dict[int, float], dict[str, str]]:
    """The figures left once those that cannot be a ceiling are taken out, and why each went."""
    withheld: dict[str, str] = {}
    kept = []
    for name, per_thread in (("fma_gflops", fma), ("copy_gbs", copy)):
        bad = not_a_ceiling(per_thread)
        withheld |= {f"{name}_{t}t": why for t, why in bad.items()}
        kept.append({t: v for t, v in per_thread.items() if t not in bad})
    return kept[0], kept[1], withheld


def combine_rounds(rounds: Sequence[Ceilings]) -> Ceilings:
    """One Ceilings from rounds measured at different moments of a run: each figure the best of
    its rounds (other work only ever slows a round down), "moved" where the rounds disagree beyond
    the noise rule, and a figure that cannot be a ceiling withheld."""
    if not rounds:
        raise ValueError("combine_rounds: rounds must hold at least one Ceilings")
    fma: dict[int, list[float]] = {}
    copy: dict[int, list[float]] = {}
    for r in rounds:
        for t, v in r.fma_gflops.items():
            fma.setdefault(t, []).append(v)
        for t, v in r.copy_gbs.items():
            copy.setdefault(t, []).append(v)
    moved_names = [f"fma_gflops_{t}t" for t, vs in fma.items() if moved(vs)]
    moved_names += [f"copy_gbs_{t}t" for t, vs in copy.items() if moved(vs)]
    best_fma, best_copy, withheld = _withhold_impossible(
        {t: max(vs) for t, vs in fma.items()}, {t: max(vs) for t, vs in copy.items()}
    )
    for r in rounds:  # a round's own note stays, once
        withheld = r.withheld | withheld
    how = f"{rounds[0].how}; the best of {len(rounds)} rounds spread over the run"
    notes = list(dict.fromkeys(n for r in rounds for n in r.notes))
    return Ceilings(best_fma, best_copy, how, notes, tuple(moved_names), withheld)


def _simd() -> Any | None:
    try:
        from tinytorch.extensions import simd
    except ImportError:
        return None
    try:
        return simd if simd.available()[0] else None
    except Exception:  # noqa: BLE001 (a failing build leaves the NumPy stand-ins)
        return None


# Rounds of 12 FMA chains per thread (simd.fma_peak): ~40 ms at 90 GFLOP/s, ~4 ms with quick.
FMA_ITERS = 20_000_000
FMA_ITERS_QUICK = 2_000_000


def measure_ceilings(
    *,
    threads: Sequence[int] = (1, 2),
    quick: bool = False,
    rounds: int = 3,
    copy_floats: int | None = None,
) -> Ceilings:
    """FMA peak and copy bandwidth at each thread count, best of `rounds` interleaved rounds.

    copy_floats: the copied array's size, when the figures it bounds are on arrays that size (a
    2 MiB array is copied from cache, faster than memory allows: its own bound, not memory's)."""
    simd = _simd()
    n = 2048 * 2048 if quick else 4096 * 4096  # floats: 16 or 64 MiB
    if copy_floats is not None:
        if isinstance(copy_floats, bool) or not isinstance(copy_floats, int) or copy_floats < 1:
            raise ValueError(
                f"measure_ceilings: copy_floats must be an int >= 1, got {copy_floats!r}"
            )
        n = copy_floats
    src = np.ones(n, dtype=np.float32)
    dst = np.empty_like(src)
    copy_bytes = 2.0 * src.nbytes  # read + write
    fns: dict[str, Callable[[], float]] = {}
    if simd is not None:
        iters = FMA_ITERS_QUICK if quick else FMA_ITERS
        how = "C++ FMA peak; C++ parallel copy of {mib} MiB"
        for t in threads:
            fns[f"fma {t}"] = lambda t=t: 1.0 / simd.fma_peak(threads=t, iters=iters)
            fns[f"copy {t}"] = lambda t=t: (
                per_call(lambda: simd.copy(src, threads=t, out=dst), min_time=0.02).median
            )
    else:
        from threadpoolctl import threadpool_limits

        a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
        how = "BLAS sgemm 1024^3 (C++ not built: below the FMA peak); np.copyto of {mib} MiB"

        def sgemm(t: int) -> float:
            with threadpool_limits(limits=t, user_api="blas"):
                return 2 * 1024**3 / per_call(lambda: a @ a, min_time=0.02).median / 1e9

        for t in threads:
            fns[f"fma {t}"] = lambda t=t: 1.0 / sgemm(t)
            fns[f"copy {t}"] = lambda: per_call(lambda: np.copyto(dst, src), min_time=0.02).median
    timings = interleaved(fns, rounds)
    best = {name: timing.min for name, timing in timings.items()}
    fma = {t: 1.0 / best[f"fma {t}"] for t in threads}
    copy = {t: copy_bytes / best[f"copy {t}"] / 1e9 for t in threads}
    moved_names = [  # rounds of one figure that disagree beyond the noise rule
        f"{'fma_gflops' if name.startswith('fma') else 'copy_gbs'}_{name.split()[1]}t"
        for name, timing in timings.items()
        if moved([1.0 / s for s in timing.samples])
    ]
    fma, copy, withheld = _withhold_impossible(fma, copy)
    return Ceilings(
        fma_gflops=fma,
        copy_gbs=copy,
        how=how.format(mib=f"{src.nbytes / 2**20:.3g}")
        + (f" (best of {rounds} rounds)" if rounds > 1 else ""),
        moved=tuple(moved_names),
        withheld=withheld,
    )
