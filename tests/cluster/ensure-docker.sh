#!/usr/bin/env bash
# Make this machine able to run the sshd test cluster, with no container registry:
#   1. docker.io, docker-compose and debootstrap from Debian's packages (if missing);
#   2. dockerd started in the background (if not answering);
#   3. the base image built with debootstrap + `docker import` (if missing);
#   4. the node image (tests/cluster/Dockerfile) built on top of it (if missing or stale).
# Idempotent: a second run on a ready machine only checks and returns.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BASE_IMAGE="${PROVISION_BASE_IMAGE:-provision-base:bookworm}"
NODE_IMAGE="${PROVISION_NODE_IMAGE:-provision-node:test}"
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
log() { echo "[ensure-docker] $*" >&2; }

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v docker-compose >/dev/null || need+=(docker-compose)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]} from Debian's packages"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  nohup dockerd >/var/log/provision-dockerd.log 2>&1 &
  for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/provision-dockerd.log"; exit 1; }
fi

if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  log "building $BASE_IMAGE with debootstrap (no registry pull)"
  rootfs="$(mktemp -d /tmp/provision-rootfs.XXXXXX)"
  trap 'rm -rf "$rootfs"' EXIT
  # The packages the node image needs come in here too: one download, no apt-get in the Dockerfile.
  debootstrap --variant=minbase \
    --include=openssh-server,openssh-client,numactl,openmpi-bin,python3,sudo,iproute2,procps,hwloc-nox \
    "$SUITE" "$rootfs" "$MIRROR" >/tmp/provision-debootstrap.log 2>&1 \
    || { log "debootstrap failed; see /tmp/provision-debootstrap.log"; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import - "$BASE_IMAGE" >/dev/null
fi

# Rebuild the node image when its inputs change (content hash as a label).
sum="$(cat "$here/Dockerfile" "$here/entrypoint.sh" | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{index .Config.Labels "provision.inputs"}}' "$NODE_IMAGE" 2>/dev/null || true)"
if [ "$have" != "$sum" ]; then
  log "building $NODE_IMAGE"
  docker build -q --label "provision.inputs=$sum" --build-arg "BASE=$BASE_IMAGE" -t "$NODE_IMAGE" "$here" >/dev/null
fi
log "ready: $NODE_IMAGE"
