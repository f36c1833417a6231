#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR MIT
#
# packaging/test-manifests.sh TOOL MODULE: the Kubernetes manifests of deploy/kubernetes
# (docs/fleet.md):
#   - in each kustomization (deploy/kubernetes, its common/ and daemonset/, the
#     overlay build-on-node/), every resource and patch it lists exists, and every
#     manifest beside it is listed;
#   - what `kubectl apply -k` applies, as kustomize builds it (v4.5.4, the program:
#     packaging/kustomize), for the base, the build-on-the-node overlay and an overlay
#     of scripts/fleet-overlay for two kernel releases, validates strictly (no unknown
#     field) against the schemas of two current Kubernetes minor releases with
#     kubernetes-validate (PyPI; pinned in packaging/manifests-python);
#   - the kustomizations' image tags are this VERSION's;
#   - scheduling (tests/manifests/schedule, on nodes labelled as Node Feature
#     Discovery labels them, stock and as the operators configure it): the base runs
#     on GPU+HCA nodes of either labelling and nowhere else; each DaemonSet of the
#     fleet overlay only on the nodes of its kernel release;
#   - scripts/fleet-overlay: the images by their archives' digests, names and
#     releases; its refusals (an unqualified name, an image without a release, two of
#     one release), exit 2 with the reason;
#   - the DaemonSet's container command, its probes and its preStop hook parse as the
#     peermem tool TOOL takes them (the ConfigMap's values put in for $(VAR)), and do
#     what they say on a node without the module: run refuses for the missing module
#     file (exit 3, not a usage error), probe is not ready (exit 1), stop has nothing to
#     unload (exit 0);
#   - the ConfigMap's keys are the parameters of the module file MODULE.
# Last line: "N passed, N failed".
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/packaging/check-lib.sh"
. "$ROOT/scripts/kernel-env"
tool=${1:?usage: test-manifests.sh TOOL MODULE}
module=${2:?usage: test-manifests.sh TOOL MODULE}
D=$ROOT/deploy/kubernetes
K8S_RELEASES=(1.36.0 1.37.0)
VERSION=$(tr -d '[:space:]' < "$ROOT/VERSION")

bin=$("$ROOT/packaging/manifests-python") ||
	{ bad "prerequisites: the manifests' Python environment (packaging/manifests-python)"; finish; }
py=$bin/python3
KUSTOMIZE=$("$ROOT/packaging/kustomize") ||
	{ bad "prerequisites: kustomize (packaging/kustomize)"; finish; }
export KUSTOMIZE
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Each kustomization's resources and patches, one per line.
for k in "$D" "$D/common" "$D/daemonset" "$D/build-on-node" "$D/podmonitor"; do
	name=${k#"$ROOT"/}
	listed=$("$py" -c 'import sys, yaml; k = yaml.safe_load(open(sys.argv[1])); print("\n".join(k.get("resources", []) + [p["path"] for p in k.get("patches", [])]))' "$k/kustomization.yaml")
	for r in $listed; do
		check "$name: lists $r, which exists" test -e "$k/$r"
	done
	for f in "$k"/*.yaml "$k"/*/; do
		[ -e "$f" ] || continue
		n=$(basename "$f")
		[ "$n" = kustomization.yaml ] && continue
		# A directory beside a kustomization is a part of it or an overlay of it.
		[ -d "$f" ] && [ "$k" = "$D" ] && case $n in build-on-node | podmonitor) true ;; *) false ;; esac && continue
		check "$name: lists $n" grep -qx "$n" <<<"$listed"
	done
done

# An overlay of scripts/fleet-overlay for two kernel releases: Debian's (a '+', not a
# label value) and one that is a label value, each image an OCI archive named for a
# registry as make image REGISTRY= names it (tests/manifests/oci-archive).
REG=registry.example:5000/gpu
deb=7.3.4+bpo-amd64 dev=7.3.4-peermem-dev other=7.0.0-15-generic
deb_digest=$("$ROOT"/tests/manifests/oci-archive "$work/deb.tar" "$REG/peermem:$VERSION-${deb//+/_}" "$deb")
dev_digest=$("$ROOT"/tests/manifests/oci-archive "$work/dev.tar" "$REG/peermem:$VERSION-$dev" "$dev")
"$ROOT"/tests/manifests/oci-archive "$work/bare.tar" "peermem:$VERSION-$other" "$other" >/dev/null
"$ROOT"/tests/manifests/oci-archive "$work/build.tar" "$REG/peermem:$VERSION-build-debian13" - >/dev/null
"$ROOT"/tests/manifests/oci-archive "$work/deb2.tar" "$REG/peermem:$VERSION-${deb//+/_}-2" "$deb" >/dev/null
fo_err=$("$ROOT/scripts/fleet-overlay" --podmonitor "$work/fleet" "$work/deb.tar" "$work/dev.tar" 2>&1 >"$work/fleet.out")
expect "fleet-overlay --podmonitor: two kernel releases: exits 0" "$?" 0
has "fleet-overlay: ... says that Debian's release is selected by major, minor, revision but not the other 7.3.4" \
	"$fo_err" "$deb: not a label value, so no node carries it as feature.node.kubernetes.io/kernel-version.full; its DaemonSet selects kernel 7.3.4 (major, minor, revision) but not $dev"
for bad_case in "bare.tar:without a registry: make it with make image REGISTRY=" \
	"build.tar:no io.peermem.kernel-release label: not a precompiled image" \
	"deb.tar deb2.tar:two archives for kernel release $deb"; do
	files=() && for f in ${bad_case%%:*}; do files+=("$work/$f"); done
	msg=$("$ROOT/scripts/fleet-overlay" "$work/refused" "${files[@]}" 2>&1)
	rc=$?
	expect "fleet-overlay refuses ${bad_case%%:*}: exit 2" "$rc" 2
	has "fleet-overlay refuses ${bad_case%%:*}: ... saying why" "$msg" "${bad_case#*:}"
done

# What `kubectl apply -k` applies, built by kustomize, each resource validated: the
# built-in kinds by kubernetes-validate, the PodMonitor by the operator's schema
# (tests/manifests/crd/validate.mjs, packaging/manifests-node).
crd=$("$ROOT/packaging/manifests-node") ||
	{ bad "prerequisites: the PodMonitor's validator (packaging/manifests-node)"; finish; }
# split RENDERED: RENDERED.builtin (YAML, the built-in kinds), RENDERED.json (all, JSON).
split() {
	"$py" - "$1" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
yaml.safe_dump_all([d for d in docs if d["apiVersion"] != "monitoring.coreos.com/v1"], open(sys.argv[1] + ".builtin", "w"))
json.dump(docs, open(sys.argv[1] + ".json", "w"))
PY
}
for dir in "$D" "$D/build-on-node" "$work/fleet"; do
	case $dir in "$work"/*) name="scripts/fleet-overlay's overlay" ;; *) name=${dir#"$ROOT"/} ;; esac
	if ! "$py" "$ROOT/packaging/render-manifests" "$dir" > "$work/rendered.yaml" 2>"$work/err"; then
		bad "kustomize build $name"; sed 's/^/     /' "$work/err"; continue
	fi
	cp "$work/rendered.yaml" "$work/rendered-$(basename "$dir").yaml"
	split "$work/rendered.yaml"
	for k in "${K8S_RELEASES[@]}"; do
		out=$("$bin/kubernetes-validate" --strict --no-warn -k "$k" "$work/rendered.yaml.builtin" 2>&1)
		rc=$?
		if [ "$rc" = 0 ] && ! grep -q ERROR <<<"$out"; then ok "Kubernetes ${k%.*}: kubectl apply -k $name: every resource valid (strict)"
		else bad "Kubernetes ${k%.*}: kubectl apply -k $name: every resource valid (strict)"; sed 's/^/     /' <<<"$out" | head -n 10; fi
	done
done
out=$(node "$crd/validate.mjs" "$work/rendered.yaml.json" 2>&1)
expect "PodMonitor (--podmonitor, deploy/kubernetes/podmonitor): valid for the Prometheus Operator's schema (strict)" "$out" "valid peermem"
# The validator refuses what the API server would: a misspelt field, a wrong format.
sed -i 's/"port": "metrics"/"portt": "metrics"/; s/"interval": "30s"/"interval": "30 s"/' "$work/rendered.yaml.json"
out=$(node "$crd/validate.mjs" "$work/rendered.yaml.json" 2>&1)
has "PodMonitor: the validator refuses a misspelt field" "$out" "podMetricsEndpoints[0].portt: unknown field"
has "PodMonitor: ... and a malformed interval" "$out" "interval must match pattern"
fleet=$work/rendered-fleet.yaml
images=$(grep -E '^ +image: ' "$fleet" | awk '{print $2}' | sort | tr '\n' ' ')
expect "fleet overlay: each DaemonSet pulls its image by the archive's digest" "$images" \
	"$(printf '%s\n' "$REG/peermem@$deb_digest" "$REG/peermem@$dev_digest" | sort | tr '\n' ' ')"
expect "fleet overlay: one Namespace, ConfigMap, Service and PodMonitor, two DaemonSets" \
	"$(grep -E '^kind: ' "$fleet" | sort | uniq -c | awk '{print $3 $1}' | tr '\n' ' ')" "ConfigMap1 DaemonSet2 Namespace1 PodMonitor1 Service1 "

# Where the pods go: nodes labelled by NFD as the operators configure it (PCI labels by
# vendor) and as it labels them unconfigured (<class>_<vendor> for display
# controllers, custom-rdma.capable for a vendor-15b3 function); the kernel-version
# labels as NFD writes them (no .full where the release is not a label value).
F=feature.node.kubernetes.io
kv() { # RELEASE: NFD's kernel-version labels of a node running RELEASE, as JSON members
	local r=$1 m n v
	IFS=. read -r m n v <<<"${r%%[!0-9.]*}"
	printf '"%s/kernel-version.major": "%s", "%s/kernel-version.minor": "%s", "%s/kernel-version.revision": "%s"' "$F" "$m" "$F" "$n" "$F" "$v"
	[[ $r =~ ^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$ ]] && printf ', "%s/kernel-version.full": "%s"' "$F" "$r"
	return 0
}
cat > "$work/nodes.json" <<EOF
{
  "operators-debian": {"$F/pci-10de.present": "true", "$F/pci-15b3.present": "true", $(kv "$deb")},
  "stock-debian": {"$F/pci-0302_10de.present": "true", "$F/custom-rdma.capable": "true", $(kv "$deb")},
  "stock-vga-dev": {"$F/pci-0300_10de.present": "true", "$F/custom-rdma.capable": "true", $(kv "$dev")},
  "operators-other": {"$F/pci-10de.present": "true", "$F/pci-15b3.present": "true", $(kv "$other")},
  "stock-gpu-only": {"$F/pci-0302_10de.present": "true", $(kv "$deb")},
  "operators-hca-only": {"$F/pci-15b3.present": "true", $(kv "$deb")},
  "unlabelled": {$(kv "$deb")}
}
EOF
sched=$("$py" "$ROOT"/tests/manifests/schedule "$work/rendered-kubernetes.yaml" "$work/nodes.json")
expect "scheduling: the base runs on GPU+HCA nodes labelled either way, nowhere else" "$(tr '\n' ' ' <<<"$sched")" \
	"operators-debian: peermem stock-debian: peermem stock-vga-dev: peermem operators-other: peermem stock-gpu-only: - operators-hca-only: - unlabelled: - "
sched=$("$py" "$ROOT"/tests/manifests/schedule "$fleet" "$work/nodes.json")
expect "scheduling: the fleet overlay's DaemonSets each run only on the nodes of their kernel" "$(tr '\n' ' ' <<<"$sched")" \
	"operators-debian: peermem-7-3-4-bpo-amd64 stock-debian: peermem-7-3-4-bpo-amd64 stock-vga-dev: peermem-7-3-4-peermem-dev operators-other: - stock-gpu-only: - operators-hca-only: - unlabelled: - "

# The images the kustomizations name are this version's.
expect "images: the base's tag is the version" \
	"$("$py" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["images"][0]["newTag"])' "$D/daemonset/kustomization.yaml")" "$VERSION"
expect "images: build-on-node's tag is the version's build image" \
	"$("$py" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["images"][0]["newTag"])' "$D/build-on-node/kustomization.yaml")" "$VERSION-build-debian13"

# The commands of the DaemonSet's container, $(VAR) replaced by the ConfigMap's values
# as the kubelet replaces them: one command per line (kind, then argv), its words
# separated by the ASCII unit separator.
commands=$("$py" - "$D/daemonset/daemonset.yaml" "$D/common/configmap.yaml" <<'PY'
import re, sys, yaml
ds, cm = (yaml.safe_load(open(p)) for p in sys.argv[1:3])
c = ds["spec"]["template"]["spec"]["containers"][0]
env = {e["name"]: cm["data"][e["valueFrom"]["configMapKeyRef"]["key"]] for e in c.get("env", [])}
sub = lambda a: re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a)
for kind, argv in [("run", c["command"] + c["args"]),
                   ("startup", c["startupProbe"]["exec"]["command"]),
                   ("readiness", c["readinessProbe"]["exec"]["command"]),
                   ("liveness", c["livenessProbe"]["exec"]["command"]),
                   ("preStop", c["lifecycle"]["preStop"]["exec"]["command"])]:
    print("\x1f".join([kind] + [sub(a) for a in argv]))
PY
)
empty=$work/empty
mkdir -p "$empty"
while IFS= read -r line; do
	IFS=$'\x1f' read -r -a argv <<<"$line"
	kind=${argv[0]} prog=${argv[1]}
	expect "DaemonSet $kind: runs the peermem tool" "$prog" peermem
	out=$("$tool" "${argv[@]:2}" --root "$empty" 2>&1)
	rc=$?
	case $kind in
	run)
		expect "DaemonSet run: parses, and refuses a missing module file (exit 3)" "$rc" 3
		has "DaemonSet run: says why" "$out" "refusing to start: /opt/peermem/nvidia-peermem.ko:" ;;
	startup | readiness | liveness)
		expect "DaemonSet $kind probe: not ready without the module (exit 1)" "$rc" 1
		has "DaemonSet $kind probe: names the drop-in" "$out" "not ready: nvidia_peermem is not loaded" ;;
	preStop)
		expect "DaemonSet preStop: nothing to unload (exit 0)" "$rc" 0 ;;
	esac
done <<<"$commands"

keys=$("$py" -c 'import sys, yaml; print(" ".join(sorted(yaml.safe_load(open(sys.argv[1]))["data"])))' "$D/common/configmap.yaml")
parms=$(modinfo -F parm "$module" | cut -d: -f1 | sort | tr '\n' ' ')
expect "ConfigMap: its keys are the module's parameters" "$keys " "$parms"
finish
