#!/usr/bin/env bash
# Build the fresh-node test image (tests/cluster/fresh/Dockerfile, tag provision-fresh:test) on top
# of the node image, when it is missing or its inputs changed (content hash as a label).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
NODE_IMAGE="${PROVISION_NODE_IMAGE:-provision-node:test}"
FRESH_IMAGE="${PROVISION_FRESH_IMAGE:-provision-fresh:test}"
bash "$here/ensure-docker.sh" bookworm
node_id="$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE")"
sum="$( (cat "$here/fresh/Dockerfile"; echo "$node_id") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{index .Config.Labels "provision.fresh-inputs"}}' "$FRESH_IMAGE" 2>/dev/null || true)"
if [ "$have" != "$sum" ]; then
  echo "[ensure-fresh-image] building $FRESH_IMAGE" >&2
  docker build -q --label "provision.fresh-inputs=$sum" --build-arg "BASE=$NODE_IMAGE" -t "$FRESH_IMAGE" "$here/fresh" >/dev/null
fi
echo "[ensure-fresh-image] ready: $FRESH_IMAGE" >&2
