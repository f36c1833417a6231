#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-fleet.sh MODULE TOOL STANDIN: part fleet of make test. peermem's
# images run on a GPU node as kubelet runs the DaemonSet's pod (docs/fleet.md):
#   - the node: the Debian 13 disk of scripts/node-image (Debian's 7.3 kernel, systemd,
#     podman with crun), the GPU driver and MOFED installed on it from packages (the
#     doubles' packages of tests/node/double-debs, with the openibd stand-in), no
#     peermem package;
#   - the images: the precompiled one for the node's kernel (scripts/image MODULE TOOL;
#     MODULE is part debian-7.3's drop-in) and the build-on-the-node one (scripts/image
#     --build-on-node), loaded into the node's podman storage; their sizes printed;
#   - the pod: what `kubectl apply -k` applies (deploy/kubernetes with the precompiled
#     image's tag set, and deploy/kubernetes/build-on-node), turned into podman's
#     options by packaging/render-manifests --pod: privileged, the hostPath mounts,
#     the ConfigMap's environment, the memory limit, the command; probes run with
#     podman exec, the stop is the preStop hook and then SIGTERM within the grace
#     period;
#   - the build step of the build-on-the-node image runs here, at native speed, in the
#     image's root with the node's directories mounted as the pod mounts them (this
#     machine's crun cannot run a container: its limits cannot be set here); the node
#     then runs that image, which finds the module built on this node before;
#   - the scenarios, in the booted node (tests/node/checks, boot fleet): start, start
#     before the RDMA core, openibd restart, stop with a live registration, a host with
#     NVIDIA's packaged nvidia-peermem loaded (STANDIN, its stand-in), the
#     build-on-the-node image.
# Needs root, loop devices, QEMU, debootstrap, buildah. Last line: "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")
. "$ROOT/packaging/check-lib.sh"
module=${1:?usage: test-fleet.sh MODULE TOOL STANDIN}
tool=${2:?usage: test-fleet.sh MODULE TOOL STANDIN}
standin=${3:?usage: test-fleet.sh MODULE TOOL STANDIN}
why=
[ "$(id -u)" = 0 ] || why="$why; not root"
for c in qemu-system-x86_64 unshare chroot dpkg-deb debootstrap buildah; do
	command -v $c >/dev/null || why="$why; no $c (scripts/setup)"
done
for f in "$module" "$tool" "$standin"; do [ -f "$f" ] || why="$why; no $f"; done
[ -z "$why" ] || { bad "prerequisites: ${why#; }"; finish; }
out=$ROOT/build/fleet
rm -rf "$out"; mkdir -p "$out"
S=$(mktemp -d "${TMPDIR:-/var/tmp}/peermem-fleet.XXXXXX")
trap 'rm -rf "$S"' EXIT
. "$ROOT/packaging/node-lib.sh"

t0=$SECONDS
if ! img=$("$ROOT/scripts/node-image" 2>"$out/node-image.log"); then
	bad "the node's disk (scripts/node-image)"; tail -n 20 "$out/node-image.log"; finish
fi
read -r abi _ < <("$ROOT/scripts/node-image" --versions)
rel=$(modinfo -F vermagic "$module" | cut -d' ' -f1)
expect "the precompiled module is for the node's kernel" "$rel" "$abi"
mkdir -p "$S/debs"
if ! "$ROOT/tests/node/double-debs" "$S/debs" >"$out/debs.log" 2>&1; then
	bad "the doubles' packages (tests/node/double-debs)"; tail -n 20 "$out/debs.log"; finish
fi
cp --sparse=always "$img" "$S/disk.img"

# ---------------------------------------------------------------- the images
t=$SECONDS
pre=$("$ROOT/scripts/image" "$module" "$tool" "$S/debs/precompiled.tar" 2>"$out/image-precompiled.log")
expect "image: scripts/image (precompiled for $abi) exits 0" "$?" 0
build=$("$ROOT/scripts/image" --build-on-node "$tool" "$S/debs/build.tar" 2>"$out/image-build.log")
expect "image: scripts/image --build-on-node exits 0" "$?" 0
[ -s "$pre" ] && [ -s "$build" ] || { tail -n 15 "$out"/image-*.log; finish; }
echo "fleet: images made in $((SECONDS - t)) s"

# ---------------------------------------------------------------- the pods
bin=$("$ROOT/packaging/manifests-python") ||
	{ bad "prerequisites: the manifests' Python environment (packaging/manifests-python)"; finish; }
# The precompiled image's tag set as an admin sets it (docs/fleet.md).
mkdir -p "$S/k"
cat > "$S/k/kustomization.yaml" <<EOF
resources:
  - $ROOT/deploy/kubernetes
images:
  - name: peermem
    newTag: $VERSION-${abi//+/_}
EOF
"$bin/python3" "$ROOT/packaging/render-manifests" "$S/k" --pod > "$S/debs/precompiled.pod" &&
	"$bin/python3" "$ROOT/packaging/render-manifests" "$ROOT/deploy/kubernetes/build-on-node" --pod > "$S/debs/build.pod"
expect "the pods of deploy/kubernetes and deploy/kubernetes/build-on-node (render-manifests --pod)" "$?" 0
cp "$standin" "$S/debs/nvidia-peermem-standin.ko"

# ---------------------------------------------------------------- the node
# The GPU driver and MOFED from their packages; podman's storage (overlay, as Debian's
# podman defaults to) with both images loaded.
t=$SECONDS
res=$(in_node "set -e
	cd /var/cache/peermem-test
	dpkg -i peermem-test-nvidia-dkms_580.95.05_amd64.deb peermem-test-mofed-dkms_25.07_amd64.deb
	echo '== dkms status'; dkms status
	podman --storage-driver overlay load -q -i precompiled.tar
	podman --storage-driver overlay load -q -i build.tar
	echo '== images'; podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}'
	mkdir -p /usr/local/lib/peermem-node-test
	install -m 644 precompiled.pod build.pod nvidia-peermem-standin.ko /usr/local/lib/peermem-node-test/" 2>&1)
echo "$res" > "$out/node.log"
echo "fleet: the node's packages and images in $((SECONDS - t)) s"
for m in "nvidia/580.95.05" "mlnx-ofed-kernel/25.07"; do
	has "node: dkms built and installed $m for $abi" "$res" "$m, $abi, x86_64: installed"
done
has "node: podman loaded the precompiled image" "$res" "localhost/peermem:$VERSION-${abi//+/_} "
has "node: podman loaded the build-on-the-node image" "$res" "localhost/peermem:$VERSION-build-debian13 "
echo "     sizes: precompiled: archive $(du -h --apparent-size "$pre" | cut -f1), in the node $(sed -n "s|^localhost/peermem:$VERSION-${abi//+/_} ||p" <<<"$res");" \
	"build on the node: archive $(du -h --apparent-size "$build" | cut -f1), in the node $(sed -n "s|^localhost/peermem:$VERSION-build-debian13 ||p" <<<"$res")"

# The build step of the build-on-the-node image: its entrypoint with --build-only, in
# the image's root, the node's directories mounted where the pod mounts them.
t=$SECONDS
b() { buildah --root "$ROOT/build/image/storage/root" --runroot "$ROOT/build/image/storage/run" --storage-driver vfs "$@"; }
ctr=$(b from "localhost/peermem:$VERSION-build-debian13")
broot=$(b mount "$ctr")
res=$(in_node "true" "
	. \$S/debs/build.pod
	set -- \"\${POD_RUN[@]}\"
	while [ \$# -gt 0 ]; do
		if [ \"\$1\" = -v ]; then
			IFS=: read -r hp cp ro <<<\"\$2\"
			mkdir -p \"\$m\$hp\" '$broot'\"\$cp\"
			mount --bind \"\$m\$hp\" '$broot'\"\$cp\"
			[ \"\$ro\" != ro ] || mount -o remount,bind,ro '$broot'\"\$cp\"
			shift
		fi
		shift
	done
	mount -t proc proc '$broot/proc'; mount --rbind /dev '$broot/dev'; mount -t sysfs sys '$broot/sys'
	mount -t tmpfs tmpfs '$broot/tmp'
	chroot '$broot' /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		peermem-build-on-node --build-only --kernel-release $abi 2>&1
	echo \"== build-on-node \$?\"
	umount -R -l '$broot/proc' '$broot/dev' '$broot/sys' '$broot/tmp'
	ls \$m/var/lib/peermem/modules/$abi/" 2>&1)
echo "$res" > "$out/build-on-node.log"
b umount "$ctr" >/dev/null 2>&1; b rm "$ctr" >/dev/null 2>&1
has "build on the node: the image's build step against the node's headers exits 0 ($((SECONDS - t)) s)" "$res" "== build-on-node 0"
has "build on the node: ... it built with dkms for $abi" "$res" "building nvidia-peermem.ko $VERSION for $abi with dkms"
has "build on the node: ... the module kept on the node (/var/lib/peermem)" "$res" "nvidia-peermem.ko"

# ---------------------------------------------------------------- boot
node_checks_unit
node_boot fleet "$abi"
echo "fleet: $((SECONDS - t0)) s"
finish
