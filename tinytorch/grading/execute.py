"""Execute a notebook headless with nbclient, cell by cell, keeping whatever it reached.

Unlike `NotebookClient.execute()`, this times each cell and, on a timeout, an exception or a dead
kernel (a segfault in student code), still stores the widget state and the outputs so far.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
POLL_S = 0.5  # the longest single wait on a kernel socket (see short_polls)


@dataclass
class CellRun:
    index: int
    id: str | None
    tags: list[str]
    status: str  # "ok" | "error" | "timeout" | "dead_kernel" | "not_run" | "markdown"
    seconds: float = 0.0


@dataclass
class Execution:
    nb: Any  # the notebook, with outputs and widget state as far as it got
    status: str  # "completed" | "cell_error" | "timeout" | "dead_kernel"
    cells: list[CellRun]
    error: dict[str, Any] | None = None  # {"cell", "ename", "evalue"} when not completed
    seconds: float = 0.0
    widget_models: int = field(default=0)


def inject_parameters(nb: Any, params: dict[str, Any]) -> Any:
    """Insert a cell after the one tagged "parameters" that overrides it (papermill's convention).

    The values are written with repr(), so the executed notebook shows exactly what was graded.
    """
    if not params:
        return nb
    tagged = [
        i for i, c in enumerate(nb.cells) if PARAMETERS_TAG in c.get("metadata", {}).get("tags", [])
    ]
    if not tagged:
        raise ValueError("notebook has no cell tagged 'parameters' to override")
    nb.cells = [c for c in nb.cells if INJECTED_TAG not in c.get("metadata", {}).get("tags", [])]
    tagged = [
        i for i, c in enumerate(nb.cells) if PARAMETERS_TAG in c.get("metadata", {}).get("tags", [])
    ]
    source = "# Parameters injected by `tito grade`\n" + "".join(
        f"{name} = {value!r}\n" for name, value in params.items()
    )
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [INJECTED_TAG]})
    nb.cells.insert(tagged[0] + 1, cell)
    return nb


# exception -> (run status, cell status)
_FAILURES = {
    CellTimeoutError: ("timeout", "timeout"),
    DeadKernelError: ("dead_kernel", "dead_kernel"),
    CellExecutionError: ("cell_error", "error"),
}


def _error_of(cell: Any, exc: BaseException) -> tuple[str, str]:
    """(ename, evalue): the cell's own error output when it has one, else the exception's."""
    if not isinstance(exc, CellExecutionError):
        return type(exc).__name__, str(exc).strip()
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return out.get("ename", type(exc).__name__), out.get("evalue", "")
    return type(exc).__name__, str(exc).strip().splitlines()[-1] if str(exc).strip() else ""


def short_polls(channel: Any) -> None:
    """Make `channel.get_msg(timeout)` wait in polls of at most POLL_S seconds.

    One long zmq.asyncio poll can miss the wake-up of a message that has already arrived, and the
    message then waits out the whole poll: a cell's reply was seen held for its full 300 s timeout
    (under ipywidgets 7.7, about one run in three). Each new poll looks at the socket again.
    """
    get = channel.get_msg

    async def get_msg(timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await get(timeout=POLL_S if left is None else min(POLL_S, left))
            except Empty:
                if left is not None and left <= POLL_S:
                    raise

    channel.get_msg = get_msg


def execute(nb: Any, *, timeout: float, cwd: str | Path, kernel_name: str = "python3") -> Execution:
    """Run every code cell in order; stop at the first exception, timeout or kernel death."""
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(cwd)}},
        store_widget_state=True,  # an Output widget with it False raises KeyError in nbclient
        allow_errors=False,
        record_timing=True,
        # ipykernel warns on stderr that it runs over TCP without encryption; tito grade's own
        # report is all a grader should see, and the kernel only ever talks to this process.
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    runs = [
        CellRun(
            i,
            c.get("id"),
            list(c.get("metadata", {}).get("tags", [])),
            "not_run" if c.cell_type == "code" else "markdown",
        )
        for i, c in enumerate(nb.cells)
    ]
    status, error = "completed", None
    start = time.perf_counter()
    try:
        with client.setup_kernel():
            short_polls(client.kc.shell_channel)
            short_polls(client.kc.iopub_channel)
            info = client.wait_for_reply(client.kc.kernel_info())
            if info:
                nb.metadata["language_info"] = info["content"]["language_info"]
            for index, cell in enumerate(nb.cells):
                if cell.cell_type != "code":
                    continue
                t0 = time.perf_counter()
                try:
                    client.execute_cell(cell, index, execution_count=client.code_cells_executed + 1)
                    runs[index].status = "ok"
                except (CellTimeoutError, DeadKernelError, CellExecutionError) as exc:
                    status, runs[index].status = _FAILURES[type(exc)]
                    ename, evalue = _error_of(cell, exc)
                    error = {"cell": index, "ename": ename, "evalue": evalue[:500]}
                runs[index].seconds = time.perf_counter() - t0
                if status != "completed":
                    break
    except DeadKernelError as exc:  # died while starting or shutting down
        if status == "completed":
            status = "dead_kernel"
            error = {"cell": None, "ename": "DeadKernelError", "evalue": str(exc).strip()[:500]}
    finally:
        client.set_widgets_metadata()  # keep the widget state however the run ended
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return Execution(
        nb, status, runs, error, time.perf_counter() - start, len(state.get("state", {}))
    )
