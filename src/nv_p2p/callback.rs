// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The driver's free callback of a callback pin (docs/abi.md 1.4,
//! docs/pin-state-machine.md).

use kernel::{
    ffi::c_void,
    sync::ArcBorrow, //
};

use super::shared::{
    FreeHandler,
    PinShared, //
};
use crate::glue::ModuleRef;

/// The driver's free callback for pins with handler `T`.
///
/// # Safety
///
/// Called by nvidia.ko with the `data` given to `nvidia_p2p_get_pages` in
/// [`NvP2p::pin`](super::NvP2p::pin): `Arc::as_ptr` of the pin's `PinShared<T>`, whose
/// reference the pin's state keeps for the driver until the callback gives it back
/// (`PinState` protocol).
pub(super) unsafe extern "C" fn free_callback<T: FreeHandler>(data: *mut c_void) {
    // The whole callback runs under its own module reference: the holders of the
    // module's other references (registrations, an orphaned pin) may let go of them
    // while it runs. Declared first, dropped last.
    let _module = ModuleRef::new();
    // SAFETY: `data` is `Arc::as_ptr` of the pin's record, whose driver reference the
    // pin's state keeps (the caller's guarantee) until this callback gives it back,
    // below, after the last use of `shared`.
    let shared: ArcBorrow<'_, PinShared<T>> =
        unsafe { ArcBorrow::from_raw(data.cast::<PinShared<T>>()) };
    shared.state.lock().start_callback();
    // No new driver call starts on the table from here on (`DriverCall`).
    shared.handler.on_free(&shared.ctx, shared.identity());

    let (table, mappings) = {
        let mut st = shared.state.lock();
        // Calls that started before the phase changed must end before the driver frees
        // the table, which it does as soon as this callback returns.
        while st.busy() {
            shared.wait_idle(&mut st);
        }
        st.take_for_free()
    };
    // Freed outside the spinlock (the driver may sleep in its frees): the pin is
    // freed with nothing in flight, so nothing else uses them any more, and the
    // callback is still running, so no owner lets the record go meanwhile.
    for m in mappings {
        // SAFETY: `m` is a live mapping of the table; freeing it is allowed inside the
        // callback (docs/abi.md 1.1), and nothing else uses it any more.
        unsafe { (shared.nv().free_dma_mapping)(m.0) };
    }
    if !table.0.is_null() {
        // SAFETY: `table` is this pin's table; freeing it is the one thing the callback
        // must do with it (docs/abi.md 1.1).
        unsafe { (shared.nv().free_page_table)(table.0) };
    }
    let (data, orphan) = {
        let mut st = shared.state.lock();
        let given = st.end_callback();
        shared.wake_idle(&st);
        given
    };
    // The driver's reference goes last (it may be the record's last one): `shared` is
    // not used after.
    drop(orphan);
    drop(data);
}
