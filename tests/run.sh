#!/usr/bin/env bash
# The README's test command. On a fresh Debian/Ubuntu machine (as root):
#   1. the system tools the Docker cluster tests need, from Debian's packages (if missing);
#   2. provision's wheel, built from this checkout;
#   3. a FRESH virtualenv (no system site-packages) with the wheel installed as a user installs it,
#      WITH its dependencies (never --no-deps), plus the test and docs extras;
#   4. ruff (lint and format check), the documentation site (`mkdocs build --strict` into
#      build/site: its reference pages are generated from the installed package by
#      docs/hooks/reference.py), then pytest from that venv, against the installed package:
#      the venv's bin/ comes first on PATH (the CLI tests run its `provision`), and pytest is started
#      as .venv/bin/pytest, not `python -m pytest`, so the checkout's provision/ is not on sys.path
#      (tests/test_install.py checks this through PROVISION_TEST_VENV).
# Arguments go to pytest (.ci/run passes -q). The exit status is pytest's (5, "no tests ran", fails
# too), else ruff's, else mkdocs': all three always run, so one failure does not hide another.
# The pytest session itself starts dockerd and builds the node image (tests/cluster/ensure-docker.sh).
#
# Tiers: with no option, both. `tests/run.sh --unit` runs the unit tier alone (pytest -m 'not cluster':
# no Docker, the CLI run in process, a couple of minutes); `tests/run.sh --cluster` the cluster tier
# alone (-m cluster: real sshd containers). The same tiers without the wheel venv, from a checkout:
#   .venv/bin/pytest -m 'not cluster'      .venv/bin/pytest -m cluster tests/test_probe_cluster.py
set -euo pipefail
cd "$(dirname "$0")/.."

tier=()
case "${1:-}" in
  --unit) tier=(-m "not cluster"); shift ;;
  --cluster) tier=(-m cluster); shift ;;
esac

need=()
docker_tools="dockerd:docker.io docker-compose:docker-compose debootstrap:debootstrap"
if [ "${tier[*]:-}" = "-m not cluster" ]; then docker_tools=""; fi  # the unit tier starts no container
for tool in $docker_tools ssh:openssh-client; do
  command -v "${tool%%:*}" >/dev/null || need+=("${tool##*:}")
done
# Debian and Ubuntu ship `python3 -m venv` (ensurepip) in a separate package.
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

work="$PWD/build/test-run"
venv="$work/venv"
rm -rf "$work"
python3 -m venv "$venv"
"$venv/bin/python" -m pip wheel -q --no-deps -w "$work/dist" .
wheel="$(echo "$work"/dist/provision-*.whl)"
"$venv/bin/python" -m pip install -q "$wheel[test,docs]"

export PROVISION_TEST_VENV="$venv" PROVISION_TEST_WHEEL="$wheel" PATH="$venv/bin:$PATH"
unset PYTHONPATH

lint=0
"$venv/bin/ruff" check . || lint=$?
"$venv/bin/ruff" format --check . || lint=$?
docs=0
NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --strict --quiet || docs=$?
tests=0
"$venv/bin/pytest" ${tier[@]+"${tier[@]}"} "$@" || tests=$?
if [ "$lint" -ne 0 ]; then echo "tests/run.sh: ruff found problems (see above)" >&2; fi
if [ "$docs" -ne 0 ]; then echo "tests/run.sh: mkdocs build --strict failed (see above)" >&2; fi
if [ "$tests" -ne 0 ]; then exit "$tests"; fi
if [ "$lint" -ne 0 ]; then exit "$lint"; fi
exit "$docs"
