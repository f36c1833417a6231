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
#   - the precompiled image (scripts/image MODULE TOOL) for the node's kernel, MODULE
#     being that build's module, as a build pipeline makes precompiled images;
#   - both images loaded into the node's podman storage; their sizes printed;
#   - the pod: what `kubectl apply -k` applies (deploy/kubernetes with the precompiled
#     image's tag set, and deploy/kubernetes/build-on-node), turned into podman's
#     options by packaging/render-manifests --pod: privileged, the hostPath mounts,
#     the ConfigMap's environment, the memory limit, the command; probes run with
#     podman exec, the stop is the preStop hook and then SIGTERM within the grace
#     period;
#   - the scenarios, in the booted node (tests/node/checks, boot fleet): start, start
#     before the RDMA core, openibd restart, stop with a live registration, a host with
#     NVIDIA's packaged nvidia-peermem loaded (its stand-in, tests/fakes/standin, built
#     in the node against the doubles), the build-on-the-node image.
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
mkdir -p "$S/debs/standin-src/tests/fakes"
cp -r "$ROOT/tests/fakes/standin" "$S/debs/standin-src/tests/fakes/"
cp -r "$ROOT/include" "$S/debs/standin-src/"
cp "$ROOT/packaging/find-symvers" "$S/debs/standin-src/"
# A module built for another kernel: the drop-in of the test bed's dev kernel.
cp "$ROOT/build/stage/nvidia-peermem.ko" "$S/debs/nvidia-peermem-other-kernel.ko"

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
	install -m 644 precompiled.pod build.pod nvidia-peermem-other-kernel.ko /usr/local/lib/peermem-node-test/
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

# ---------------------------------------------------------------- the precompiled image
# For the node's kernel, from the module that build made (as a pipeline builds the
# precompiled images of a fleet's kernel releases).
t=$SECONDS
pre=$("$ROOT/scripts/image" "$S/nvidia-peermem.ko" "$tool" "$S/debs/precompiled.tar" 2>"$out/image-precompiled.log")
expect "image: scripts/image (precompiled for $abi) exits 0 ($((SECONDS - t)) s)" "$?" 0
[ -s "$pre" ] || { tail -n 15 "$out/image-precompiled.log"; finish; }
res=$(in_node "podman --storage-driver overlay load -q -i /var/cache/peermem-test/precompiled.tar
	echo '== images'; podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}'" 2>&1)
echo "$res" >> "$out/node.log"
has "node: podman loaded the precompiled image" "$res" "localhost/peermem:$VERSION-${abi//+/_} "
has "node: podman loaded the build-on-the-node image" "$res" "localhost/peermem:$VERSION-build-debian13 "
echo "     sizes: precompiled: archive $(du -h --apparent-size "$pre" | cut -f1), in the node $(sed -n "s|^localhost/peermem:$VERSION-${abi//+/_} ||p" <<<"$res");" \
	"build on the node: archive $(du -h --apparent-size "$build" | cut -f1), in the node $(sed -n "s|^localhost/peermem:$VERSION-build-debian13 ||p" <<<"$res")"

# ---------------------------------------------------------------- boot
node_checks_unit
node_boot fleet "$abi"
echo "fleet: $((SECONDS - t0)) s"
finish
