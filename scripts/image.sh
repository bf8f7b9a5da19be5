#!/usr/bin/env bash
# Build the server image from the Dockerfile with Debian's podman, on a Debian base made
# here, so no container registry is needed (docs/deploy.md, "Container image").
#
#   bash scripts/image.sh [build] [NAME]   make the base if missing, build NAME
#                                          (default localhost/svc-server:latest), print NAME
#   bash scripts/image.sh podman ARGS...   `podman ARGS...` with this machine's settings, e.g.
#                                          `podman run --rm --network host -e ... NAME`
#
# BASE=python:3.11-slim builds on the upstream base instead (needs a registry). As root it
# installs what it lacks from Debian's packages. The base's root file system is kept in
# .cache/image/ and the base and layers in podman's store, so only the first build is slow.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=.cache/image
local_base=localhost/svc-base:bookworm-python3-venv
mkdir -p "$cache"

install_tools() {
  local need=()
  command -v podman >/dev/null || need+=(podman)
  command -v runc >/dev/null || need+=(runc)
  command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
  [ ${#need[@]} -eq 0 ] && return
  if [ "$(id -u)" -ne 0 ]; then
    echo "image.sh: missing ${need[*]}; run as root (or install them) first" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# podman's defaults fail here in two ways (docs/deploy.md): crun refuses a hybrid cgroup
# hierarchy whose v2 part has a controller, and the default ulimits exceed our hard limits
# (no CAP_SYS_RESOURCE). runc runs, and ulimits within our own hard limits are allowed;
# podman lowers its own RLIMIT_NPROC to 32768, so a container's cannot be higher.
write_containers_conf() {
  local nofile nproc
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [ "$nofile" = unlimited ] && nofile=1048576
  if [ "$nproc" = unlimited ] || [ "$nproc" -gt 32768 ]; then nproc=32768; fi
  cat >"$cache/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]

[engine]
runtime = "runc"
EOF
  export CONTAINERS_CONF="$PWD/$cache/containers.conf"
}

# Debian bookworm's python3 is 3.11, the version python:3.11-slim carries. mmdebstrap (apt,
# one download) took 60 s here where debootstrap took 141 s; its temporary tree goes to
# memory when there is room, as deleting it from this disk alone took 31 s.
make_base() {
  podman image exists "$local_base" && return
  local tar="$cache/base-bookworm-python3-venv.tar"
  if [ ! -s "$tar" ]; then
    local tmp=${TMPDIR:-/tmp}
    if [ "$(df --output=avail -k /dev/shm 2>/dev/null | tail -1)" -gt 1048576 ] 2>/dev/null; then
      tmp=/dev/shm
    fi
    TMPDIR=$tmp mmdebstrap --quiet --variant=minbase --include=python3-venv \
      --dpkgopt=force-unsafe-io --format=tar bookworm "$tar.part"
    mv "$tar.part" "$tar"
  fi
  podman import --quiet --change 'ENV LANG=C.UTF-8' "$tar" "$local_base" >/dev/null
}

build() {
  local name=${1:-localhost/svc-server:latest} base=${BASE:-}
  if [ -z "$base" ]; then
    make_base
    base=$local_base
  fi
  # pip inside the build trusts what this machine trusts: where outbound HTTPS passes an
  # intercepting proxy, pip's own certificate bundle refuses PyPI. Mounted for the build
  # only; nothing of it is in the image.
  local mounts=() host_ca=/etc/ssl/certs/ca-certificates.crt
  if [ -f "$host_ca" ]; then
    printf '[global]\ncert = /run/svc-build/ca.crt\n' >"$cache/pip.conf"
    mounts=(-v "$host_ca:/run/svc-build/ca.crt:ro" -v "$PWD/$cache/pip.conf:/etc/pip.conf:ro")
  fi
  local previous
  previous=$(podman image inspect --format '{{.Id}}' "$name" 2>/dev/null || true)
  # docker format keeps the HEALTHCHECK (the OCI format has none); the host network
  # reaches PyPI without podman setting up a bridge.
  podman build --quiet --format docker --network host "${mounts[@]}" \
    --build-arg BASE="$base" --tag "$name" . >/dev/null
  local current
  current=$(podman image inspect --format '{{.Id}}' "$name")
  if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
    podman rmi "$previous" >/dev/null 2>&1 || true  # still used by a container: keep it
  fi
  echo "$name"
}

install_tools
write_containers_conf
case "${1:-build}" in
  build) shift $(( $# > 0 ? 1 : 0 )); build "$@" ;;
  podman) shift; exec podman "$@" ;;
  *) build "$1" ;;
esac
