#!/usr/bin/env bash
# Set up everything gpubench needs on a fresh Debian/Ubuntu machine: the Debian
# packages its remote runs use (rsync, ssh, sshd), a virtual environment in .venv,
# gpubench itself (the distribution gpubench-ddp, from this checkout), matplotlib for
# `report --html` and `--plot`, and the CPU build of PyTorch for local runs.
# Usage: scripts/setup.sh [EXTRAS]   e.g. scripts/setup.sh local,test
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-local}"
case ",$extras," in *,plots,*) ;; *) extras="$extras,plots" ;; esac  # the report's page and figures

missing=()
command -v rsync >/dev/null || missing+=(rsync)
command -v ssh >/dev/null || missing+=(openssh-client)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    echo "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]" 2>&1 \
    | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import gpubench" || { echo "gpubench did not install" >&2; exit 1; }
