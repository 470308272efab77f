#!/usr/bin/env bash
# Build the systemd node image (tests/cluster/systemd/Dockerfile, tag provision-systemd:test) on
# top of the node image, when it is missing or its inputs changed (content hash as a label, as
# ensure-roles-image.sh does). Its nodes run systemd as PID 1 and sshd as a unit; see
# tests/cluster/systemd/compose.yml for the flags they need (no --privileged).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
NODE_IMAGE="${PROVISION_NODE_IMAGE:-provision-node:test}"
SYSTEMD_IMAGE="${PROVISION_SYSTEMD_IMAGE:-provision-systemd:test}"
bash "$here/ensure-docker.sh" bookworm
node_id="$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE")"
sum="$( (cat "$here/systemd/Dockerfile" "$here/systemd/provision-test-node.sh" "$here/systemd/provision-test-node.service"; echo "$node_id") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{index .Config.Labels "provision.systemd-inputs"}}' "$SYSTEMD_IMAGE" 2>/dev/null || true)"
if [ "$have" != "$sum" ]; then
  echo "[ensure-systemd-image] building $SYSTEMD_IMAGE" >&2
  docker build -q --label "provision.systemd-inputs=$sum" --build-arg "BASE=$NODE_IMAGE" -t "$SYSTEMD_IMAGE" "$here/systemd" >/dev/null
fi
echo "[ensure-systemd-image] ready: $SYSTEMD_IMAGE" >&2
