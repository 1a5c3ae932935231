//! AF_XDP sockets for `npqos live`'s `[live] io = "xdp"` (Linux
//! Documentation/networking/af_xdp.rst; docs/live.md, "AF_XDP"): frames leave the driver in
//! its XDP hook for our memory (the UMEM) without an skb, a packet socket's clone or a qdisc.
//!
//! Per interface one XDP program redirects every frame of a receive queue to the socket bound
//! to that queue ([`Program`]); per forwarding thread and interface one socket ([`open`]) with
//! its own UMEM, cut in two halves that each thread's loop owns apart: [`XskRx`] (the receive
//! and fill rings, frames handed over in place) and [`XskTx`] (the transmit and completion
//! rings, frames copied in). The kernel binds zero-copy where the driver can; on veth it
//! copies: there is no zero-copy veth.
//!
//! No crate fits: `xdpilone` (EUPL-1.2, copyleft) leaves the program to the caller, and `aya`
//! and `libbpf-rs` load programs from an ELF object compiled by a BPF toolchain this project
//! does not need otherwise. The program is five instructions ([`Program::INSNS`]), assembled
//! here; the rest is `bpf(2)` and the ring handshake over `libc`.

use super::ring::{self, OpenError, RxCounters, Sent, TxCounters};
use npqos_sim::live::csum::complete_if_partial;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// The largest number of queues the program's socket map holds (one per forwarding thread).
const MAX_QUEUES: u32 = npqos_sim::live::spec::MAX_THREADS as u32;

/// bpf(2) commands and types used here (include/uapi/linux/bpf.h).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_PASS: i32 = 2;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;

/// `bpf(cmd, attr)`: `attr` is the command's part of `union bpf_attr`, as 32-bit words.
fn bpf(cmd: libc::c_long, attr: &mut [u32]) -> io::Result<RawFd> {
    // SAFETY: `attr` is a valid buffer of the size given; the kernel reads (and for some
    // commands writes) within it only.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), std::mem::size_of_val(attr)) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as RawFd)
    }
}

fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: a descriptor the kernel just gave us, owned by no one else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// The low and high 32-bit words of a pointer, for `bpf_attr`'s 64-bit fields.
fn words<T>(p: *const T) -> [u32; 2] {
    let a = p as u64;
    [a as u32, (a >> 32) as u32]
}

/// An XDP program attached to one interface: every frame of receive queue `q` goes to the
/// socket at key `q` of its map (`bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`),
/// or on to the kernel's stack while there is none. Detached when dropped (its link closed).
pub struct Program {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    iface: String,
}

impl Program {
    /// The program, with `{MAP}` for the map's descriptor:
    /// `r2 = *(u32 *)(r1 + 16)` (xdp_md.rx_queue_index); `r1 = {MAP} ll`; `r3 = XDP_PASS`;
    /// `call bpf_redirect_map`; `exit`. Each instruction: opcode, registers (dst | src << 4),
    /// offset, immediate.
    const INSNS: [(u8, u8, i16, i32); 6] = [
        (0x61, 2 | 1 << 4, 16, 0),           // BPF_LDX | BPF_MEM | BPF_W
        (0x18, 1 | 1 << 4, 0, -1),           // BPF_LD | BPF_DW | BPF_IMM, BPF_PSEUDO_MAP_FD
        (0, 0, 0, 0),                        // its upper half
        (0xb7, 3, 0, XDP_PASS),              // BPF_ALU64 | BPF_MOV | BPF_K
        (0x85, 0, 0, BPF_FUNC_REDIRECT_MAP), // BPF_JMP | BPF_CALL
        (0x95, 0, 0, 0),                     // BPF_JMP | BPF_EXIT
    ];

    /// Loads the program and attaches it to `iface` (the driver's hook where it has one, as on
    /// veth, else the kernel's generic one).
    pub fn attach(iface: &str) -> Result<Program, OpenError> {
        let io = |what, err| OpenError::Io { iface: iface.into(), what, err };
        let index = ring::index_of(iface).ok_or_else(|| OpenError::NoInterface(iface.into()))?;
        // map_type, key_size, value_size, max_entries, map_flags, then the rest zero.
        let mut attr = [0u32; 18];
        attr[..4].copy_from_slice(&[BPF_MAP_TYPE_XSKMAP, 4, 4, MAX_QUEUES]);
        let map = owned(bpf(BPF_MAP_CREATE, &mut attr).map_err(|e| io("creating the XDP socket map", bpf_hint(e)))?);
        let insns: Vec<u64> = Self::INSNS
            .iter()
            .map(|&(code, regs, off, imm)| {
                let imm = if imm == -1 { map.as_raw_fd() } else { imm };
                code as u64 | (regs as u64) << 8 | (off as u16 as u64) << 16 | (imm as u32 as u64) << 32
            })
            .collect();
        let license = c"GPL";
        let mut log = vec![0u8; 4096];
        // prog_type, insn_cnt, insns, license, log_level, log_size, log_buf, kern_version,
        // prog_flags, prog_name[16], prog_ifindex, expected_attach_type.
        let mut attr = [0u32; 30];
        attr[0] = BPF_PROG_TYPE_XDP;
        attr[1] = insns.len() as u32;
        attr[2..4].copy_from_slice(&words(insns.as_ptr()));
        attr[4..6].copy_from_slice(&words(license.as_ptr()));
        attr[6] = 1;
        attr[7] = log.len() as u32;
        attr[8..10].copy_from_slice(&words(log.as_mut_ptr()));
        let name = b"npqos_xsk\0\0\0\0\0\0\0";
        for (k, w) in name.chunks(4).enumerate() {
            attr[12 + k] = u32::from_ne_bytes(w.try_into().expect("4 bytes"));
        }
        attr[17] = BPF_XDP;
        let prog = bpf(BPF_PROG_LOAD, &mut attr).map_err(|e| {
            let said = String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)]).into_owned();
            io("loading the XDP program", io::Error::new(e.kind(), format!("{e}; the verifier said: {said}")))
        })?;
        let prog = owned(prog);
        // prog_fd, target_ifindex, attach_type, flags.
        let mut attr = [0u32; 12];
        attr[..4].copy_from_slice(&[prog.as_raw_fd() as u32, index as u32, BPF_XDP, 0]);
        let link = bpf(BPF_LINK_CREATE, &mut attr).map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::EBUSY) | Some(libc::EEXIST) => {
                    format!("{e} (another XDP program is attached: `ip link set dev {iface} xdp off`)")
                }
                Some(libc::ERANGE) => format!("{e} (veth takes XDP only with the peer's MTU at most about 3,500 B)"),
                _ => e.to_string(),
            };
            io("attaching the XDP program", io::Error::new(e.kind(), why))
        })?;
        Ok(Program { map, _prog: prog, _link: owned(link), iface: iface.into() })
    }

    /// Sends the frames of receive queue `queue` to socket `fd` from now on.
    fn insert(&self, queue: u32, fd: RawFd) -> Result<(), OpenError> {
        let (key, value) = (queue, fd as u32);
        // map_fd, pad, key, value, flags (BPF_ANY).
        let mut attr = [0u32; 8];
        attr[0] = self.map.as_raw_fd() as u32;
        attr[2..4].copy_from_slice(&words(&key));
        attr[4..6].copy_from_slice(&words(&value));
        bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop).map_err(|err| OpenError::Io {
            iface: self.iface.clone(),
            what: "adding the socket to the XDP map",
            err,
        })
    }
}

/// What to say when bpf(2) is refused.
fn bpf_hint(e: io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(libc::EPERM) => {
            io::Error::new(e.kind(), format!("{e} (XDP needs CAP_BPF and CAP_NET_ADMIN: run as root)"))
        }
        _ => e,
    }
}

/// A shared mapping, unmapped on drop.
struct Mmap {
    ptr: *mut u8,
    len: usize,
}

impl Mmap {
    fn new(fd: RawFd, len: usize, offset: u64, flags: libc::c_int) -> io::Result<Mmap> {
        // SAFETY: a new mapping of `len` bytes; the kernel checks `fd` and `offset`.
        let p = unsafe {
            libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset as libc::off_t)
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap { ptr: p as *mut u8, len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what new() mapped.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

// SAFETY: a mapping is plain memory; who writes where is the rings' protocol (each half of a
// socket touches only its own rings and its own frames).
unsafe impl Send for Mmap {}
unsafe impl Sync for Mmap {}

/// One of a socket's four rings: free-running producer and consumer indices the kernel and we
/// share, and the entries (`xdp_desc` of 16 B, or UMEM addresses of 8 B).
struct Ring {
    map: Mmap,
    producer: usize,
    consumer: usize,
    flags: usize,
    desc: usize,
    mask: u32,
    /// Our index (the producer's for the fill and transmit rings, the consumer's for the
    /// receive and completion rings), ahead of the shared one until published.
    head: u32,
}

impl Ring {
    fn open(fd: RawFd, off: &libc::xdp_ring_offset, entries: u32, size: usize, pgoff: u64) -> io::Result<Ring> {
        let len = off.desc as usize + entries as usize * size;
        let map = Mmap::new(fd, len, pgoff, libc::MAP_SHARED | libc::MAP_POPULATE)?;
        let r = Ring {
            map,
            producer: off.producer as usize,
            consumer: off.consumer as usize,
            flags: off.flags as usize,
            desc: off.desc as usize,
            mask: entries - 1,
            head: 0,
        };
        Ok(r)
    }
    fn word(&self, at: usize) -> &AtomicU32 {
        // SAFETY: the kernel's offsets, aligned, inside the mapping; shared, hence atomic.
        unsafe { &*(self.map.ptr.add(at) as *const AtomicU32) }
    }
    fn producer(&self) -> &AtomicU32 {
        self.word(self.producer)
    }
    fn consumer(&self) -> &AtomicU32 {
        self.word(self.consumer)
    }
    fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
    /// Entry `i`'s address (entries of `size` bytes).
    fn entry(&self, i: u32, size: usize) -> *mut u8 {
        // SAFETY: masked into the ring's entries, inside the mapping.
        unsafe { self.map.ptr.add(self.desc + (i & self.mask) as usize * size) }
    }
}

/// The UMEM: `frames` chunks of `chunk` bytes, the first `rx` the receive half's.
struct Umem {
    area: Mmap,
    chunk: usize,
}

impl Umem {
    /// Chunk bytes at `addr`: the receive side's frame (its chunk handed over by the receive
    /// ring) or the transmit side's (a free chunk), each owned by one half; the mapping is
    /// shared memory the kernel writes too, so the halves reach it through a raw pointer.
    #[allow(clippy::mut_from_ref)]
    fn slice(&self, addr: u64, len: usize) -> &mut [u8] {
        let at = addr as usize;
        assert!(at + len <= self.area.len, "frame inside the UMEM");
        // SAFETY: in bounds; the chunk is ours (handed over by the receive ring, or free on
        // the transmit side) until given back.
        unsafe { std::slice::from_raw_parts_mut(self.area.ptr.add(at), len) }
    }
}

/// The receive half of a socket: frames from its interface's queue, in place.
pub struct XskRx {
    fd: Arc<OwnedFd>,
    umem: Arc<Umem>,
    rx: Ring,
    fill: Ring,
    index: libc::c_int,
    counters: RxCounters,
    _program: Arc<Program>,
}

/// The transmit half: frames copied into free chunks, sent at [`XskTx::flush`].
pub struct XskTx {
    fd: Arc<OwnedFd>,
    umem: Arc<Umem>,
    tx: Ring,
    completion: Ring,
    /// Chunks not in the kernel's hands.
    free: Vec<u64>,
    /// Frames written since the last flush, and those published and not yet taken.
    pending: usize,
    index: libc::c_int,
    mtu: u32,
    down: bool,
    counters: TxCounters,
}

/// Frames per receive batch ([`XskRx::next_block`]).
const RX_BATCH: u32 = 256;

/// Opens a socket on `iface`'s receive queue `queue`: both halves with `program` (attached to
/// `iface`), else the transmit half alone. `rx_frames` and `tx_frames` are rounded up to
/// powers of two.
pub fn open(
    iface: &str,
    queue: u32,
    program: Option<&Arc<Program>>,
    rx_frames: u32,
    tx_frames: u32,
) -> Result<(Option<XskRx>, XskTx), OpenError> {
    let io = |what, err| OpenError::Io { iface: iface.into(), what, err };
    let index = ring::index_of(iface).ok_or_else(|| OpenError::NoInterface(iface.into()))?;
    let mtu = ring::mtu(iface);
    // Copy mode places a frame XDP_PACKET_HEADROOM (256 B) into its chunk; a chunk is at most
    // a page.
    let chunk = if mtu as usize + 18 + 256 <= 2048 { 2048 } else { 4096 };
    if mtu as usize + 18 + 256 > chunk {
        let e = io::Error::other(format!("MTU {mtu} B: io = \"xdp\" takes frames up to 3,822 B (use io = \"ring\")"));
        return Err(io("sizing the UMEM", e));
    }
    let rx_n = if program.is_some() { rx_frames.next_power_of_two().max(64) } else { 64 };
    let tx_n = tx_frames.next_power_of_two().max(64);
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW, 0) };
    if fd < 0 {
        return Err(io("socket(AF_XDP)", bpf_hint(io::Error::last_os_error())));
    }
    let fd = owned(fd);
    let frames = (rx_n + tx_n) as usize;
    let area = Mmap::new(-1, frames * chunk, 0, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE)
        .map_err(|e| io("allocating the UMEM", e))?;
    let reg = libc::xdp_umem_reg {
        addr: area.ptr as u64,
        len: area.len as u64,
        chunk_size: chunk as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    let raw = fd.as_raw_fd();
    setopt(raw, libc::XDP_UMEM_REG, &reg).map_err(|e| io("XDP_UMEM_REG", e))?;
    setopt(raw, libc::XDP_UMEM_FILL_RING, &rx_n).map_err(|e| io("XDP_UMEM_FILL_RING", e))?;
    setopt(raw, libc::XDP_UMEM_COMPLETION_RING, &tx_n).map_err(|e| io("XDP_UMEM_COMPLETION_RING", e))?;
    if program.is_some() {
        setopt(raw, libc::XDP_RX_RING, &rx_n).map_err(|e| io("XDP_RX_RING", e))?;
    }
    setopt(raw, libc::XDP_TX_RING, &tx_n).map_err(|e| io("XDP_TX_RING", e))?;
    // SAFETY: xdp_mmap_offsets is plain data.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: `off` is a valid out buffer of `len` bytes.
    let r = unsafe {
        libc::getsockopt(raw, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS, &mut off as *mut _ as *mut libc::c_void, &mut len)
    };
    if r < 0 {
        return Err(io("XDP_MMAP_OFFSETS", io::Error::last_os_error()));
    }
    let map = |what, o, n, size, pg| Ring::open(raw, o, n, size, pg).map_err(|e| io(what, e));
    let mut fill = map("mmap of the fill ring", &off.fr, rx_n, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
    let completion = map("mmap of the completion ring", &off.cr, tx_n, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
    let tx = map("mmap of the transmit ring", &off.tx, tx_n, 16, libc::XDP_PGOFF_TX_RING as u64)?;
    let rx = match program {
        Some(_) => Some(map("mmap of the receive ring", &off.rx, rx_n, 16, libc::XDP_PGOFF_RX_RING as u64)?),
        None => None,
    };
    // Every receive chunk to the kernel before the bind.
    for i in 0..rx_n {
        // SAFETY: an 8-byte entry of the fill ring, ours to write until published.
        unsafe { ptr::write(fill.entry(i, 8) as *mut u64, i as u64 * chunk as u64) };
    }
    fill.head = rx_n;
    fill.producer().store(rx_n, Ordering::Release);
    // SAFETY: sockaddr_xdp is plain data.
    let mut sxdp: libc::sockaddr_xdp = unsafe { std::mem::zeroed() };
    sxdp.sxdp_family = libc::AF_XDP as u16;
    // Neither XDP_COPY nor XDP_ZEROCOPY: the kernel binds zero-copy where the driver has it
    // (a NIC's), else falls back to copying (veth).
    sxdp.sxdp_flags = libc::XDP_USE_NEED_WAKEUP;
    sxdp.sxdp_ifindex = index as u32;
    sxdp.sxdp_queue_id = queue;
    // SAFETY: `sxdp` is a valid sockaddr_xdp of the size given.
    let r = unsafe {
        libc::bind(raw, &sxdp as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_xdp>() as u32)
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        let queues = rx_queues(iface);
        let e = if e.raw_os_error() == Some(libc::EINVAL) && queue as usize >= queues {
            io::Error::other(format!(
                "{e}: forwarding thread {queue} needs receive queue {queue}, and {iface} has {queues} \
                 (veth: `ip link add ... numrxqueues N numtxqueues N`; or fewer threads)"
            ))
        } else {
            e
        };
        return Err(io("binding the XDP socket", e));
    }
    let zero_copy = options(raw) & libc::XDP_OPTIONS_ZEROCOPY != 0;
    let mode = if zero_copy { "zero-copy" } else { "copy" };
    tracing::debug!("AF_XDP socket on {iface:?} queue {queue}: {mode} mode, chunks of {chunk} B");
    let fd = Arc::new(fd);
    let umem = Arc::new(Umem { area, chunk });
    let rx = match (program, rx) {
        (Some(p), Some(rx)) => {
            p.insert(queue, raw)?;
            Some(XskRx {
                fd: fd.clone(),
                umem: umem.clone(),
                rx,
                fill,
                index,
                counters: RxCounters::default(),
                _program: p.clone(),
            })
        }
        _ => None,
    };
    let free = (rx_n..rx_n + tx_n).rev().map(|i| i as u64 * chunk as u64).collect();
    let tx =
        XskTx { fd, umem, tx, completion, free, pending: 0, index, mtu, down: false, counters: TxCounters::default() };
    Ok((rx, tx))
}

/// The receive queues of `iface` in this namespace, as sysfs lists them (0 if it cannot).
pub fn rx_queues(iface: &str) -> usize {
    std::fs::read_dir(format!("/sys/class/net/{iface}/queues"))
        .map(|d| d.flatten().filter(|q| q.file_name().to_string_lossy().starts_with("rx-")).count())
        .unwrap_or(0)
}

/// The bound socket's XDP_OPTIONS (XDP_OPTIONS_ZEROCOPY when the kernel did not copy).
fn options(fd: RawFd) -> u32 {
    let mut o: u32 = 0;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // SAFETY: `o` is a valid out buffer of `len` bytes.
    let r = unsafe {
        libc::getsockopt(fd, libc::SOL_XDP, libc::XDP_OPTIONS, &mut o as *mut _ as *mut libc::c_void, &mut len)
    };
    if r == 0 {
        o
    } else {
        0
    }
}

fn setopt<T>(fd: RawFd, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live T of the given size.
    let r = unsafe {
        libc::setsockopt(fd, libc::SOL_XDP, opt, v as *const T as *const libc::c_void, std::mem::size_of::<T>() as u32)
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A receive descriptor: the frame's UMEM address and length.
fn desc(ring: &Ring, i: u32) -> (u64, usize) {
    let p = ring.entry(i, 16);
    // SAFETY: a 16-byte xdp_desc the kernel published (its producer index read with Acquire).
    unsafe { (ptr::read(p as *const u64), ptr::read(p.add(8) as *const u32) as usize) }
}

impl XskRx {
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn index(&self) -> libc::c_int {
        self.index
    }

    /// Takes the socket's pending error, if any (counted).
    pub fn take_error(&mut self) -> Option<io::Error> {
        let e = ring::take_error(self.fd.as_raw_fd())?;
        self.counters.socket_errors += 1;
        Some(e)
    }

    /// Has the kernel handed over a frame not yet taken?
    pub fn ready(&self) -> bool {
        self.rx.producer().load(Ordering::Acquire) != self.rx.head
    }

    /// Hands up to 256 frames to `f(frame, 0, [next, after])` as [`ring::RxRing::next_block`]
    /// does (no timestamp), and gives their chunks back to the kernel; returns how many. A
    /// frame's partial checksum (a sender's offload; AF_XDP does not say which) is completed
    /// where its field holds the pseudo-header's sum ([`complete_if_partial`]).
    pub fn next_block(&mut self, mut f: impl FnMut(&[u8], u64, [&[u8]; 2])) -> usize {
        let end = self.rx.producer().load(Ordering::Acquire);
        let n = end.wrapping_sub(self.rx.head).min(RX_BATCH);
        if n == 0 {
            return 0;
        }
        let head = self.rx.head;
        let umem = &*self.umem;
        let frame = |i: u32| {
            let (addr, len) = desc(&self.rx, head.wrapping_add(i));
            umem.slice(addr, len)
        };
        for i in 0..n {
            // The frame after the look-ahead's two: its first bytes (the kernel wrote them on
            // the CPU that received it) start coming while these are worked on.
            if i + 3 < n {
                npqos_core::hint::prefetch(frame(i + 3), 0);
            }
            let this = frame(i);
            self.counters.checksums_completed += complete_if_partial(this) as u64;
            let ahead = [1, 2].map(|k| if i + k < n { &*frame(i + k) } else { &[][..] });
            f(this, 0, ahead);
        }
        // The chunks back to the fill ring (it holds every receive chunk, so there is room).
        let chunk = umem.chunk as u64;
        for i in 0..n {
            let (addr, _) = desc(&self.rx, head.wrapping_add(i));
            // SAFETY: an 8-byte fill entry, ours until published.
            unsafe { ptr::write(self.fill.entry(self.fill.head.wrapping_add(i), 8) as *mut u64, addr & !(chunk - 1)) };
        }
        self.rx.head = head.wrapping_add(n);
        self.rx.consumer().store(self.rx.head, Ordering::Release);
        self.fill.head = self.fill.head.wrapping_add(n);
        self.fill.producer().store(self.fill.head, Ordering::Release);
        if self.fill.needs_wakeup() {
            // SAFETY: recvfrom(2) with no buffer wakes the driver to refill (af_xdp.rst).
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            };
        }
        self.counters.frames += n as u64;
        self.counters.blocks += 1;
        n as usize
    }

    /// Counters, with the kernel's drops (no free chunk, a full receive ring) up to now.
    pub fn counters(&mut self) -> RxCounters {
        // SAFETY: xdp_statistics is plain data.
        let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `st` is a valid out buffer of `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd(),
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                &mut st as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        let mut c = self.counters;
        if r == 0 {
            // The kernel's counts are totals since the bind.
            c.ring_drops = st.rx_dropped + st.rx_ring_full;
        }
        c
    }
}

impl XskTx {
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn index(&self) -> libc::c_int {
        self.index
    }

    /// The last flush found the interface down: its frames wait in the ring.
    pub fn is_down(&self) -> bool {
        self.down
    }

    pub fn mtu(&self) -> u32 {
        self.mtu
    }

    /// The largest frame a chunk holds.
    pub fn max_frame(&self) -> u32 {
        (self.umem.chunk - 256) as u32
    }

    /// Chunks the kernel has sent, back to the free list.
    fn reclaim(&mut self) {
        let end = self.completion.producer().load(Ordering::Acquire);
        let n = end.wrapping_sub(self.completion.head);
        for i in 0..n {
            // SAFETY: an 8-byte completion entry the kernel published.
            let addr =
                unsafe { ptr::read(self.completion.entry(self.completion.head.wrapping_add(i), 8) as *const u64) };
            self.free.push(addr);
        }
        if n > 0 {
            self.completion.head = end;
            self.completion.consumer().store(end, Ordering::Release);
        }
    }

    /// Frames [`Self::push`] may write now, at most `max`.
    pub fn room(&mut self, max: usize) -> usize {
        if self.free.len() < max {
            self.reclaim();
        }
        self.free.len().min(max)
    }

    /// Copies `frame` into a free chunk (one [`Self::room`] counted) and queues it.
    pub fn push(&mut self, frame: &[u8]) {
        let addr = self.free.pop().expect("room() said a chunk is free");
        let len = frame.len().min(self.max_frame() as usize);
        self.umem.slice(addr, len).copy_from_slice(&frame[..len]);
        let p = self.tx.entry(self.tx.head, 16);
        // SAFETY: a 16-byte transmit entry, ours until published (the ring has as many entries
        // as there are transmit chunks, and this chunk was free).
        unsafe {
            ptr::write(p as *mut u64, addr);
            ptr::write(p.add(8) as *mut u32, len as u32);
            ptr::write(p.add(12) as *mut u32, 0);
        }
        self.tx.head = self.tx.head.wrapping_add(1);
        self.pending += 1;
        self.counters.frames += 1;
    }

    /// Frames queued and not yet taken by the kernel.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Publishes the queued frames and has the kernel send them: in copy mode it takes at
    /// most 32 per `sendto`, so this calls it until the ring is empty or the kernel stops
    /// taking them.
    pub fn flush(&mut self) {
        if self.pending == 0 {
            return;
        }
        self.tx.producer().store(self.tx.head, Ordering::Release);
        loop {
            let before = self.tx.consumer().load(Ordering::Acquire);
            // SAFETY: sendto(2) with no buffer: the kernel walks the transmit ring.
            let r = unsafe { libc::sendto(self.fd(), ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
            self.counters.flushes += 1;
            let after = self.tx.consumer().load(Ordering::Acquire);
            self.pending = self.tx.head.wrapping_sub(after) as usize;
            match ring::after_send(r, "the XDP socket", &mut self.down, &mut self.counters) {
                Sent::Down | Sent::Failed => return,
                Sent::Ok | Sent::Busy => {}
            }
            if self.pending == 0 || after == before {
                return;
            }
        }
    }

    pub fn counters(&self) -> TxCounters {
        self.counters
    }
}
