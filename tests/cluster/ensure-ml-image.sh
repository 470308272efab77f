#!/usr/bin/env bash
# Build the Horovod/DeepSpeed test image (tests/cluster/ml/Dockerfile) on top of the node image,
# when it is missing or its inputs changed (content hash as a label, as ensure-docker.sh does).
# PyTorch's CPU wheel comes through the host's pip (`pip download torch==2.13.0`: where a local
# copy lies among pip's find-links it is taken, else PyPI's); pip inside the build needs the
# host's CA bundle. Both go into a temporary build context.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
NODE_IMAGE="${PROVISION_NODE_IMAGE:-provision-node:test}"
ML_IMAGE="${PROVISION_ML_IMAGE:-provision-ml:test}"
TORCH="${PROVISION_ML_TORCH:-torch==2.13.0}"
bash "$here/ensure-docker.sh" bookworm
node_id="$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE")"
sum="$( (cat "$here/ml/Dockerfile"; echo "$node_id $TORCH") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{index .Config.Labels "provision.ml-inputs"}}' "$ML_IMAGE" 2>/dev/null || true)"
if [ "$have" != "$sum" ]; then
  echo "[ensure-ml-image] building $ML_IMAGE (PyTorch, Horovod, DeepSpeed: a few minutes)" >&2
  ctx="$(mktemp -d /tmp/provision-ml-ctx.XXXXXX)"
  trap 'rm -rf "$ctx"' EXIT
  cp "$here/ml/Dockerfile" "$ctx/"
  cp /etc/ssl/certs/ca-certificates.crt "$ctx/"
  python3 -m pip download -q --no-deps --only-binary :all: --python-version 3.11 --platform "manylinux_2_28_$(uname -m)" \
    -d "$ctx/wheels" "$TORCH"
  docker build -q --label "provision.ml-inputs=$sum" --build-arg "BASE=$NODE_IMAGE" -t "$ML_IMAGE" "$ctx" >/dev/null
fi
echo "[ensure-ml-image] ready: $ML_IMAGE" >&2
