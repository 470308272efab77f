#!/usr/bin/env bash
# Build doctor --perf's test image (tests/cluster/perf/Dockerfile: iperf3 and tc) on top of the
# node image, when it is missing or its inputs changed (content hash as a label, as
# ensure-roles-image.sh does). The node image itself is never changed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
NODE_IMAGE="${PROVISION_NODE_IMAGE:-provision-node:test}"
PERF_IMAGE="${PROVISION_PERF_IMAGE:-provision-perf:test}"
bash "$here/ensure-docker.sh"
node_id="$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE")"
sum="$( (cat "$here/perf/Dockerfile"; echo "$node_id") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{index .Config.Labels "provision.perf-inputs"}}' "$PERF_IMAGE" 2>/dev/null || true)"
if [ "$have" != "$sum" ]; then
  echo "[ensure-perf-image] building $PERF_IMAGE" >&2
  ctx="$(mktemp -d /tmp/provision-perf-ctx.XXXXXX)"
  trap 'rm -rf "$ctx"' EXIT
  cp "$here/perf/Dockerfile" "$ctx/"
  docker build -q --label "provision.perf-inputs=$sum" --build-arg "BASE=$NODE_IMAGE" -t "$PERF_IMAGE" "$ctx" >/dev/null
fi
echo "[ensure-perf-image] ready: $PERF_IMAGE" >&2
