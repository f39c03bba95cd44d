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

# Each step says what it does and how long it took.
step_started=0
step() { step_started=$SECONDS; echo "[setup] $*"; }
step_done() { echo "[setup]   done in $((SECONDS - step_started)) s"; }

missing=()
command -v rsync >/dev/null || missing+=(rsync)
command -v ssh >/dev/null || missing+=(openssh-client)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    step "installing Debian packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    step_done
fi

python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    step "creating the virtual environment .venv"
    "$python" -m venv .venv
    step_done
fi
# An editable install follows the checkout's code by itself: pip runs again only when
# what it read (pyproject.toml, the extras asked) has changed since it last succeeded.
stamp=".venv/.gpubench-installed"
wanted="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && .venv/bin/python -c "import gpubench" 2>/dev/null; then
    echo "[setup] .venv already holds this checkout with its extras ($extras)"
    exit 0
fi
rm -f "$stamp"
# pip's own lines, less its chatter: the packages gpubench names (not theirs), then
# what it installs. No byte-compiling of every installed module (torch, sympy, pandas:
# about 25 s of CPU on 2 cores); Python compiles the few that are imported, once, on
# first use.
step "installing this checkout with its extras ($extras) into .venv (torch is a large wheel: most of this step)"
set +e  # the filters find nothing to print at times; pip's own status is what counts
.venv/bin/python -m pip install --no-compile --progress-bar off --disable-pip-version-check \
    -e ".[$extras]" 2>&1 \
    | grep --line-buffered -E "^(Collecting|Processing|Installing collected|Successfully installed)|[Ee][Rr][Rr][Oo][Rr]" \
    | grep --line-buffered -v -e "->" \
    | sed -u -e 's/^/[setup]   /' -e 's/^\(.\{160\}\).*/\1 .../'
pip_status=${PIPESTATUS[0]}
set -e
[ "$pip_status" = 0 ] || { echo "[setup] pip could not install this checkout (exit $pip_status); its error is above" >&2; exit 1; }
step_done
.venv/bin/python -c "import gpubench" || { echo "gpubench did not install" >&2; exit 1; }
echo "$wanted" > "$stamp"
