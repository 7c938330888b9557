#!/usr/bin/env bash
# Installs the plotting dependency of tools/plots/plot_bench.py, tools/plots/plot_multiturn.py and `make plots`:
# matplotlib, pinned, from PyPI. Kept out of scripts/setup.sh: no test needs it (CI stays lean).
set -euo pipefail
PIN="matplotlib==3.11.2"
if python3 -c 'import matplotlib, sys; sys.exit(matplotlib.__version__ != "3.11.2")' 2>/dev/null; then exit 0; fi
echo "[setup-plots] pip install $PIN"
python3 -m pip install -q "$PIN" || python3 -m pip install -q --break-system-packages "$PIN"
