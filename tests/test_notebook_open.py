"""The notebook opens clean in a real JupyterLab (headless Chromium through Playwright, the same
server as tests/test_browser.py): not marked modified once its kernel is up, saving it writes no
paired `07_custom_kernels.py` beside it, and the link at its top brings the verdict into view."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from test_browser import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_FLAGS,
    KERNEL_READY,
    NOTEBOOK,
    VIEWPORT,
    lab,  # noqa: F401  (the JupyterLab server fixture)
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.timeout(300),
]

DIRTY = "() => window.jupyterapp.shell.currentWidget.context.model.dirty"
SAVE = "() => window.jupyterapp.commands.execute('docmanager:save')"
SERVER_ROOT = """() => JSON.parse(document.getElementById('jupyter-config-data').textContent)
  .serverRoot"""
IN_VIEW = """(title) => { const h = [...document.querySelectorAll('.jp-MarkdownOutput h2')]
  .find(h => h.textContent.replace('¶', '').trim() === title);
  if (!h) return false; const r = h.getBoundingClientRect();
  return r.top >= 0 && r.bottom <= window.innerHeight; }"""


def _changed(a: dict, b: dict) -> list[str]:
    """What saving changed: metadata keys (language_info by its own keys), nbformat, cell fields."""
    la, lb = a["metadata"].get("language_info", {}), b["metadata"].get("language_info", {})
    out = [
        f"metadata.language_info.{k}" for k in sorted(set(la) | set(lb)) if la.get(k) != lb.get(k)
    ]
    out += [f"metadata.{k}" for k in sorted(set(a["metadata"]) | set(b["metadata"]))
            if k != "language_info" and a["metadata"].get(k) != b["metadata"].get(k)]  # fmt: skip
    out += [k for k in ("nbformat", "nbformat_minor") if a.get(k) != b.get(k)]
    if len(a["cells"]) != len(b["cells"]):
        return [*out, "cells (count)"]
    for i, (x, y) in enumerate(zip(a["cells"], b["cells"], strict=True)):
        out += [f"cells[{i}].{k}" for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
    return out


def test_the_notebook_opens_unmodified_saves_alone_and_links_to_its_verdict(
    lab,  # noqa: F811
) -> None:
    from playwright.sync_api import sync_playwright

    base, token = lab
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?reset&token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            root = Path(page.evaluate(SERVER_ROOT)).expanduser()
            before = json.loads((root / NOTEBOOK.name).read_text(encoding="utf-8"))
            page.wait_for_function(KERNEL_READY, timeout=120_000)
            page.wait_for_timeout(3000)  # the kernel's info reply and the widget state settle
            dirty = page.evaluate(DIRTY)
            page.screenshot(path=str(ARTIFACTS / "browser_open_clean.png"))
            page.evaluate(SAVE)
            deadline = time.monotonic() + 20
            while page.evaluate(DIRTY) and time.monotonic() < deadline:
                page.wait_for_timeout(200)
            page.wait_for_timeout(1500)  # an autosave hook (jupytext's) writes after the save
            link = page.get_by_role("link", name="jump to the verdict")
            if link.count():
                link.first.click()
                page.wait_for_timeout(1000)
            in_view = page.evaluate(IN_VIEW, "The verdict")
            page.screenshot(path=str(ARTIFACTS / "browser_verdict_link.png"))
        finally:
            browser.close()
    after = json.loads((root / NOTEBOOK.name).read_text(encoding="utf-8"))
    changed = _changed(before, after)
    version = before["metadata"].get("language_info", {}).get("version")
    if version == sys.version.split()[0]:  # the kernel runs the Python the notebook was saved with
        assert not dirty, f"marked modified on open; saving it changed {changed}"
        assert changed == [], changed
    else:  # another Python: its version is the one thing JupyterLab has to change
        assert changed in ([], ["metadata.language_info.version"]), changed
    paired = [p.name for p in root.iterdir() if p.stem == NOTEBOOK.stem and p.suffix != ".ipynb"]
    assert paired == [], "saving the notebook wrote a paired file into the student's folder"
    assert in_view, "the link at the top does not bring the verdict's heading into view"
