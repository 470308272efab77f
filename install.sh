#!/bin/sh
# provision's installer (README command 1): a virtualenv in ./.venv (never the system Python),
# provision installed into it with its dependencies, then the main job on this machine
# (`provision probe localhost`). Works on a fresh Debian 12 or Ubuntu 24.04, as root or as a
# user with sudo: their python3 has no `venv`/ensurepip until python3-venv is installed, so this
# installs it (and python3 itself where missing) with apt-get, through sudo when not root.
# Usage: sh install.sh [PROBE ARGS...]     (PROVISION_VENV=DIR to put the venv elsewhere)
set -eu
cd "$(dirname "$0")"
venv="${PROVISION_VENV:-.venv}"
say() { echo "install.sh: $*" >&2; }

has_venv() { command -v python3 >/dev/null 2>&1 && python3 -c 'import ensurepip, venv' >/dev/null 2>&1; }

if ! has_venv; then
  command -v apt-get >/dev/null 2>&1 \
    || { say "python3 with its venv module is missing; install it with your package manager (e.g. dnf install python3)"; exit 1; }
  if [ "$(id -u)" -eq 0 ]; then
    as_root=""
  elif command -v sudo >/dev/null 2>&1; then
    as_root="sudo"
  else
    say "python3-venv is missing and this user is not root and has no sudo: ask an administrator to run 'apt-get install python3-venv'"
    exit 1
  fi
  packages="python3-venv"
  command -v python3 >/dev/null 2>&1 || packages="python3 python3-venv"
  say "installing $packages with apt-get (python3 -m venv needs ensurepip)"
  apt_get() { $as_root env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }
  # A fresh machine's apt lists may be empty or stale: refresh them when the install cannot start.
  # shellcheck disable=SC2086 # the package list is two fixed words
  apt_get install -y -q --no-install-recommends $packages >/dev/null 2>&1 \
    || { apt_get update -q >/dev/null && apt_get install -y -q --no-install-recommends $packages >/dev/null; }
  has_venv || { say "python3 -m venv is still unavailable after installing $packages"; exit 1; }
fi

python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q .
say "installed: $venv/bin/provision (put $venv/bin on PATH, or: . $venv/bin/activate)"
exec "$venv/bin/provision" probe localhost "$@"
