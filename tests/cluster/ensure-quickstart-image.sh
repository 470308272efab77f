#!/usr/bin/env bash
# Build the quick-start node image (tests/cluster/quickstart/Dockerfile, tag provision-quickstart:test)
# on top of the systemd node image, when missing or its inputs changed (content hash as a label).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
SYSTEMD_IMAGE="${PROVISION_SYSTEMD_IMAGE:-provision-systemd:test}"
IMAGE="${PROVISION_QUICKSTART_IMAGE:-provision-quickstart:test}"
bash "$here/ensure-systemd-image.sh"
base_id="$(docker image inspect -f '{{.Id}}' "$SYSTEMD_IMAGE")"
sum="$( (cat "$here/quickstart/Dockerfile"; echo "$base_id") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{index .Config.Labels "provision.quickstart-inputs"}}' "$IMAGE" 2>/dev/null || true)"
if [ "$have" != "$sum" ]; then
  echo "[ensure-quickstart-image] building $IMAGE" >&2
  docker build -q --label "provision.quickstart-inputs=$sum" --build-arg "BASE=$SYSTEMD_IMAGE" -t "$IMAGE" "$here/quickstart" >/dev/null
fi
echo "[ensure-quickstart-image] ready: $IMAGE" >&2
