// SPDX-License-Identifier: GPL-2.0 OR MIT

//! The KUnit suite `peermem_nv_p2p`: versions, errno mapping, checks of the driver's
//! answers, symbol resolution, and pins against a stub driver.

use core::num::NonZeroI32;

use kernel::{
    prelude::*,
    sync::{
        atomic::{
            Atomic,
            Relaxed, //
        },
        Arc, //
    }, //
};

use super::{
    error::{
        check_page_table,
        dma_addresses,
        dma_mapping_version_ok,
        page_table_version_ok,
        BadAnswer, //
    },
    state::{
        Phase,
        PinState,
        Raw, //
    },
    *, //
};
use crate::{
    bindings,
    compat,
    glue::{
        driver_result,
        MissingSymbol,
        ModuleRef, //
    },
    range::{
        GpuRange,
        Span, //
    },
    space::Owner, //
};

mod stub;

/// Who pins in this suite: a driver table, and the counts of the pins made with it,
/// which a pin reports to its context (the module's counters are the client's, above
/// this layer).
struct Counting {
    nv: Arc<NvP2p>,
    /// Pins made.
    made: Atomic<u64>,
    /// Pins alive now, and the bytes they pin.
    now: Atomic<u64>,
    bytes_now: Atomic<u64>,
}

/// The counts of a [`Counting`] context at one time: made, alive now, bytes now.
type Counts = (u64, u64, u64);

impl Counting {
    /// A context pinning with `nv`, with nothing counted.
    fn new(nv: Arc<NvP2p>) -> Result<Arc<Self>> {
        Ok(Arc::new(
            Counting {
                nv,
                made: Atomic::new(0),
                now: Atomic::new(0),
                bytes_now: Atomic::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// The counts now.
    fn counts(&self) -> Counts {
        (
            self.made.load(Relaxed),
            self.now.load(Relaxed),
            self.bytes_now.load(Relaxed),
        )
    }
}

impl PinContext for Counting {
    fn nv(&self) -> &NvP2p {
        &self.nv
    }

    fn pinned(&self, bytes: u64) {
        self.made.fetch_add(1, Relaxed);
        self.now.fetch_add(1, Relaxed);
        self.bytes_now.fetch_add(bytes, Relaxed);
    }

    fn unpinned(&self, bytes: u64) {
        compat::fetch_sub(&self.now, 1, Relaxed);
        compat::fetch_sub(&self.bytes_now, bytes, Relaxed);
    }
}

/// A free handler that does nothing (the suite's pins are never freed by a callback).
struct NoCallback;

impl PinRecord for NoCallback {
    type Context = Counting;
}

impl FreeHandler for NoCallback {
    fn on_free(&self, _ctx: &Counting, _pin: PinIdentity) {}
}

#[kunit_tests(peermem_nv_p2p)]
mod suite {
    use super::{
        stub::{
            stub_driver,
            GOOD_TABLE,
            MODE,
            PUTS,
            PUTS_AT_UNMAP,
            UNMAPS, //
        },
        *, //
    };
    use crate::glue::no_symbols;

    #[test]
    fn page_table_versions() {
        // docs/abi.md 1.2: majors 1 (minor >= 2) and 2 are read; others are refused.
        assert!(page_table_version_ok(0x0001_0002));
        assert!(page_table_version_ok(0x0002_0000));
        assert!(page_table_version_ok(0x0001_0003));
        assert!(page_table_version_ok(0x0002_0001));
        assert!(!page_table_version_ok(0x0001_0001));
        assert!(!page_table_version_ok(0x0001_0000));
        assert!(!page_table_version_ok(0x0003_0000));
        assert!(!page_table_version_ok(0));
        assert!(!page_table_version_ok(0xdead_0002));
    }

    #[test]
    fn dma_mapping_versions() {
        assert!(dma_mapping_version_ok(0x0002_0003));
        assert!(dma_mapping_version_ok(0x0002_0004));
        assert!(!dma_mapping_version_ok(0x0002_0002));
        assert!(!dma_mapping_version_ok(0x0001_0003));
        assert!(!dma_mapping_version_ok(0x0003_0003));
    }

    #[test]
    fn driver_errnos_map_to_errors() {
        assert_eq!(driver_result(0), Ok(()));
        assert_eq!(driver_result(-22), Err(EINVAL));
        assert_eq!(driver_result(-12), Err(ENOMEM));
        assert_eq!(driver_result(-5), Err(EIO));
        assert_eq!(driver_result(-16), Err(EBUSY));
        assert_eq!(driver_result(-19), Err(ENODEV));
        assert_eq!(driver_result(-524), Err(ENOTSUPP));
        // Not an errno: a positive value, or beyond MAX_ERRNO.
        assert_eq!(driver_result(1), Err(EIO));
        assert_eq!(driver_result(-4096), Err(EIO));
        assert_eq!(driver_result(c_int::MIN), Err(EIO));
    }

    /// A page table made by hand, as a driver would hand it out.
    struct Table {
        pages: KVec<bindings::nvidia_p2p_page>,
        ptrs: KVec<*mut bindings::nvidia_p2p_page>,
        raw: bindings::nvidia_p2p_page_table,
    }

    fn table(version: u32, n: u32) -> Result<KBox<Table>> {
        let mut t = KBox::new(
            Table {
                pages: KVec::new(),
                ptrs: KVec::new(),
                raw: bindings::nvidia_p2p_page_table {
                    version,
                    page_size: bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB,
                    pages: core::ptr::null_mut(),
                    entries: n,
                    gpu_uuid: core::ptr::null_mut(),
                    flags: 0,
                },
            },
            GFP_KERNEL,
        )?;
        for i in 0..n {
            t.pages.push(
                bindings::nvidia_p2p_page {
                    physical_address: 0xe000_0000 + u64::from(i) * 0x1_0000,
                    u: bindings::nvidia_p2p_page__bindgen_ty_1 {
                        registers: bindings::nvidia_p2p_page__bindgen_ty_1__bindgen_ty_1 {
                            request: [0; 3],
                            reserved: [0; 3],
                        },
                    },
                },
                GFP_KERNEL,
            )?;
        }
        for i in 0..n as usize {
            let p: *mut bindings::nvidia_p2p_page = &mut t.pages[i];
            t.ptrs.push(p, GFP_KERNEL)?;
        }
        t.raw.pages = t.ptrs.as_mut_ptr();
        Ok(t)
    }

    fn check(t: &Table, pages: u64) -> Result<(), BadAnswer> {
        // SAFETY: `t.raw` and the arrays it points to live as long as `t`.
        unsafe { check_page_table(&t.raw, pages) }
    }

    #[test]
    fn page_tables_are_checked() -> Result {
        // SAFETY: a null pointer is allowed.
        let null = unsafe { check_page_table(core::ptr::null(), 1) };
        assert_eq!(null, Err(BadAnswer::Null));
        let t = table(0x0002_0000, 4)?;
        assert_eq!(check(&t, 4), Ok(()));
        assert_eq!(check(&t, 3), Err(BadAnswer::Entries(4)));
        let t = table(0x0001_0002, 2)?;
        assert_eq!(check(&t, 2), Ok(()));
        let t = table(0x0003_0000, 2)?;
        assert_eq!(check(&t, 2), Err(BadAnswer::Version(0x0003_0000)));
        let mut t = table(0x0002_0000, 2)?;
        t.raw.page_size = bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_4KB;
        assert_eq!(check(&t, 2), Err(BadAnswer::PageSize(0)));
        let mut t = table(0x0002_0000, 2)?;
        // The page entries are never read (the DMA mapping has the addresses).
        t.ptrs[1] = core::ptr::null_mut();
        assert_eq!(check(&t, 2), Ok(()));
        t.raw.pages = core::ptr::null_mut();
        assert_eq!(check(&t, 2), Err(BadAnswer::NullArray));
        Ok(())
    }

    #[test]
    fn dma_mappings_are_checked_and_read_in_place() -> Result {
        let mut addrs = KVec::new();
        for i in 0..3u64 {
            addrs.push(0x1_0000_0000 + i * 0x1_0000, GFP_KERNEL)?;
        }
        let mut m = bindings::nvidia_p2p_dma_mapping {
            version: bindings::NVIDIA_P2P_DMA_MAPPING_VERSION,
            page_size_type: bindings::nvidia_p2p_page_size_type_NVIDIA_P2P_PAGE_SIZE_64KB,
            entries: 3,
            dma_addresses: addrs.as_mut_ptr(),
            private: core::ptr::null_mut(),
            pci_dev: core::ptr::null_mut(),
        };
        // SAFETY: `m` and `addrs` live across the calls.
        let read = |m: &bindings::nvidia_p2p_dma_mapping, n| unsafe { dma_addresses(m, n) };
        let read3 = read(&m, 3).map_err(|_| EIO)?;
        assert_eq!(read3, &addrs[..]);
        assert_eq!(read3.as_ptr(), addrs.as_ptr());
        assert_eq!(read(&m, 4).err(), Some(BadAnswer::Entries(3)));
        m.version = 0x0002_0002;
        assert_eq!(read(&m, 3).err(), Some(BadAnswer::Version(0x0002_0002)));
        m.version = bindings::NVIDIA_P2P_DMA_MAPPING_VERSION;
        m.dma_addresses = core::ptr::null_mut();
        assert_eq!(read(&m, 3).err(), Some(BadAnswer::NullArray));
        // SAFETY: a null pointer is allowed.
        let null = unsafe { dma_addresses(core::ptr::null(), 1) };
        assert_eq!(null.err(), Some(BadAnswer::Null));
        Ok(())
    }

    #[test]
    fn missing_symbols_are_named() {
        assert_eq!(
            NvP2p::new(&no_symbols()).err(),
            Some(MissingSymbol("nvidia_p2p_get_pages"))
        );
        let mut s = stub_driver(false);
        s.nv_dma_unmap_pages = None;
        assert_eq!(
            NvP2p::new(&s).err(),
            Some(MissingSymbol("nvidia_p2p_dma_unmap_pages"))
        );
        // The persistent pair is optional (drivers before 535.14).
        let with = |persistent| {
            let nv = NvP2p::new(&stub_driver(persistent)).map_err(|_| EINVAL)?;
            Ok::<_, Error>(Arc::pin_init(nv, GFP_KERNEL)?.has_persistent_api())
        };
        assert_eq!(with(false), Ok(false));
        assert_eq!(with(true), Ok(true));
    }

    #[test]
    fn unusable_driver_answers_fail_cleanly() -> Result {
        let nv = Counting::new(Arc::pin_init(
            NvP2p::new(&stub_driver(true)).map_err(|_| EINVAL)?,
            GFP_KERNEL,
        )?)?;
        let range = GpuRange::aligned(0x7f00_0000_0000, 0x1_0000).ok_or(EINVAL)?;
        let span = Span::covering(range.start(), range.len()).map_err(|_| EINVAL)?;
        // Success without a table: EIO, nothing to put.
        MODE.store(0, Relaxed);
        let puts = PUTS.load(Relaxed);
        assert_eq!(
            NvP2p::pin_persistent(&nv, span).err(),
            Some(PinError::BadAnswer)
        );
        assert_eq!(PUTS.load(Relaxed), puts);
        // A table of an unknown version: EIO, and the pin is given back.
        MODE.store(1, Relaxed);
        assert_eq!(
            NvP2p::pin_persistent(&nv, span).err(),
            Some(PinError::BadAnswer)
        );
        assert_eq!(PUTS.load(Relaxed), puts + 1);
        // A driver error is passed through, as the driver's.
        assert_eq!(
            NvP2p::pin(&nv, range, Owner::kernel_thread(), NoCallback).err(),
            Some(PinError::Driver(ENOMEM))
        );
        // A pin that failed was never counted.
        assert_eq!(nv.counts(), (0, 0, 0));
        Ok(())
    }

    /// A stub driver with the persistent pair, whose gets (both) hand out a good
    /// one-page table (until the test clears `GOOD_TABLE`), and the range it pins.
    fn good_stub() -> Result<(Arc<Counting>, GpuRange, KBox<Table>)> {
        let nv = Counting::new(Arc::pin_init(
            NvP2p::new(&stub_driver(true)).map_err(|_| EINVAL)?,
            GFP_KERNEL,
        )?)?;
        let range = GpuRange::aligned(0x7f00_0000_0000, 0x1_0000).ok_or(EINVAL)?;
        let mut t = table(0x0002_0000, 1)?;
        GOOD_TABLE.store(&raw mut t.raw, Relaxed);
        MODE.store(2, Relaxed);
        Ok((nv, range, t))
    }

    #[test]
    fn a_shared_pin_is_put_once_when_its_last_owner_lets_go() -> Result {
        let (nv, range, t) = good_stub()?;
        let puts = PUTS.load(Relaxed);
        let pin =
            NvP2p::pin(&nv, range, Owner::kernel_thread(), NoCallback).map_err(Error::from)?;
        // Counted once, by the pin's context.
        let made = (1, 1, range.len());
        assert_eq!(nv.counts(), made);
        // Three owners of one pin (a registry node and two registrations): the first
        // two to let go neither put it nor uncount it.
        let a = pin.clone();
        let b = a.clone();
        drop(pin);
        drop(b);
        assert_eq!(PUTS.load(Relaxed), puts);
        assert_eq!(nv.counts(), made);
        assert!(!a.is_freed());
        drop(a);
        assert_eq!(PUTS.load(Relaxed), puts + 1);
        // Uncounted once, by the last owner.
        assert_eq!(nv.counts(), (1, 0, 0));
        GOOD_TABLE.store(core::ptr::null_mut(), Relaxed);
        drop(t);
        Ok(())
    }

    #[test]
    fn the_last_owner_unmaps_a_mapping_left_before_the_put() -> Result {
        let (nv, range, t) = good_stub()?;
        // SAFETY: an all-zero mapping is a valid value (null pointers, zero counts);
        // the stub's unmap only counts it.
        let mut m: KBox<bindings::nvidia_p2p_dma_mapping> =
            KBox::new(unsafe { core::mem::zeroed() }, GFP_KERNEL)?;
        let (puts, unmaps) = (PUTS.load(Relaxed), UNMAPS.load(Relaxed));
        let pin =
            NvP2p::pin(&nv, range, Owner::kernel_thread(), NoCallback).map_err(Error::from)?;
        // A mapping the pin records, which nobody unmapped.
        assert!(pin.shared.state.lock().mappings().push(Raw(&raw mut *m)));
        drop(pin);
        // Unmapped once, before the put (the driver wants every mapping gone first).
        assert_eq!(UNMAPS.load(Relaxed), unmaps + 1);
        assert_eq!(PUTS_AT_UNMAP.load(Relaxed), puts);
        assert_eq!(PUTS.load(Relaxed), puts + 1);
        GOOD_TABLE.store(core::ptr::null_mut(), Relaxed);
        drop(t);
        drop(m);
        Ok(())
    }

    #[test]
    fn a_persistent_pin_is_put_when_dropped() -> Result {
        let (nv, range, t) = good_stub()?;
        // The registered bytes lie inside the one page the pin covers.
        let span = Span::covering(range.start() + 0x100, 0x200).map_err(|_| EINVAL)?;
        let puts = PUTS.load(Relaxed);
        let pin = NvP2p::pin_persistent(&nv, span).map_err(Error::from)?;
        assert_eq!(pin.span().range(), range);
        // Counted by its context while it lives, put once and uncounted when dropped.
        assert_eq!(nv.counts(), (1, 1, range.len()));
        assert_eq!(PUTS.load(Relaxed), puts);
        drop(pin);
        assert_eq!(PUTS.load(Relaxed), puts + 1);
        assert_eq!(nv.counts(), (1, 0, 0));
        GOOD_TABLE.store(core::ptr::null_mut(), Relaxed);
        drop(t);
        Ok(())
    }

    #[test]
    fn callback_data_is_given_back_by_whichever_ends_last() -> Result {
        let data = || Arc::new(0u8, GFP_KERNEL);
        let table = Raw::null();
        let thread = || NonZeroI32::new(kernel::current!().pid());
        // Live, putting or orphaned: a callback may still come, and keeps it.
        for phase in [
            Phase::Live { table },
            Phase::Putting { table },
            Phase::Orphaned {
                table,
                module: ModuleRef::new(),
            },
        ] {
            let mut st = PinState::in_phase(phase, Some(data()?));
            assert!(!st.gives_data_back());
        }
        // Put, or freed by a callback that returned: given back, once.
        let returned = Phase::Freed {
            table,
            thread: None,
            orphan: None,
        };
        for phase in [Phase::Put, returned] {
            let mut st = PinState::in_phase(phase, Some(data()?));
            assert!(st.gives_data_back());
            assert!(!st.gives_data_back());
        }
        // A callback still running keeps it, even once put; it goes when the callback
        // ends.
        let mut st = PinState::new();
        st.hand_data(data()?);
        assert!(st.start_put().is_some());
        st.start_callback();
        assert!(!st.callback_elsewhere() && st.finish_put().is_none());
        let running = Phase::Freed {
            table,
            thread: thread(),
            orphan: None,
        };
        let mut st = PinState::in_phase(running, Some(data()?));
        assert!(!st.gives_data_back());
        let (given, orphan) = st.end_callback();
        assert!(given.is_some() && orphan.is_none());
        // Through the transitions: a put that ends first leaves it to the callback...
        let mut st = PinState::new();
        st.hand_data(data()?);
        assert!(st.start_put().is_some());
        st.start_callback();
        assert!(st.finish_put().is_none());
        let (given, orphan) = st.end_callback();
        assert!(given.is_some() && orphan.is_none());
        // ...a put with no callback gives it back itself...
        let mut st = PinState::new();
        st.hand_data(data()?);
        assert!(st.start_put().is_some() && st.finish_put().is_some());
        // ...and an orphaned pin's callback gives back both it and the module reference.
        let mut st = PinState::new();
        st.hand_data(data()?);
        assert!(st.orphan() && st.start_put().is_none() && !st.orphan());
        st.start_callback();
        let (given, orphan) = st.end_callback();
        assert!(given.is_some() && orphan.is_some());
        Ok(())
    }

    #[test]
    fn mappings_keep_room_for_every_call_in_flight() -> Result {
        let m = |i: usize| Raw((i * 64) as *mut bindings::nvidia_p2p_dma_mapping);
        // Three dma_map calls in flight at once on a live pin (concurrent
        // registrations of one shared pin), then each records its mapping: every one
        // finds room, or a mapping would go unrecorded and never be unmapped.
        let mut st = PinState::<u8>::new();
        let table = 0x40 as *mut bindings::nvidia_p2p_page_table;
        st.adopt(table)?;
        for _ in 0..3 {
            assert_eq!(st.begin_call()?, table);
        }
        assert_eq!(st.in_flight(), 3);
        for i in 1..=3 {
            assert!(st.mappings().push(m(i)));
        }
        assert_eq!(st.mappings().len(), 3);
        // A null mapping is never recorded (null marks the empty first place).
        assert!(!st.mappings().push(Raw(core::ptr::null_mut())));
        assert!(!st.mappings().remove(core::ptr::null_mut()));
        assert_eq!(st.mappings().len(), 3);
        // Not once the pin is put or freed.
        let held = Raw(table);
        let freed = Phase::Freed {
            table: held,
            thread: None,
            orphan: None,
        };
        for phase in [Phase::Putting { table: held }, Phase::Put, freed] {
            assert_eq!(
                PinState::<u8>::in_phase(phase, None).begin_call(),
                Err(PinError::Freed)
            );
        }
        // An unmap counts in flight only for a recorded mapping, which it forgets.
        assert_eq!(st.begin_unmap(m(2).0), Some(table));
        assert_eq!(st.begin_unmap(m(2).0), None);
        assert_eq!(st.in_flight(), 4);
        assert!(st.mappings().push(m(2)));
        // Any one can go, the first included; what is left stays recorded.
        let ms = st.mappings();
        assert!(ms.remove(m(1).0));
        assert!(!ms.remove(m(1).0));
        assert_eq!(ms.len(), 2);
        assert!(ms.remove(m(3).0));
        let left: KVec<usize> = {
            let mut v = KVec::new();
            for r in ms.take() {
                v.push(r.0 as usize, GFP_KERNEL)?;
            }
            v
        };
        assert_eq!(&left[..], &[128]);
        assert_eq!(ms.len(), 0);
        assert!(!ms.remove(m(2).0));
        Ok(())
    }
}
