#!/usr/bin/env bash
# Builds the image with podman and runs scripts/deploy/test_image.py against it: TGI's deployment
# guide verbatim, offline restart, non-root, memory limit, `podman kube play` (issue 18).
# `make test` runs this only with IMAGE_TESTS=1 and podman installed; results (image size,
# time to ready, memory) go to bench/results/issue18_image.json.
#
# Environment: BASE_IMAGE (default: a Debian bookworm base made here with debootstrap and
# `podman import`, since no registry is reachable from these machines; set it to
# debian:bookworm-slim where one is), LM_IMAGE (tag, default localhost/lm-infer:latest),
# LM_OCI_RUNTIME (default runc: crun fails inside this sandbox).
set -euo pipefail
cd "$(dirname "$0")/../.."

IMAGE=${LM_IMAGE:-localhost/lm-infer:latest}
RUNTIME=${LM_OCI_RUNTIME:-runc}
BASE=${BASE_IMAGE:-localhost/lm-infer-base:bookworm}
export LM_IMAGE=$IMAGE LM_OCI_RUNTIME=$RUNTIME

for tool in podman "$RUNTIME"; do
  command -v "$tool" >/dev/null || { echo "test_image: $tool not found (apt-get install podman runc debootstrap)" >&2; exit 1; }
done

if [[ $BASE == localhost/lm-infer-base:* ]] && ! podman image exists "$BASE"; then
  command -v debootstrap >/dev/null || { echo "test_image: debootstrap not found" >&2; exit 1; }
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  echo "test_image: debootstrap bookworm (minbase) for $BASE"
  debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >/dev/null
  # Slim as debian:bookworm-slim is: no documentation, manuals or translations now or from later
  # installs (dpkg path excludes), no apt caches.
  cat > "$rootfs/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
CFG
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$rootfs"/usr/share/{man,info,locale,groff,lintian,linda}/* \
    "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/log/*.log
  # With the PATH a registry's Debian image declares (an imported tarball declares none).
  tar -C "$rootfs" -c . |
    podman import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' - "$BASE" >/dev/null
fi

# The host's CA bundle is mounted for the build's PyPI download (this machine's HTTPS goes through a
# proxy with its own CA), never copied into the image; apt uses plain HTTP with signed indexes.
echo "test_image: building $IMAGE on $BASE"
build_started=$(date +%s)
podman --runtime "$RUNTIME" build --ulimit nofile=4096:4096 --ulimit nproc=4096:4096 \
  -v /etc/ssl/certs/ca-certificates.crt:/run/build-ca.crt:ro --build-arg BUILD_CA_BUNDLE=/run/build-ca.crt \
  --build-arg BASE_IMAGE="$BASE" -t "$IMAGE" .
echo "test_image: image built in $(( $(date +%s) - build_started )) s"

make -s fixtures-test
.venv/bin/python -m pytest -q -p no:cacheprovider scripts/deploy/test_image.py "$@"
