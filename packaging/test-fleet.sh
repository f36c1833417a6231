#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-fleet.sh TOOL: part fleet of make test. peermem's images run on a GPU
# node as kubelet runs the DaemonSet's pod (docs/fleet.md):
#   - the node: the Debian 13 disk of scripts/node-image (Debian's 7.3 kernel, systemd,
#     podman with crun), the GPU driver and MOFED installed on it from packages (the
#     doubles' packages of tests/node/double-debs, with the openibd stand-in), no
#     peermem package;
#   - the build-on-the-node image (scripts/image --build-on-node, with TOOL): its build
#     step runs here, at native speed, in the image's root with the node's directories
#     mounted as the pod mounts them (this machine's crun cannot run a container: its
#     limits cannot be set here), and leaves the module on the node;
#   - the precompiled images (scripts/image --registry 127.0.0.1:5000/gpu MODULE
#     TOOL): one for the node's kernel, MODULE being that build's module, as a build
#     pipeline makes precompiled images, and one for another kernel (the test bed's
#     dev kernel's drop-in); scripts/fleet-overlay's overlay of both (one DaemonSet
#     per kernel release), built by kustomize, and where it schedules on this node;
#   - the build-on-the-node image loaded into the node's podman storage; the sizes
#     printed;
#   - the pod: what `kubectl apply -k` applies (that overlay's DaemonSets, and
#     deploy/kubernetes/build-on-node), turned into podman's options by
#     packaging/render-manifests --pod: privileged, the hostPath mounts,
#     the ConfigMap's environment, the memory limit, the command; probes run with
#     podman exec, the stop is the preStop hook and then SIGTERM within the grace
#     period;
#   - the scenarios, in the booted node (tests/node/checks, boot fleet): both
#     precompiled images pushed into a registry on the node's loopback (Debian's
#     docker-registry; skopeo copy, as docs/fleet.md) and pulled by digest, start,
#     start before the RDMA core, openibd restart, stop with a live registration, a
#     host with NVIDIA's packaged nvidia-peermem loaded (its stand-in,
#     tests/fakes/standin, built in the node against the doubles), the
#     build-on-the-node image, the other kernel's image.
# Needs root, loop devices, QEMU, debootstrap, buildah. Last line: "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")
. "$ROOT/packaging/check-lib.sh"
tool=${1:?usage: test-fleet.sh TOOL}
why=
[ "$(id -u)" = 0 ] || why="$why; not root"
for c in qemu-system-x86_64 unshare chroot dpkg-deb debootstrap buildah; do
	command -v $c >/dev/null || why="$why; no $c (scripts/setup)"
done
[ -x "$tool" ] || why="$why; no $tool"
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
mkdir -p "$S/debs"
if ! "$ROOT/tests/node/double-debs" "$S/debs" >"$out/debs.log" 2>&1; then
	bad "the doubles' packages (tests/node/double-debs)"; tail -n 20 "$out/debs.log"; finish
fi
cp --sparse=always "$img" "$S/disk.img"

# ---------------------------------------------------------------- the build image
t=$SECONDS
build=$("$ROOT/scripts/image" --build-on-node "$tool" "$S/debs/build.tar" 2>"$out/image-build.log")
expect "image: scripts/image --build-on-node exits 0 ($((SECONDS - t)) s)" "$?" 0
[ -s "$build" ] || { tail -n 15 "$out/image-build.log"; finish; }

# ---------------------------------------------------------------- the pods
bin=$("$ROOT/packaging/manifests-python") ||
	{ bad "prerequisites: the manifests' Python environment (packaging/manifests-python)"; finish; }
KUSTOMIZE=$("$ROOT/packaging/kustomize") ||
	{ bad "prerequisites: kustomize (packaging/kustomize)"; finish; }
export KUSTOMIZE
render() { "$bin/python3" "$ROOT/packaging/render-manifests" "$@"; }
render "$ROOT/deploy/kubernetes/build-on-node" --pod > "$S/debs/build.pod"
expect "the pod of deploy/kubernetes/build-on-node (kustomize build, render-manifests --pod)" "$?" 0
mkdir -p "$S/debs/standin-src/tests/fakes"
cp -r "$ROOT/tests/fakes/standin" "$S/debs/standin-src/tests/fakes/"
cp -r "$ROOT/include" "$S/debs/standin-src/"
cp "$ROOT/packaging/find-symvers" "$S/debs/standin-src/"

# ---------------------------------------------------------------- the node
# The GPU driver and MOFED from their packages; podman's storage (overlay, as Debian's
# podman defaults to) with both images loaded.
t=$SECONDS
res=$(in_node "set -e
	cd /var/cache/peermem-test
	dpkg -i peermem-test-mofed-dkms_25.07_amd64.deb
	dpkg -i peermem-test-nvidia-dkms_580.95.05_amd64.deb
	echo '== dkms status'; dkms status
	podman --storage-driver overlay load -q -i build.tar
	mkdir -p /usr/local/lib/peermem-node-test
	install -m 644 build.pod /usr/local/lib/peermem-node-test/
	# NVIDIA's packaged nvidia-peermem: the stand-in, built against the doubles.
	cp -r standin-src /tmp/standin-src
	make -s -C /usr/src/linux-headers-$abi M=/tmp/standin-src/tests/fakes/standin \
		KBUILD_EXTRA_SYMBOLS=\"\$(/tmp/standin-src/find-symvers $abi /usr/src/linux-headers-$abi)\" modules
	install -m 644 /tmp/standin-src/tests/fakes/standin/nvidia-peermem.ko /usr/local/lib/peermem-node-test/nvidia-peermem-standin.ko
	echo '== standin built'" 2>&1)
echo "$res" > "$out/node.log"
echo "fleet: the node's packages and images in $((SECONDS - t)) s"
for m in "nvidia/580.95.05" "mlnx-ofed-kernel/25.07"; do
	has "node: dkms built and installed $m for $abi" "$res" "$m, $abi, x86_64: installed"
done
has "node: NVIDIA's packaged nvidia-peermem (the stand-in) built against the doubles" "$res" "== standin built"

# The build step of the build-on-the-node image: its entrypoint with --build-only, in
# the image's root, the node's directories mounted where the pod mounts them.
t=$SECONDS
b() { "$ROOT/scripts/image" --buildah "$@"; }
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
	ls \$m/var/lib/peermem/modules/$abi/
	cp \$m/var/lib/peermem/modules/$abi/nvidia-peermem.ko \$S/nvidia-peermem.ko" 2>&1)
echo "$res" > "$out/build-on-node.log"
b umount "$ctr" >/dev/null 2>&1; b rm "$ctr" >/dev/null 2>&1
has "build on the node: the image's build step against the node's headers exits 0 ($((SECONDS - t)) s)" "$res" "== build-on-node 0"
has "build on the node: ... it built with dkms for $abi" "$res" "building nvidia-peermem.ko $VERSION for $abi with dkms"
has "build on the node: ... the module kept on the node (/var/lib/peermem)" "$res" "nvidia-peermem.ko"
expect "build on the node: ... the drop-in, for $abi" \
	"$(modinfo -F name "$S/nvidia-peermem.ko" 2>&1) $(modinfo -F vermagic "$S/nvidia-peermem.ko" 2>&1 | cut -d' ' -f1)" "nvidia_peermem $abi"

# ---------------------------------------------------------------- the precompiled images
# For the node's kernel, from the module that build made (as a pipeline builds the
# precompiled images of a fleet's kernel releases), and for another kernel (the test
# bed's dev kernel's drop-in), both named for a registry on the node's loopback
# (make image REGISTRY=), where the booted node's checks push them (skopeo copy, as
# docs/fleet.md) and pull them back by digest; scripts/fleet-overlay makes the overlay
# of both, one DaemonSet per kernel release, and kustomize builds it.
REG=127.0.0.1:5000/gpu
t=$SECONDS
pre=$("$ROOT/scripts/image" --registry "$REG" "$S/nvidia-peermem.ko" "$tool" "$S/debs/precompiled.tar" 2>"$out/image-precompiled.log")
expect "image: scripts/image --registry $REG (precompiled for $abi) exits 0 ($((SECONDS - t)) s)" "$?" 0
[ -s "$pre" ] || { tail -n 15 "$out/image-precompiled.log"; finish; }
devrel=$(modinfo -F vermagic "$ROOT/build/stage/nvidia-peermem.ko" | cut -d' ' -f1)
oth=$("$ROOT/scripts/image" --registry "$REG" "$ROOT/build/stage/nvidia-peermem.ko" "$tool" "$S/debs/other-kernel.tar" 2>>"$out/image-precompiled.log")
expect "image: scripts/image --registry $REG (precompiled for another kernel, $devrel) exits 0" "$?" 0
[ -s "$oth" ] || { tail -n 15 "$out/image-precompiled.log"; finish; }
"$ROOT/scripts/fleet-overlay" "$S/k" "$pre" "$oth" > "$out/fleet-overlay.log" 2>&1
expect "fleet-overlay: the overlay of both images (one DaemonSet per kernel release)" "$?" 0
render "$S/k" > "$out/fleet-rendered.yaml"
expect "fleet-overlay: ... kustomize builds it" "$?" 0
ident() { sed -E 's/[^a-z0-9]+/-/g; s/^-+|-+$//g' <<<"${1,,}"; }
render "$S/k" --pod "peermem-$(ident "$abi")" > "$S/debs/precompiled.pod" &&
	render "$S/k" --pod "peermem-$(ident "$devrel")" > "$S/debs/other-kernel.pod"
expect "fleet-overlay: ... the pods of both DaemonSets (render-manifests --pod)" "$?" 0
# Where they go: this node as Node Feature Discovery labels a GPU+HCA node of its
# kernel (unconfigured NFD: no kernel-version.full, Debian's release is no label value).
F=feature.node.kubernetes.io
IFS=. read -r kmaj kmin krev <<<"${abi%%[!0-9.]*}"
cat > "$S/nodes.json" <<EOF
{"node": {"$F/pci-0302_10de.present": "true", "$F/custom-rdma.capable": "true",
          "$F/kernel-version.major": "$kmaj", "$F/kernel-version.minor": "$kmin", "$F/kernel-version.revision": "$krev"}}
EOF
expect "fleet-overlay: on this node only the DaemonSet of its kernel schedules" \
	"$("$bin/python3" "$ROOT/tests/manifests/schedule" "$out/fleet-rendered.yaml" "$S/nodes.json")" "node: peermem-$(ident "$abi")"
# What the node's checks push: archive, the reference, the archive's digest (the one
# the overlay names).
for a in precompiled other-kernel; do
	printf '%s %s\n' "$a.tar" "$("$bin/python3" -c '
import json, sys, tarfile
d = json.load(tarfile.open(sys.argv[1]).extractfile("index.json"))["manifests"][0]
print(d["annotations"]["org.opencontainers.image.ref.name"], d["digest"])' "$S/debs/$a.tar")"
done > "$S/debs/pushes"
res=$(in_node "install -m 644 /var/cache/peermem-test/{precompiled,other-kernel}.pod /var/cache/peermem-test/{precompiled,other-kernel}.tar \
		/var/cache/peermem-test/pushes /usr/local/lib/peermem-node-test/
	echo '== images'; podman --storage-driver overlay images --format '{{.Repository}}:{{.Tag}} {{.Size}}'" 2>&1)
echo "$res" >> "$out/node.log"
has "node: podman loaded the build-on-the-node image" "$res" "localhost/peermem:$VERSION-build-debian13 "
echo "     sizes: precompiled: archive $(du -h --apparent-size "$pre" | cut -f1);" \
	"build on the node: archive $(du -h --apparent-size "$build" | cut -f1), in the node $(sed -n "s|^localhost/peermem:$VERSION-build-debian13 ||p" <<<"$res")"

# ---------------------------------------------------------------- boot
node_checks_unit
node_boot fleet "$abi"
echo "fleet: $((SECONDS - t0)) s"
finish
