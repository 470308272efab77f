#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine (as root), then run it.
# The pytest session itself starts dockerd and builds the node image (tests/cluster/ensure-docker.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for tool in dockerd:docker.io docker-compose:docker-compose debootstrap:debootstrap ssh:openssh-client; do
  command -v "${tool%%:*}" >/dev/null || need+=("${tool##*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
python3 -m pip install -q -e '.[test]'
exec python3 -m pytest "$@"
