//! AF_PACKET sockets with memory-mapped TPACKET_V3 rings (Linux `packet(7)`,
//! Documentation/networking/packet_mmap.rst): a receive ring of blocks the kernel fills with
//! frames and hands over a block at a time (batching), and a transmit ring of fixed slots we
//! fill and flush with one `send()`.
//!
//! No crate fits: `af_packet` is GPL-3.0 and unmaintained since 2020, and `pnet` copies every
//! frame through `recvfrom`. This is the minimum over `libc`: open, bind, promiscuous mode,
//! ring setup and the status-word handshake; the frames are never copied on receive.

use npqos_sim::live::csum::complete_checksum;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// Why a socket could not be opened. The messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("no network interface named {0:?} (`ip link` lists them)")]
    NoInterface(String),
    #[error(
        "opening a packet socket on {0:?} needs CAP_NET_RAW (run as root, or `sudo setcap cap_net_raw,cap_net_admin+ep $(which npqos)`)"
    )]
    Permission(String),
    #[error("{what} on {iface:?}: {err}")]
    Io { iface: String, what: &'static str, err: io::Error },
    /// The interfaces do not suit the configuration (bad input, as a missing one is).
    #[error("{0}")]
    Unsuited(String),
}

const ETH_P_ALL: u16 = 0x0003;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// The index of the interface named `name` in this namespace, `None` if there is none (it was
/// removed, or never was). A ring's interface is still there when this is its index.
pub fn index_of(name: &str) -> Option<libc::c_int> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i as libc::c_int)
}

/// Takes the socket's pending error (SO_ERROR), which also clears it. A packet socket is
/// told ENETDOWN when its interface goes down, and until the error is read `poll` reports
/// it again on every call.
pub(super) fn take_error(fd: RawFd) -> Option<io::Error> {
    let mut e: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `e` is a valid out buffer of `len` bytes.
    let r = unsafe {
        libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut e as *mut _ as *mut libc::c_void, &mut len)
    };
    (r == 0 && e != 0).then(|| io::Error::from_raw_os_error(e))
}

fn ifindex(name: &str) -> Result<libc::c_int, OpenError> {
    let c = CString::new(name).map_err(|_| OpenError::NoInterface(name.into()))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(OpenError::NoInterface(name.into()));
    }
    Ok(i as libc::c_int)
}

fn setopt<T>(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live T of the given size.
    let r = unsafe {
        libc::setsockopt(fd, level, opt, v as *const T as *const libc::c_void, std::mem::size_of::<T>() as u32)
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A packet socket bound to `iface` (all protocols), TPACKET_V3.
fn open(iface: &str) -> Result<(OwnedFd, libc::c_int), OpenError> {
    let idx = ifindex(iface)?;
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, (ETH_P_ALL.to_be()) as libc::c_int) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => OpenError::Permission(iface.into()),
            _ => OpenError::Io { iface: iface.into(), what: "socket(AF_PACKET)", err: e },
        });
    }
    // SAFETY: `fd` is a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let io = |what, err| OpenError::Io { iface: iface.into(), what, err };
    setopt(
        fd.as_raw_fd(),
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        &(libc::tpacket_versions::TPACKET_V3 as libc::c_int),
    )
    .map_err(|e| io("PACKET_VERSION TPACKET_V3", e))?;
    Ok((fd, idx))
}

fn bind(fd: RawFd, idx: libc::c_int, iface: &str) -> Result<(), OpenError> {
    // SAFETY: sockaddr_ll is plain data; zero is a valid start.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL.to_be();
    sll.sll_ifindex = idx;
    // SAFETY: `sll` is a valid sockaddr_ll of the size given.
    let r = unsafe {
        libc::bind(fd, &sll as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_ll>() as u32)
    };
    if r < 0 {
        return Err(OpenError::Io { iface: iface.into(), what: "bind", err: io::Error::last_os_error() });
    }
    Ok(())
}

/// A shared mapping of a ring, unmapped on drop.
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    fn new(fd: RawFd, len: usize, iface: &str) -> Result<Map, OpenError> {
        // SAFETY: mapping the ring the kernel just set up on `fd`, `len` bytes.
        let p =
            unsafe { libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(OpenError::Io {
                iface: iface.into(),
                what: "mmap of the ring",
                err: io::Error::last_os_error(),
            });
        }
        Ok(Map { ptr: p as *mut u8, len })
    }
    /// The status word at byte `off` (the kernel and we hand slots over through it).
    fn status(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off + 4 <= self.len && off.is_multiple_of(4));
        // SAFETY: in bounds and aligned; the kernel writes it concurrently, hence atomic.
        unsafe { &*(self.ptr.add(off) as *const AtomicU32) }
    }
    fn u32_at(&self, off: usize) -> u32 {
        debug_assert!(off + 4 <= self.len);
        // SAFETY: in bounds; read after the status word handed the block to us.
        unsafe { ptr::read_unaligned(self.ptr.add(off) as *const u32) }
    }
    fn u16_at(&self, off: usize) -> u16 {
        debug_assert!(off + 2 <= self.len);
        // SAFETY: as above.
        unsafe { ptr::read_unaligned(self.ptr.add(off) as *const u16) }
    }
    fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(off + len <= self.len, "frame inside the ring");
        // SAFETY: in bounds; the block is ours until we hand it back.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }
    fn slice_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off + len <= self.len, "slot inside the ring");
        // SAFETY: in bounds; the slot (transmit: status AVAILABLE until we request its send) or
        // the block (receive: status USER until we hand it back) is ours.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what new() mapped.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

// SAFETY: the mapping is owned by one ring, used from one thread at a time.
unsafe impl Send for Map {}

/// Counters of a receive ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxCounters {
    pub frames: u64,
    /// Frames the kernel dropped because the ring was full (PACKET_STATISTICS tp_drops).
    pub ring_drops: u64,
    /// Frames cut short by the block size (not forwarded).
    pub truncated: u64,
    /// Frames whose TCP or UDP checksum the sender's offload left partial
    /// (TP_STATUS_CSUMNOTREADY), completed here before they are handed on.
    pub checksums_completed: u64,
    pub blocks: u64,
    /// Errors the socket reported (ENETDOWN when the interface went down), each taken once.
    pub socket_errors: u64,
    /// Frames that reached this socket before it joined its fanout group, and so reached the
    /// group too: left out (not forwarded twice).
    pub before_join: u64,
}

impl RxCounters {
    /// Two rings' counts together.
    pub fn add(&self, o: &RxCounters) -> RxCounters {
        RxCounters {
            frames: self.frames + o.frames,
            ring_drops: self.ring_drops + o.ring_drops,
            truncated: self.truncated + o.truncated,
            checksums_completed: self.checksums_completed + o.checksums_completed,
            blocks: self.blocks + o.blocks,
            socket_errors: self.socket_errors + o.socket_errors,
            before_join: self.before_join + o.before_join,
        }
    }
}

/// A TPACKET_V3 receive ring on one interface, in promiscuous mode.
pub struct RxRing {
    fd: OwnedFd,
    index: libc::c_int,
    map: Map,
    block_size: usize,
    blocks: usize,
    cur: usize,
    counters: RxCounters,
    /// Frames stamped before this time (CLOCK_REALTIME, ns) are left out: the ones that
    /// reached the socket before it joined a fanout group that had them too (0: none).
    joined_ns: u64,
}

/// CLOCK_REALTIME in nanoseconds (the clock of the receive ring's frame stamps).
fn realtime_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

// Offsets in tpacket_block_desc / tpacket_hdr_v1 and tpacket3_hdr.
const BLK_STATUS: usize = 8;
const BLK_NUM_PKTS: usize = 12;
const BLK_FIRST: usize = 16;
const H3_NEXT: usize = 0;
const H3_SEC: usize = 4;
const H3_NSEC: usize = 8;
const H3_SNAPLEN: usize = 12;
const H3_LEN: usize = 16;
const H3_STATUS: usize = 20;
const H3_MAC: usize = 24;

impl RxRing {
    /// Opens `iface` for receiving into a ring of about `bytes` (blocks of 256 KiB, handed
    /// over when full or after 1 ms).
    pub fn open(iface: &str, bytes: u64) -> Result<RxRing, OpenError> {
        Self::open_in(iface, bytes, None)
    }

    /// [`Self::open`] joined to fanout group `group` right after its bind
    /// ([`Self::join_fanout`]); with `existing` (the group has a socket already), the frames
    /// that reached this socket before it joined are left out, since the group had them too.
    pub fn open_in(iface: &str, bytes: u64, group: Option<(u16, bool)>) -> Result<RxRing, OpenError> {
        let (fd, idx) = open(iface)?;
        let io = |what, err| OpenError::Io { iface: iface.into(), what, err };
        let block_size = 1usize << 18;
        let blocks = ((bytes as usize) / block_size).max(4);
        let frame_size = 2048usize;
        let req = libc::tpacket_req3 {
            tp_block_size: block_size as u32,
            tp_block_nr: blocks as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: (block_size * blocks / frame_size) as u32,
            tp_retire_blk_tov: 1,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setopt(fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_RX_RING, &req).map_err(|e| io("PACKET_RX_RING", e))?;
        let map = Map::new(fd.as_raw_fd(), block_size * blocks, iface)?;
        // Frames we send on this interface are not ours to forward (kernel 4.20+; harmless
        // where missing, since npqos live never sends on its input).
        let _ = setopt(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &1 as &libc::c_int);
        bind(fd.as_raw_fd(), idx, iface)?;
        let mreq = libc::packet_mreq {
            mr_ifindex: idx,
            mr_type: libc::PACKET_MR_PROMISC as u16,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        setopt(fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
            .map_err(|e| io("promiscuous mode", e))?;
        let mut r =
            RxRing { fd, index: idx, map, block_size, blocks, cur: 0, counters: RxCounters::default(), joined_ns: 0 };
        if let Some((g, existing)) = group {
            r.join_fanout(g)?;
            if existing {
                r.joined_ns = realtime_ns();
            }
        }
        r.kernel_stats(); // what arrived before the ring was ready is not ours
        r.counters = RxCounters::default();
        Ok(r)
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Joins the socket to fanout group `group` (PACKET_FANOUT_HASH, `packet(7)`): the kernel
    /// hands each frame to one socket of the group by a symmetric hash of its flow (addresses
    /// and ports), so that a flow's frames, both ways, always reach the same socket. Frames
    /// that arrive between the socket's bind and this call are its own (seen by the group's
    /// sockets too): npqos live joins before it forwards. The group ignores frames sent on the
    /// interface, as a lone socket does with PACKET_IGNORE_OUTGOING (the group's own flag,
    /// Linux 6.8 and later: without it the frames one way sends would come back the other).
    pub fn join_fanout(&self, group: u16) -> Result<(), OpenError> {
        const PACKET_FANOUT: libc::c_int = 18;
        const PACKET_FANOUT_HASH: u32 = 0;
        const PACKET_FANOUT_FLAG_IGNORE_OUTGOING: u32 = 0x4000;
        let arg = (group as u32 | ((PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_IGNORE_OUTGOING) << 16)) as libc::c_int;
        setopt(self.fd.as_raw_fd(), libc::SOL_PACKET, PACKET_FANOUT, &arg).map_err(|err| OpenError::Io {
            iface: format!("ifindex {}", self.index),
            what: if err.raw_os_error() == Some(libc::EINVAL) {
                "PACKET_FANOUT with PACKET_FANOUT_FLAG_IGNORE_OUTGOING (more than one forwarding thread needs \
                 Linux 6.8 or later: set live.threads = 1)"
            } else {
                "PACKET_FANOUT"
            },
            err,
        })
    }

    /// The index of the interface the ring is bound to.
    pub fn index(&self) -> libc::c_int {
        self.index
    }

    /// Takes the socket's pending error, if any (`poll` said POLLERR): counted, and cleared so
    /// that `poll` sleeps again. The ring itself needs nothing: the kernel hooks the socket
    /// back on when its interface comes up again.
    pub fn take_error(&mut self) -> Option<io::Error> {
        let e = take_error(self.fd.as_raw_fd())?;
        self.counters.socket_errors += 1;
        Some(e)
    }

    /// Is the next block ours?
    pub fn ready(&self) -> bool {
        self.map.status(self.cur * self.block_size + BLK_STATUS).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// Hands every frame of the next block to `f(frame, kernel timestamp ns, [next, after])`
    /// and gives the block back; returns the number of frames, 0 if no block is ready. `next`
    /// and `after` are the block's next two frames (empty past the last), for prefetch hints.
    /// A frame the kernel marks with a partial checksum (the sender's checksum offload, veth's
    /// default) has it completed first ([`npqos_sim::live::csum::complete_checksum`]), so the
    /// frame is one the next stack accepts.
    pub fn next_block(&mut self, mut f: impl FnMut(&[u8], u64, [&[u8]; 2])) -> usize {
        if !self.ready() {
            return 0;
        }
        let base = self.cur * self.block_size;
        let n = self.map.u32_at(base + BLK_NUM_PKTS) as usize;
        let mut off = base + self.map.u32_at(base + BLK_FIRST) as usize;
        let mut before = 0;
        for i in 0..n {
            let snap = self.map.u32_at(off + H3_SNAPLEN) as usize;
            let len = self.map.u32_at(off + H3_LEN) as usize;
            let mac = self.map.u16_at(off + H3_MAC) as usize;
            let ts = self.map.u32_at(off + H3_SEC) as u64 * 1_000_000_000 + self.map.u32_at(off + H3_NSEC) as u64;
            if self.joined_ns != 0 && ts < self.joined_ns {
                before += 1;
            } else if snap < len {
                self.counters.truncated += 1;
            } else {
                if self.map.u32_at(off + H3_STATUS) & libc::TP_STATUS_CSUMNOTREADY != 0 {
                    let frame = self.map.slice_mut(off + mac, snap);
                    self.counters.checksums_completed += complete_checksum(frame) as u64;
                }
                let map = &self.map;
                let frame_at =
                    |at: usize| map.slice(at + map.u16_at(at + H3_MAC) as usize, map.u32_at(at + H3_SNAPLEN) as usize);
                let (mut ahead, mut at) = ([&[][..]; 2], off);
                for (k, a) in ahead.iter_mut().enumerate() {
                    if i + 1 + k < n {
                        at += map.u32_at(at + H3_NEXT) as usize;
                        *a = frame_at(at);
                    }
                }
                f(map.slice(off + mac, snap), ts, ahead);
            }
            off += self.map.u32_at(off + H3_NEXT) as usize;
        }
        self.counters.frames += (n - before) as u64;
        self.counters.before_join += before as u64;
        self.counters.blocks += 1;
        if self.joined_ns != 0 && self.counters.blocks > self.blocks as u64 {
            // Every block of the ring has come round since the join: nothing from before it.
            self.joined_ns = 0;
        }
        fence(Ordering::Release);
        self.map.status(base + BLK_STATUS).store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.cur = (self.cur + 1) % self.blocks;
        n
    }

    /// Reads (and resets) the kernel's counts into ours.
    fn kernel_stats(&mut self) {
        let mut st = libc::tpacket_stats_v3 { tp_packets: 0, tp_drops: 0, tp_freeze_q_cnt: 0 };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` is a valid out buffer of `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        if r == 0 {
            self.counters.ring_drops += st.tp_drops as u64;
        }
    }

    /// Counters, with the kernel's ring drops up to now.
    pub fn counters(&mut self) -> RxCounters {
        self.kernel_stats();
        self.counters
    }
}

/// Counters of a transmit ring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxCounters {
    pub frames: u64,
    pub flushes: u64,
    /// Frames the kernel refused (TP_STATUS_WRONG_FORMAT) or a failed `send()`.
    pub errors: u64,
    /// Flushes refused because the interface was down (the frames stay in their slots and
    /// go when it is up again).
    pub down_flushes: u64,
}

impl TxCounters {
    /// Two rings' counts together.
    pub fn add(&self, o: &TxCounters) -> TxCounters {
        TxCounters {
            frames: self.frames + o.frames,
            flushes: self.flushes + o.flushes,
            errors: self.errors + o.errors,
            down_flushes: self.down_flushes + o.down_flushes,
        }
    }
}

/// What a flush's `send()` on a transmit ring or an XDP socket came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// The kernel took the request.
    Ok,
    /// It had no room or was busy (EAGAIN, EBUSY, ENOBUFS): the frames wait for the next flush.
    Busy,
    /// The interface is down or gone (ENETDOWN, ENXIO, ENODEV): the frames wait until it is up.
    Down,
    /// Any other error, counted in `TxCounters::errors`.
    Failed,
}

/// Classifies the result `r` of a flush's `send()` on `what` (read errno right after the call),
/// the same way for both kinds of transmit socket: logs the interface going down and coming up
/// again once each, keeps `down` up to date and counts refused (`down_flushes`) and failed
/// (`errors`) flushes.
pub fn after_send(r: isize, what: &str, down: &mut bool, counters: &mut TxCounters) -> Sent {
    if r >= 0 {
        if *down {
            tracing::info!("{what}'s interface is up again");
        }
        *down = false;
        return Sent::Ok;
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN | libc::EBUSY | libc::ENOBUFS) => Sent::Busy,
        Some(libc::ENETDOWN | libc::ENXIO | libc::ENODEV) => {
            if !*down {
                tracing::warn!("send on {what}: {e}; the frames wait until the interface is up");
            }
            *down = true;
            counters.down_flushes += 1;
            Sent::Down
        }
        _ => {
            tracing::warn!("send on {what}: {e}");
            counters.errors += 1;
            Sent::Failed
        }
    }
}

/// A TPACKET_V3 transmit ring of fixed slots on one interface.
pub struct TxRing {
    fd: OwnedFd,
    index: libc::c_int,
    /// The last flush found the interface down.
    down: bool,
    map: Map,
    slot: usize,
    slots: usize,
    /// The interface's MTU when the ring was opened.
    mtu: u32,
    head: usize,
    /// Slots from the head on already seen free (the kernel gives a slot back and never takes
    /// a free one): [`Self::room`] looks only past them, so each slot's status is read about
    /// once per trip round the ring instead of once per turn.
    free: usize,
    pending: usize,
    counters: TxCounters,
}

/// The MTU of `iface` as this network namespace's sysfs says (1500 when it cannot be read).
pub(super) fn mtu(iface: &str) -> u32 {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1500)
}

/// Where a frame's bytes start in a TPACKET_V3 transmit slot: TPACKET3_HDRLEN less the
/// sockaddr_ll (packet_mmap: tp_hdrlen - sizeof(struct sockaddr_ll)).
const TX_DATA: usize = libc::TPACKET3_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();

impl TxRing {
    /// Opens `iface` for sending with `slots` slots of 4 KiB, or the power of two that holds a
    /// frame of the interface's MTU (Ethernet header and one VLAN tag beside it) when that is
    /// more: 16 KiB for a jumbo MTU of 9,000 B.
    pub fn open(iface: &str, slots: u32) -> Result<TxRing, OpenError> {
        let (fd, idx) = open(iface)?;
        let io = |what, err| OpenError::Io { iface: iface.into(), what, err };
        let mtu = mtu(iface);
        let slot = (mtu as usize + 18 + TX_DATA).next_power_of_two().max(4096);
        let per_block = 16usize;
        let slots = (slots as usize).div_ceil(per_block) * per_block;
        let req = libc::tpacket_req3 {
            tp_block_size: (slot * per_block) as u32,
            tp_block_nr: (slots / per_block) as u32,
            tp_frame_size: slot as u32,
            tp_frame_nr: slots as u32,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        setopt(fd.as_raw_fd(), libc::SOL_PACKET, libc::PACKET_TX_RING, &req).map_err(|e| io("PACKET_TX_RING", e))?;
        let map = Map::new(fd.as_raw_fd(), slot * slots, iface)?;
        bind(fd.as_raw_fd(), idx, iface)?;
        Ok(TxRing {
            fd,
            index: idx,
            down: false,
            map,
            slot,
            slots,
            mtu,
            head: 0,
            free: 0,
            pending: 0,
            counters: TxCounters::default(),
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The index of the interface the ring is bound to.
    pub fn index(&self) -> libc::c_int {
        self.index
    }

    /// The last flush found the interface down (or gone): its frames wait in their slots.
    pub fn is_down(&self) -> bool {
        self.down
    }

    /// The interface's MTU when the ring was opened.
    pub fn mtu(&self) -> u32 {
        self.mtu
    }
    /// The largest frame a slot holds.
    pub fn max_frame(&self) -> u32 {
        (self.slot - TX_DATA) as u32
    }

    fn status(&self, i: usize) -> &AtomicU32 {
        // tpacket3_hdr: tp_status after next_offset, sec, nsec, snaplen, len.
        self.map.status(i * self.slot + 20)
    }

    /// Free slots from the head on, at most `max` (the frames [`Self::push`] may write now).
    pub fn room(&mut self, max: usize) -> usize {
        let max = max.min(self.slots);
        while self.free < max {
            let i = (self.head + self.free) % self.slots;
            let s = self.status(i).load(Ordering::Acquire);
            if s == libc::TP_STATUS_WRONG_FORMAT {
                self.counters.errors += 1;
                self.status(i).store(libc::TP_STATUS_AVAILABLE, Ordering::Release);
            } else if s != libc::TP_STATUS_AVAILABLE {
                break;
            }
            self.free += 1;
        }
        self.free.min(max)
    }

    /// Writes `frame` into the head slot (which [`Self::room`] said is free) and marks it for
    /// sending at the next [`Self::flush`].
    pub fn push(&mut self, frame: &[u8]) {
        let base = self.head * self.slot;
        let len = frame.len().min(self.slot - TX_DATA);
        self.map.slice_mut(base + TX_DATA, len).copy_from_slice(&frame[..len]);
        let hdr = self.map.slice_mut(base, TX_DATA);
        hdr[..20].fill(0); // next_offset (must be 0), sec, nsec, snaplen
        hdr[16..20].copy_from_slice(&(len as u32).to_ne_bytes()); // tp_len
        fence(Ordering::Release);
        self.status(self.head).store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        self.head = (self.head + 1) % self.slots;
        self.free = self.free.saturating_sub(1);
        self.pending += 1;
        self.counters.frames += 1;
    }

    /// Frames marked for sending and not yet flushed.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Asks the kernel to send every slot marked since the last flush (one system call).
    pub fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        // SAFETY: send(2) with no buffer: the kernel walks the ring.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), ptr::null(), 0, libc::MSG_DONTWAIT) };
        self.counters.flushes += 1;
        match after_send(r, "the transmit ring", &mut self.down, &mut self.counters) {
            // The slots stay requested: the next flush sends them.
            Sent::Busy | Sent::Failed => {}
            Sent::Down => {
                // The socket's own copy of the error, so that poll does not report it.
                let _ = take_error(self.fd.as_raw_fd());
            }
            Sent::Ok => self.pending = 0,
        }
    }

    pub fn counters(&self) -> TxCounters {
        self.counters
    }
}
