#!/usr/bin/env bash
# Make this machine able to run the sshd test cluster, with no container registry:
#   1. docker.io, docker-compose and debootstrap from Debian's packages (if missing);
#   2. dockerd started in the background (if not answering);
#   3. per Debian suite, a base image built with debootstrap + `docker import` (if missing):
#      bookworm (OpenMPI 4.1) and trixie (OpenMPI 5.0);
#   4. per suite, the node image (tests/cluster/Dockerfile, BASE=that base) built on top of it
#      (if missing or stale).
# Idempotent: a second run on a ready machine only checks and returns.
# Usage: ensure-docker.sh [SUITE...]   (default: bookworm trixie)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# The packages the node images need come in with debootstrap: one download, no apt-get in the Dockerfile.
PACKAGES=openssh-server,openssh-client,numactl,openmpi-bin,python3,sudo,iproute2,procps,hwloc-nox
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

# build_suite SUITE BASE_IMAGE NODE_IMAGE
build_suite() {
  local suite="$1" base="$2" node="$3"
  if ! docker image inspect "$base" >/dev/null 2>&1; then
    log "building $base with debootstrap $suite (no registry pull)"
    local rootfs
    rootfs="$(mktemp -d "/tmp/provision-rootfs-$suite.XXXXXX")"
    debootstrap --variant=minbase --include="$PACKAGES" "$suite" "$rootfs" "$MIRROR" \
      >"/tmp/provision-debootstrap-$suite.log" 2>&1 \
      || { rm -rf "$rootfs"; log "debootstrap $suite failed; see /tmp/provision-debootstrap-$suite.log"; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
    rm -rf "$rootfs"
  fi
  # Rebuild the node image when its inputs change (content hash as a label).
  local sum have
  sum="$(cat "$here/Dockerfile" "$here/entrypoint.sh" | sha256sum | cut -c1-16)"
  have="$(docker image inspect -f '{{index .Config.Labels "provision.inputs"}}' "$node" 2>/dev/null || true)"
  if [ "$have" != "$sum" ]; then
    log "building $node from $base"
    docker build -q --label "provision.inputs=$sum" --build-arg "BASE=$base" -t "$node" "$here" >/dev/null
  fi
  log "ready: $node ($suite)"
}

suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(bookworm trixie)
for suite in "${suites[@]}"; do
  case "$suite" in
    bookworm) build_suite bookworm "${PROVISION_BASE_IMAGE:-provision-base:bookworm}" "${PROVISION_NODE_IMAGE:-provision-node:test}" ;;
    trixie) build_suite trixie "${PROVISION_BASE5_IMAGE:-provision-base:trixie}" "${PROVISION_NODE5_IMAGE:-provision-node5:test}" ;;
    *) log "unknown suite $suite: bookworm or trixie"; exit 2 ;;
  esac
done
