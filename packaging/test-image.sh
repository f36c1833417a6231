#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-image.sh MODULE TOOL [KDIR]: peermem's container image in its
# precompiled form (scripts/image), for the kernel MODULE was built for (part
# debian-7.3's drop-in, built for Debian 13's own 7.3 kernel):
#   - scripts/image writes its OCI archive, tagged and labelled with that release;
#   - podman loads the archive (storage of its own under build/image/);
#   - in the image's root (podman image mount; chroot): the tool runs and says its
#     version, the module is the drop-in of that release, kmod's insmod and rmmod are
#     there, and the entrypoint is `peermem agent run` on the module.
# With KDIR, `make image KDIR=KDIR` as an admin runs it: the drop-in built against
# KDIR and its image, named and labelled with KDIR's release; and `make
# image-build-on-node`.
# The image's sizes are printed. Running it as a container is not done here (the
# build machine's runtime cannot set a container's limits). Needs root, debootstrap,
# buildah and podman. Last line: "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/packaging/check-lib.sh"
module=${1:?usage: test-image.sh MODULE TOOL}
tool=${2:?usage: test-image.sh MODULE TOOL}
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")
why=
[ "$(id -u)" = 0 ] || why="$why; not root"
for c in debootstrap buildah podman; do command -v $c >/dev/null || why="$why; no $c (scripts/setup)"; done
[ -f "$module" ] && [ -x "$tool" ] || why="$why; no $module or $tool"
[ -z "$why" ] || { bad "prerequisites: ${why#; }"; finish; }
rel=$(modinfo -F vermagic "$module" | cut -d' ' -f1)
tag=$VERSION-${rel//+/_}

log=$ROOT/build/image/image.log
mkdir -p "$ROOT/build/image"
archive=$("$ROOT/scripts/image" "$module" "$tool" 2>"$log")
rc=$?
expect "scripts/image exits 0" "$rc" 0
[ "$rc" = 0 ] || { tail -n 15 "$log" | sed 's/^/     /'; finish; }
check "the OCI archive: $archive" test -s "$archive"
expect "the archive is named with the version and the release" "$(basename "$archive")" "peermem-$VERSION-$rel.tar"

store=$ROOT/build/image/podman
P=(podman --root "$store/root" --runroot "$store/run" --storage-driver vfs)
"${P[@]}" rmi -f "localhost/peermem:$tag" >/dev/null 2>&1
out=$("${P[@]}" load -i "$archive" 2>&1)
has "podman loads it" "$out" "Loaded image: localhost/peermem:$tag"
label() { "${P[@]}" image inspect --format "{{index .Labels \"$1\"}}" "localhost/peermem:$tag" 2>&1; }
expect "label io.peermem.kernel-release" "$(label io.peermem.kernel-release)" "$rel"
expect "label org.opencontainers.image.version" "$(label org.opencontainers.image.version)" "$VERSION"
expect "entrypoint and command" \
	"$("${P[@]}" image inspect --format '{{.Config.Entrypoint}} {{.Config.Cmd}}' "localhost/peermem:$tag" 2>&1)" \
	"[peermem agent run] [--module-file=/opt/peermem/nvidia-peermem.ko]"
mnt=$("${P[@]}" image mount "localhost/peermem:$tag" 2>&1)
if [ -d "$mnt" ]; then
	expect "in the image: peermem --version" "$(chroot "$mnt" /usr/sbin/peermem --version 2>&1)" "peermem $VERSION"
	expect "in the image: the module is the drop-in" "$(modinfo -F name "$mnt/opt/peermem/nvidia-peermem.ko" 2>&1)" nvidia_peermem
	expect "in the image: the module's kernel release" \
		"$(modinfo -F vermagic "$mnt/opt/peermem/nvidia-peermem.ko" 2>&1 | cut -d' ' -f1)" "$rel"
	check "in the image: kmod's insmod runs" chroot "$mnt" insmod --version
	check "in the image: kmod's rmmod runs" chroot "$mnt" rmmod --version
	echo "     sizes: archive $(du -h --apparent-size "$archive" | cut -f1), unpacked $(du -sh "$mnt" | cut -f1)"
	"${P[@]}" image unmount "localhost/peermem:$tag" >/dev/null 2>&1
else
	bad "podman image mount"; echo "     $mnt"
fi

# The entrypoint in an OCI archive's image configuration (index, manifest, config).
oci_entrypoint() {
	python3 - "$1" <<'PY'
import json, sys, tarfile
t = tarfile.open(sys.argv[1])
blob = lambda d: json.load(t.extractfile("blobs/" + d.replace(":", "/")))
manifest = blob(json.load(t.extractfile("index.json"))["manifests"][0]["digest"])
print(blob(manifest["config"]["digest"])["config"]["Entrypoint"])
PY
}

# make image, against KDIR (its release read as make reads it).
if [ -n "${3:-}" ]; then
	krel=$(cat "$3/include/config/kernel.release")
	b=$(mktemp -d "${TMPDIR:-/var/tmp}/peermem-make-image.XXXXXX")
	out=$(make -s -C "$ROOT" image KDIR="$3" BUILD="$b" REGISTRY=registry.example.com:5000/gpu 2>&1)
	rc=$?
	expect "make image KDIR=<dev kernel> REGISTRY=registry.example.com:5000/gpu exits 0" "$rc" 0
	[ "$rc" = 0 ] || echo "$out" | tail -n 15 | sed 's/^/     /'
	expect "make image: prints the archive, named with the version and KDIR's release" \
		"$(tail -n 1 <<<"$out")" "$ROOT/build/image/peermem-$VERSION-$krel.tar"
	out=$("${P[@]}" load -i "$ROOT/build/image/peermem-$VERSION-$krel.tar" 2>&1)
	ref=registry.example.com:5000/gpu/peermem:$VERSION-${krel//+/_}
	has "make image: the image is named for the registry (podman loads $ref)" "$out" "Loaded image: $ref"
	expect "make image: labelled with KDIR's release" "$("${P[@]}" image inspect --format \
		'{{index .Labels "io.peermem.kernel-release"}}' "$ref" 2>&1)" "$krel"
	"${P[@]}" rmi -f "$ref" >/dev/null 2>&1
	out=$(make -s -C "$ROOT" image KDIR="$3" BUILD="$b" REGISTRY=Registry.example.com/gpu 2>&1)
	rc=$?
	expect "make image REGISTRY=<not a registry name> is refused (make exits 2)" "$rc" 2
	has "make image REGISTRY=<not a registry name>: ... saying why" "$out" "--registry 'Registry.example.com/gpu': not a registry host[:port][/path]"
	rm -rf "$b"
	# make image-build-on-node: the other form (part fleet runs it on a node).
	out=$(make -s -C "$ROOT" image-build-on-node 2>&1)
	rc=$?
	expect "make image-build-on-node exits 0" "$rc" 0
	[ "$rc" = 0 ] || echo "$out" | tail -n 15 | sed 's/^/     /'
	expect "make image-build-on-node: prints the archive, named with the version" \
		"$(tail -n 1 <<<"$out")" "$ROOT/build/image/peermem-$VERSION-build-debian13.tar"
	expect "make image-build-on-node: its entrypoint builds on the node" "$(oci_entrypoint \
		"$ROOT/build/image/peermem-$VERSION-build-debian13.tar" 2>&1)" "['peermem-build-on-node']"
fi
finish
