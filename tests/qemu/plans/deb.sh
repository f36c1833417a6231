# The packages' run (packaging/test-deb.sh, docs/testing.md "The packages"): the
# /lib/modules tree and /etc files that dpkg and dkms installed from
# peermem-dropin-dkms, booted in the dev VM with Debian's kmod and the fake
# providers (scripts/kmod-rootfs). The boot entry is read as systemd-modules-load
# reads /etc/modules-load.d. Check counts: deb.manifest.
v=$(cat /peermem/VERSION)
kver=$(uname -r)
S=peermem_deb
loaded() { [ -d "/sys/module/$1" ] || { echo "$1 is not loaded"; return 1; }; }
# systemd-modules-load: every non-comment line of /etc/modules-load.d/*.conf, modprobed.
modules_load() {
    local rc=0 m
    for m in $(grep -hv '^[#;]' /etc/modules-load.d/*.conf); do /sbin/modprobe "$m" || rc=1; done
    return $rc
}

check $S depmod_runs /sbin/depmod -a
check $S dkms_module_found equals "/lib/modules/$kver/updates/dkms/nvidia-peermem.ko" /sbin/modinfo -F filename nvidia_peermem
check $S boot_entry_loads modules_load
check $S module_is_this_version equals "$v" cat /sys/module/nvidia_peermem/version
check $S provider_nvidia_loaded loaded nvidia
check $S provider_ib_core_loaded loaded ib_core
check $S native_refused_beside_it expect_fail /sbin/modprobe peermem
check $S unloads /sbin/modprobe -r nvidia_peermem
check $S gone expect_fail loaded nvidia_peermem
