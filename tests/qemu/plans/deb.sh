# The packages' run (packaging/test-deb.sh, docs/testing.md "The packages"): the
# /lib/modules tree and /etc files that dpkg and dkms installed from
# peermem-dropin-dkms, booted in the dev VM with Debian's kmod and the fake
# providers (scripts/kmod-rootfs). The boot entry is the enabled peermem.service,
# started as systemd starts it (its ExecStart; the real systemd runs it in the host
# part, packaging/test-host.sh). Check counts: deb.manifest.
v=$(cat /peermem/VERSION)
kver=$(uname -r)
S=peermem_deb
loaded() { [ -d "/sys/module/$1" ] || { echo "$1 is not loaded"; return 1; }; }
# The enabled unit's ExecStart, as systemd runs it at boot.
# (The wants link names the unit's path as deb-systemd-helper found it, /lib or /usr/lib.)
modules_load() {
    [ -L /etc/systemd/system/multi-user.target.wants/peermem.service ] ||
        { echo "peermem.service is not enabled"; return 1; }
    sh -c "$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/system/peermem.service)"
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
