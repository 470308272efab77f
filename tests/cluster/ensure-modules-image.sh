#!/usr/bin/env bash
# Build the environment-modules test images (tests/cluster/modules/Dockerfile): one per real
# implementation of `module`, tags provision-modules:environment-modules and provision-modules:lmod,
# on top of the node image, when missing or their inputs changed (content hash as a label).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
NODE_IMAGE="${PROVISION_NODE_IMAGE:-provision-node:test}"
bash "$here/ensure-docker.sh" bookworm
node_id="$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE")"
for modules in environment-modules lmod; do
  image="provision-modules:$modules"
  sum="$( (cat "$here/modules/Dockerfile"; echo "$node_id $modules") | sha256sum | cut -c1-16)"
  have="$(docker image inspect -f '{{index .Config.Labels "provision.modules-inputs"}}' "$image" 2>/dev/null || true)"
  if [ "$have" != "$sum" ]; then
    echo "[ensure-modules-image] building $image" >&2
    docker build -q --label "provision.modules-inputs=$sum" --build-arg "BASE=$NODE_IMAGE" --build-arg "MODULES=$modules" \
      -t "$image" "$here/modules" >/dev/null
  fi
  echo "[ensure-modules-image] ready: $image" >&2
done
