#!/usr/bin/env bash
# Build the roles test image (tests/cluster/roles/Dockerfile) on top of the node image, when it is
# missing or its inputs changed (content hash as a label, as ensure-docker.sh does). pip inside
# the build needs the host's CA bundle (copied into a temporary build context).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
NODE_IMAGE="${PROVISION_NODE_IMAGE:-provision-node:test}"
ROLES_IMAGE="${PROVISION_ROLES_IMAGE:-provision-roles:test}"
bash "$here/ensure-docker.sh"
node_id="$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE")"
sum="$( (cat "$here/roles/Dockerfile"; echo "$node_id") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{index .Config.Labels "provision.roles-inputs"}}' "$ROLES_IMAGE" 2>/dev/null || true)"
if [ "$have" != "$sum" ]; then
  echo "[ensure-roles-image] building $ROLES_IMAGE" >&2
  ctx="$(mktemp -d /tmp/provision-roles-ctx.XXXXXX)"
  trap 'rm -rf "$ctx"' EXIT
  cp "$here/roles/Dockerfile" "$ctx/"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
  docker build -q --label "provision.roles-inputs=$sum" --build-arg "BASE=$NODE_IMAGE" -t "$ROLES_IMAGE" "$ctx" >/dev/null
fi
echo "[ensure-roles-image] ready: $ROLES_IMAGE" >&2
