# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Milestone 07: Custom Kernels
#
# A fast kernel must first be a correct one. In Module 17 you wrote a tiled matrix multiply, a fused
# GELU, im2col and its adjoint col2im. This notebook checks them on the shapes that break naive kernels
# (ragged last tiles, 1-wide matrices, K = 1, stride 2, padding), draws what the kernels do, lets you
# map tile sizes to pass/fail, and ends by timing compiled SIMD code (and a GPU where there is one) on
# the same problems.
#
# Run the cells top to bottom. Your code always runs in a child process, so a crash or a hang in it
# becomes a named result, never a dead notebook. After "Run All", the verdict is at the end:
# **[jump to the verdict](#The-verdict)**.

# %% tags=["setup"]
# Setup. On Colab: install TinyTorch when it is not importable (TINYTORCH_PIP is a form field: where
# your course publishes it), and turn on Colab's widget manager. Elsewhere this cell does nothing.
import importlib.util
import os
import subprocess
import sys

TINYTORCH_PIP = "git+https://github.com/tinytorch-course/milestone07.git"  # @param {type:"string"}
try:
    from google.colab import output as colab_output
except ImportError:
    colab_output = None
if colab_output is not None and importlib.util.find_spec("tinytorch") is None:
    fix = "set TINYTORCH_PIP in the form above to a reachable git+https URL and rerun this cell"
    if not TINYTORCH_PIP.strip() or "<" in TINYTORCH_PIP or ">" in TINYTORCH_PIP:
        raise SystemExit(f"TINYTORCH_PIP {TINYTORCH_PIP!r} is a placeholder: {fix}.")
    pip = [sys.executable, "-m", "pip", "install", "-q", TINYTORCH_PIP]
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}  # a private or missing repo: fail, never ask
    done = subprocess.run(pip, check=False, capture_output=True, text=True, env=env)
    said = [ln.strip() for ln in (done.stderr or done.stdout or "").splitlines() if ln.strip()]
    why = [ln for ln in said if ln.startswith(("fatal:", "ERROR:"))] + said[-1:] + ["pip failed"]
    if done.returncode != 0:  # why[0]: git's or pip's own error, not pip's closing note
        raise SystemExit(f"Could not install TinyTorch from {TINYTORCH_PIP!r} ({why[0]}): {fix}.")
if colab_output is not None:
    colab_output.enable_custom_widget_manager()

# %% tags=["parameters"]
# The implementation under test: a module name, or the path to your own acceleration.py.
# `tito grade --impl ...` overrides these in a cell it inserts right below this one.
IMPL = "tinytorch.perf.acceleration"
SEED = 0  # another seed draws other test data
TIMEOUT = 5.0  # seconds each case may run before it is called a hang
PART_B = "default"  # native timings: "default", "quick" or "off"
GRADING = False  # grading mode (tito grade's default): a secret seed and hidden cases in the gate
BUDGET = None  # seconds for the whole gate, then the rest is TIMEOUT (tito grade: its --budget)

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
from IPython.display import HTML, display

from tinytorch import milestone07 as m07
from tinytorch import viz
from tinytorch.bench.part_b import run_part_b
from tinytorch.render.json_doc import to_json
from tinytorch.render.notebook_gate import gate_html
from tinytorch.render.notebook_record import (
    cases_bundle,
    checks_bundle,
    show,
    text_bundle,
    verdict_bundle,
)
from tinytorch.render.notebook_tables import cases_lead_html
from tinytorch.render.terminal import render_part_b
from tinytorch.viz.explore import Im2colExplorer, TileExplorer
from tinytorch.viz.widget import TileHeatmap


# %%
def walk(group: str, check: str | None = None):
    """One group of the gate on IMPL: verdict and lesson, the first failure drawn, the table.
    `check`: the deeper check whose evidence shows this group's bug (the im2col column order)."""
    names = [case.name for case in m07.CASES if case.group == group]
    result = m07.run_part_a(IMPL, seed=SEED, timeout=TIMEOUT, cases=names, checks=bool(check))
    show(text_bundle(m07.GROUP_INTRO[group], prose=True))  # wraps between words
    display(HTML(cases_lead_html(result.cases)))
    evidence = [c for c in result.checks if c.name == check]
    viz.show_failures(result.cases, evidence)  # from the graded output: nothing of yours reruns
    show(cases_bundle(result.cases, stage=group, lead=False))
    return result


print(f"Implementation under test: {IMPL}")
print(f"{len(m07.CASES)} gate cases in {len(m07.GROUPS)} groups: {', '.join(m07.GROUPS)}")

# %% [markdown]
# ## Part A, the pass gate, group by group
#
# ### 1. `tiled_matmul`: the ragged last tile, on every axis
#
# A tiled product cuts C (M×N) into `tile_size` squares and walks K in blocks of `tile_size`,
# accumulating `C[i, j] += A[i, k] @ B[k, j]`. When `tile_size` does not divide M, N or K, the last
# tile on that axis is shorter: a kernel that forgets it drops rows, columns or part of the sum. The
# cases use six shapes (a multiple of the tile, ragged on all axes, M = 1 and N = 1, K = 1, smaller
# than one tile, larger than two tiles) at tile sizes 64, 16 and 7.

# %%
matmul = walk("tiled_matmul")

# %% [markdown]
# ### 2. `fused_gelu`: one formula, every float32
#
# GELU's tanh approximation, checked against the same formula in float64 on normal data, a ragged
# 2-D shape, a sweep over ±20 and exact zeros. The usual bugs: the erf form instead of tanh, a
# wrong constant, float16 inside, or a hand-written tanh that overflows to NaN for large |x|.

# %%
gelu = walk("fused_gelu")

# %% [markdown]
# ### 3. `im2col_conv2d`: a convolution as one matrix multiply
#
# im2col copies every receptive field into one row, so the convolution becomes
# `im2col(x) @ weight.reshape(F, -1).T`. Checked against a direct float64 sliding window with
# padding, stride 2 on an odd, non-square input, a 2×2 kernel and a 5×5 kernel with padding 2.
#
# As in the course, `im2col_conv2d` is inference only (a plain Tensor, no graph). The backward pass
# is graded through the differentiable path, `Im2colConv2dFunction.apply(x, weight, bias,
# stride=..., padding=...)`: the `backward` check compares its grad x, grad weight and grad bias
# with float64.

# %%
conv = walk("im2col_conv2d", check="im2col layout")

# %% [markdown]
# ### 4. `col2im`: the adjoint, not the inverse
#
# Overlapping windows read the same pixel several times, so the way back must ADD every copy:
# `<im2col(x), g> = <x, col2im(g)>` for all x and g. Assigning instead of adding, or forgetting to crop
# the padding, breaks the identity.

# %%
adjoint = walk("col2im")

# %% [markdown]
# ### The full gate and the deeper checks
#
# The grade comes from one run of all 30 cases plus checks the cases alone cannot see: the product is
# really tiled (no block product larger than `tile_size`, no whole-matrix `np.matmul`), the im2col
# column layout, col2im's coverage counts, inputs left untouched, and float32, finite outputs. When a
# deeper check explains a group's failures, it is named first, as the root cause.

# %%
part_a = m07.run_part_a(
    IMPL, seed=None if GRADING else SEED, timeout=TIMEOUT, grading=GRADING, budget=BUDGET
)
# the grader's record of the gate; people see only what sections 1 to 4 did not say
gate = cases_bundle(
    part_a.cases, stage="gate", compact=True, checks=part_a.checks, hidden=part_a.hidden
)
show({**gate, "text/html": gate_html(part_a)})
show(checks_bundle(part_a.checks))
drawn = viz.show_failures([], part_a.checks)  # e.g. im2col's columns, expected against yours

# %% [markdown]
# ## Ragged tiles, drawn
#
# C = A @ B with M = 37, N = 23, K = 29 and `tile_size` 7: 7 does not divide any of them, so the last
# tile row, the last tile column and the last K-block are all short. The framed corner tile of C is the
# sum of the products of its A row panel and B column panel, one K-block at a time. Move the sliders
# (M, N, K, tile size) to see which tiles turn ragged; a tile that divides an axis leaves no ragged
# tile on it.

# %%
tiles = TileExplorer(37, 23, 29, 7)
display(tiles.widget)

# %% [markdown]
# ## im2col, drawn
#
# Each output position reads one k×k window from every channel of the padded input. im2col writes that
# window as one row, columns ordered (channel, kernel row, kernel col): the same order as
# `weight.reshape(F, -1)`, which is why one matrix multiply computes the convolution. Colours follow
# the column: hue for the channel, shade for the position in the kernel. With stride 2 the windows
# jump two pixels (the dashed window is the previous output column's), so the output is smaller; pick
# the output position to highlight with the last two sliders.

# %%
im2col_view = Im2colExplorer(c=2, h=5, w=5, k=3, stride=1, padding=1)
display(im2col_view.widget)

# %% [markdown]
# ## Tile sizes against shapes
#
# Pick tile sizes and shapes (Ctrl- or Shift-click for several): each cell runs your `tiled_matmul` on
# that shape with that tile size and shows pass (green), fail (red) or error (grey) with the max abs
# error. A correct kernel is green everywhere. Pick an example bug in "kernel" to see its pattern:
# dropping the ragged K tile fails exactly where the tile does not divide K; `=` instead of `+=`
# passes only where K fits in one tile. "GFLOP/s vs tile size" times your kernel on one large shape
# beside NumPy: small tiles pay Python's overhead per block, large ones fall out of the cache.

# %%
heatmap = TileHeatmap(IMPL, seed=SEED, timeout=TIMEOUT)
display(heatmap.widget)

# %% [markdown]
# ## Part B: the same problems on native kernels
#
# Context, never the grade. The C++ SIMD kernels are compiled now with your compiler (or loaded from
# the cache), then GEMM and bias+GELU are timed for your kernels, NumPy/BLAS, C++, torch, and MPS and
# Triton where present. Your kernels run alone in their own process, on inputs that change on every
# call, and every call's output is checked; the baselines run afterwards in processes that never
# loaded your code. The last problem is the fusion lesson: your `unfused_gelu` (one pass over memory
# per NumPy operation) against your `fused_gelu` and the C++ kernel (one pass), in GB/s.
#
# How to read it:
# - A kernel that failed Part A is timed but marked **incorrect: not credited**, and is not drawn.
# - A rate above 1.2x the machine's measured ceiling is **not credible** and is not drawn.
# - **noisy: rerun** marks a figure whose samples disagree, one timed while other processes kept the
#   CPUs busy, or a baseline that came out slower than your kernel. To rerun Part B alone, run the
#   next cell again (Part A's result is kept in `part_a`), or call
#   `run_part_b(IMPL, part_a=part_a)` when the machine is quiet.
#
# The roofline puts every run under the machine's ceilings, measured by Part B itself: the FMA peak
# (compute) and the copy bandwidth (memory).

# %%
from tinytorch.profiling import Ceilings

native = viz.native.native_status()
show(text_bundle(viz.native.native_status_text(native)))
part_b = None if PART_B == "off" else run_part_b(IMPL, sizes=PART_B, part_a=part_a, progress=print)
if part_b is not None:
    show(text_bundle(render_part_b(part_b)))  # wraps between words, never inside one
    ceilings = Ceilings.from_dict(part_b.ceilings) if part_b.ceilings else None
    viz.draw_throughput(part_b.rows, ceilings)
    plt.show()
    if ceilings is not None:
        viz.draw_roofline(part_b.rows, ceilings)
        plt.show()

# %% [markdown]
# ## The verdict
#
# The verdict below is what `tito grade` records: PASS when all 30 cases and every deeper check hold.

# %% tags=["summary"]
from tinytorch.profiling.environment import environment

show(verdict_bundle(to_json(part_a, part_b, env=environment())))
