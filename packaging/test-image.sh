#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-image.sh MODULE TOOL: peermem's container image in its precompiled
# form (scripts/image), for the kernel MODULE was built for (part debian-7.3's drop-in,
# built for Debian 13's own 7.3 kernel):
#   - scripts/image writes its OCI archive, tagged and labelled with that release;
#   - podman loads the archive (storage of its own under build/image/);
#   - in the image's root (podman image mount; chroot): the tool runs and says its
#     version, the module is the drop-in of that release, kmod's insmod and rmmod are
#     there, and the entrypoint is `peermem agent run` on the module.
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
finish
