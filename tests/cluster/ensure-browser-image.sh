#!/usr/bin/env bash
# Build the headless-browser test image (tests/cluster/browser/Dockerfile: Debian's chromium) on
# the debootstrap base image, when it is missing or its inputs changed (content hash as a label,
# as ensure-perf-image.sh does). The base image itself is never changed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BASE_IMAGE="${PROVISION_BASE_IMAGE:-provision-base:bookworm}"
BROWSER_IMAGE="${PROVISION_BROWSER_IMAGE:-provision-browser:test}"
bash "$here/ensure-docker.sh" bookworm
base_id="$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")"
sum="$( (cat "$here/browser/Dockerfile"; echo "$base_id") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{index .Config.Labels "provision.browser-inputs"}}' "$BROWSER_IMAGE" 2>/dev/null || true)"
if [ "$have" != "$sum" ]; then
  echo "[ensure-browser-image] building $BROWSER_IMAGE (Debian's chromium: a few minutes)" >&2
  ctx="$(mktemp -d /tmp/provision-browser-ctx.XXXXXX)"
  trap 'rm -rf "$ctx"' EXIT
  cp "$here/browser/Dockerfile" "$ctx/"
  docker build -q --label "provision.browser-inputs=$sum" --build-arg "BASE=$BASE_IMAGE" -t "$BROWSER_IMAGE" "$ctx" >/dev/null
fi
echo "[ensure-browser-image] ready: $BROWSER_IMAGE" >&2
