# The modprobe run (scripts/test-modprobe, docs/testing.md "The modprobe run"):
# Debian's kmod on a /lib/modules tree with the fakes in kernel/, a stand-in for
# NVIDIA's nvidia-peermem.ko in updates/, and peermem's modules and modprobe.d /
# depmod.d files as scripts/install puts them. Check counts: modprobe.manifest.
v=$(cat /peermem/VERSION)
kver=$(uname -r)
M=/lib/modules/$kver
S=peermem_modprobe
# The file `modprobe NAME` would load.
file_of() { /sbin/modinfo -F filename "$1"; }
# The modules `modprobe --show-depends NAME` loads, in order, as base names.
# The steps `modprobe --show-depends NAME` lists: base names of the modules it
# inserts, "install" for an install command.
load_order() { /sbin/modprobe --show-depends "$1" | awk '$1 == "insmod" { n = split($2, p, "/"); printf "%s ", p[n] } $1 == "install" { printf "install " } END { print "" }'; }
loaded() { [ -d "/sys/module/$1" ] || { echo "$1 is not loaded"; return 1; }; }
standin_loads() { dmesg | grep -c "nvidia_peermem stand-in loaded"; }

check $S depmod_runs /sbin/depmod -a
check $S override_picks_the_dropin equals "$M/extra/nvidia-peermem.ko" file_of nvidia_peermem
check $S native_module_found equals "$M/extra/peermem.ko" file_of peermem
# The providers first (depmod's dependencies: the modules that export what the
# module references), then the module, through its modprobe.d install line.
check $S providers_before_the_dropin equals "nvidia.ko ib_core.ko install " load_order nvidia_peermem
check $S providers_before_peermem equals "nvidia.ko ib_core.ko install " load_order peermem

check $S modprobe_loads_the_dropin /sbin/modprobe nvidia_peermem
check $S dropin_is_peermem equals "$v" cat /sys/module/nvidia_peermem/version
check $S provider_nvidia_loaded loaded nvidia
check $S provider_ib_core_loaded loaded ib_core
check $S standin_not_loaded equals 0 standin_loads
check $S peermem_refused_beside_the_dropin expect_output "nvidia_peermem is loaded and registers the same peer-memory client" /sbin/modprobe peermem
check $S dropin_unloads /sbin/modprobe -r nvidia_peermem

check $S modprobe_loads_peermem /sbin/modprobe peermem
check $S peermem_version equals "$v" cat /sys/module/peermem/version
check $S dropin_refused_beside_peermem expect_output "peermem is loaded and registers the same peer-memory client" /sbin/modprobe nvidia_peermem
check $S peermem_unloads /sbin/modprobe -r peermem

# Options from modprobe.d reach the module's parameters.
echo "options nvidia_peermem persistent_api_support=0" > /etc/modprobe.d/zz-peermem-test.conf
check $S options_reach_the_dropin /sbin/modprobe nvidia_peermem
check $S options_applied equals 0 cat /sys/module/nvidia_peermem/parameters/persistent_api_support
check $S dropin_unloads_again /sbin/modprobe -r nvidia_peermem
rm /etc/modprobe.d/zz-peermem-test.conf

# Without the depmod.d override, depmod's search order prefers updates/: the stand-in.
mv /etc/depmod.d/peermem.conf /tmp/
/sbin/depmod -a
check $S without_override_updates_wins equals "$M/updates/nvidia-peermem.ko" file_of nvidia_peermem
/sbin/modprobe nvidia_peermem
check $S without_override_the_standin_loads equals 1 standin_loads
/sbin/modprobe -r nvidia_peermem
mv /tmp/peermem.conf /etc/depmod.d/
/sbin/depmod -a
check $S override_restored equals "$M/extra/nvidia-peermem.ko" file_of nvidia_peermem

/sbin/modprobe -r nvidia ib_core 2>/dev/null
check $S providers_unloaded expect_fail loaded nvidia
