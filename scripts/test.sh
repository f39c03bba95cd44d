#!/usr/bin/env bash
# Set up, then run the whole offline test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh local,test,plots
# The report tests open the HTML report in headless Chromium; the dead-link test
# puts an sshd in a network namespace of its own (iproute2's `ip netns`); the Slurm
# tests start a real cluster (munged, slurmctld, two slurmd) from Debian's packages.
test_packages=()
command -v chromium >/dev/null || test_packages+=(chromium)
command -v ip >/dev/null || test_packages+=(iproute2)
[ -x /usr/sbin/slurmctld ] || test_packages+=(slurm-wlm)
[ -x /usr/sbin/munged ] || test_packages+=(munge)
if [ ${#test_packages[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${test_packages[@]}" >/dev/null
fi
# The official vastai CLI is a test peer of the mock cloud. vastai 1.9.1 pins
# cryptography==49 while runpod 1.12 needs >=50, so it goes in without its pins,
# with the few packages its search/show/create/destroy commands import.
if ! .venv/bin/python -c "import vastai" 2>/dev/null; then
    .venv/bin/python -m pip install -q --disable-pip-version-check xdg argcomplete curlify pyparsing python-dateutil 2>&1 | grep -v "^WARNING: Location" || true
    .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps vastai==1.9.1 2>&1 | grep -v "^WARNING: Location" || true
fi
# The bytecode of gpubench, its workloads and the tests, compiled once up front: the
# suite starts hundreds of gpubench and torchrun processes, and where the environment
# sets PYTHONDONTWRITEBYTECODE (as CI machines do) each would compile every module it
# imports again (about 4 CPU-minutes of a fresh clone's run).
.venv/bin/python -m compileall -q -j 0 gpubench workloads providers tests benchmarks >/dev/null
exec .venv/bin/python -m pytest -q "$@"
