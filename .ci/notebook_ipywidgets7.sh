#!/usr/bin/env bash
# The milestone notebook, executed headless under ipywidgets 7.7 (what Colab ships), in its own
# virtual environment with a regular (non-editable) install and a cold native-kernel cache.
# Fails unless `tito grade` passes and the heatmap widget rendered into the saved widget state.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/tinytorch-ipywidgets7.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
OUT="$REPO/artifacts/ipywidgets7"
mkdir -p "$OUT"

"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install -q --disable-pip-version-check "ipywidgets==7.7.*" "$REPO"
"$WORK/venv/bin/python" - <<'PY'
import ipywidgets
assert ipywidgets.__version__.startswith("7.7"), ipywidgets.__version__
print("ipywidgets", ipywidgets.__version__)
PY

cd "$WORK"  # import the installed package, not the checkout
start=$(date +%s)
# --practice: the notebook grades the bundled reference, which grading mode rightly refuses to pass
TINYTORCH_CACHE_DIR="$WORK/cache" "$WORK/venv/bin/tito" grade "$REPO/notebooks/07_custom_kernels.ipynb" \
    --practice --report "$OUT/report.json" --executed "$OUT/executed.ipynb" --timeout 300
echo "graded under ipywidgets 7.7 in $(( $(date +%s) - start )) s"

"$WORK/venv/bin/python" - "$OUT/executed.ipynb" <<'PY'
import json
import sys

import nbformat

nb = nbformat.read(sys.argv[1], as_version=4)
state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
outputs = [m for m in state.values() if m["model_name"] == "OutputModel"]
assert outputs, "no Output widget in the saved widget state"
assert any("image/png" in o.get("data", {}) for m in outputs for o in m["state"].get("outputs", [])), (
    "the heatmap did not render into the Output widget under ipywidgets 7.7"
)
print("heatmap rendered into the saved widget state:", json.dumps(sorted({m["model_module_version"] for m in state.values()})))
PY
