"""The notebook in a real JupyterLab, driven by headless Chromium through Playwright.

Runs all cells, checks that the figures and the heatmap widget render, changes the tile sizes and
checks that the heatmap redraws, and saves screenshots under artifacts/ (gitignored).
Skips when Chromium, Playwright or JupyterLab is missing, except under CI=true, where it fails.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "07_custom_kernels.ipynb"
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


KERNEL_READY = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!(kernel && w.context.isReady && kernel.connectionStatus === 'connected'
            && kernel.status === 'idle');
}"""
STARTED = r"""() => [...document.querySelectorAll('.jp-InputPrompt')]
  .some(p => /\[\d+\]/.test(p.textContent))"""


def _missing(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the browser test must run in CI)")
    pytest.skip(reason)


def _require_tools() -> None:
    if not Path(CHROMIUM).exists():
        _missing(f"no Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium)")
    for module, why in (
        ("playwright", "pip install playwright"),
        ("jupyterlab", "pip install jupyterlab"),
    ):
        if importlib.util.find_spec(module) is None:
            _missing(f"{module} is not installed ({why}; never `playwright install`)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab on 127.0.0.1 with its own root, settings, config and runtime directories."""
    _require_tools()
    tmp = tmp_path_factory.mktemp("lab")
    root = tmp / "root"
    root.mkdir()
    shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
    env = dict(os.environ)
    for var, sub in (
        ("JUPYTER_CONFIG_DIR", "config"),
        ("JUPYTERLAB_SETTINGS_DIR", "settings"),
        ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
        ("JUPYTER_RUNTIME_DIR", "runtime"),
    ):
        (tmp / sub).mkdir()
        env[var] = str(tmp / sub)
    # Render every cell: JupyterLab 4 otherwise only renders the cells near the viewport.
    notebook_settings = tmp / "settings" / "@jupyterlab" / "notebook-extension"
    notebook_settings.mkdir(parents=True)
    (notebook_settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    news = tmp / "settings" / "@jupyterlab" / "apputils-extension"  # no news toast over the page
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=", "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp / "jupyterlab.log", "w")  # noqa: SIM115  (closed in the teardown below)
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"JupyterLab did not start: {(tmp / 'jupyterlab.log').read_text()[-2000:]}"
                    )
                time.sleep(0.5)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def test_notebook_runs_in_jupyterlab_and_heatmap_updates(lab):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    base, token = lab
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            # The app is exposed as window.jupyterapp; wait until the notebook's kernel is idle.
            page.wait_for_function(KERNEL_READY, timeout=120_000)
            for _attempt in range(3):  # Run > Run All Cells, again if the kernel was not listening
                page.evaluate(
                    "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
                )
                try:
                    page.wait_for_function(STARTED, timeout=30_000)
                    break
                except PlaywrightTimeout:
                    page.wait_for_function(KERNEL_READY, timeout=60_000)
            verdict = page.locator(
                ".jp-OutputArea-output h3", has_text="Milestone 07: PASS (30/30 gate cases)"
            )
            verdict.wait_for(timeout=180_000)

            figures = page.locator(".jp-OutputArea-output img")
            assert figures.count() >= 6  # tiles, 2 x im2col, heatmap, throughput, roofline
            tiles = page.locator(".widget-select-multiple select").first
            heatmap = page.locator(".widget-output img").first
            heatmap.wait_for(timeout=30_000)
            tiles.scroll_into_view_if_needed()
            before = heatmap.get_attribute("src")
            page.screenshot(path=str(ARTIFACTS / "browser_heatmap_defaults.png"))

            tiles.select_option(["5", "8", "32"])
            page.locator(".widget-html", has_text="tiles [5, 8, 32]").wait_for(timeout=60_000)
            page.wait_for_function(
                "before => { const i = document.querySelector('.widget-output img');"
                " return i && i.getAttribute('src') !== before; }",
                arg=before,
                timeout=60_000,
            )
            assert page.locator(".widget-output img").count() == 1
            page.locator(".widget-output img").first.scroll_into_view_if_needed()
            shot = ARTIFACTS / "browser_heatmap_changed.png"
            page.screenshot(path=str(shot))
            print(f"screenshots: {ARTIFACTS / 'browser_heatmap_defaults.png'}, {shot}")
        except Exception:
            page.screenshot(path=str(ARTIFACTS / "browser_failure.png"))
            print(f"failure screenshot: {ARTIFACTS / 'browser_failure.png'}")
            raise
        finally:
            browser.close()
