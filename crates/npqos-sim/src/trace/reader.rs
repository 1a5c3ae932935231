//! Streaming reader of classic pcap and pcapng files, in constant memory.
//!
//! One reusable record buffer and a `BufReader` are all the state kept, so a 1 GB capture is
//! read in a few hundred kilobytes of memory. Supported:
//!
//! * classic pcap, microsecond (`0xa1b2c3d4`) and nanosecond (`0xa1b23c4d`) magic, both byte
//!   orders;
//! * pcapng: any number of sections (each with its own byte order) and interfaces, per-interface
//!   `if_tsresol` (decimal or binary) and `if_tsoffset`; Enhanced, Simple and obsolete Packet
//!   blocks; every other block type is skipped by its length.
//!
//! **Errors.** A malformed file never panics. Structural problems (bad magic, truncated global
//! header, an empty file) are always errors. A corrupt record is an error naming the file and
//! the byte offset of the record, unless the reader is *lenient*: then the record is skipped
//! and counted in [`ReaderCounters`], and if the file cannot be resynchronised after it (a
//! truncated tail, an absurd length) the rest of the file is abandoned and that is counted too.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

/// Records larger than this are corrupt, whatever the header's snap length says (Wireshark
/// uses the same kind of cap). Keeps a garbage length from allocating gigabytes.
pub const MAX_RECORD_BYTES: u32 = 16 * 1024 * 1024;

/// Classic pcap link-layer types we decode (values from the tcpdump LINKTYPE registry).
pub mod linktype {
    pub const NULL: u16 = 0;
    pub const ETHERNET: u16 = 1;
    pub const RAW: u16 = 101;
    pub const LOOP: u16 = 108;
    pub const LINUX_SLL: u16 = 113;
    pub const IPV4: u16 = 228;
    pub const IPV6: u16 = 229;
    pub const LINUX_SLL2: u16 = 276;
    /// Human name of a link type, for reports.
    pub fn name(l: u16) -> String {
        match l {
            NULL => "null".into(),
            ETHERNET => "ethernet".into(),
            RAW | 12 | 14 => "raw".into(),
            LOOP => "loop".into(),
            LINUX_SLL => "linux_sll".into(),
            IPV4 => "ipv4".into(),
            IPV6 => "ipv6".into(),
            LINUX_SLL2 => "linux_sll2".into(),
            other => format!("linktype_{other}"),
        }
    }
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: byte {offset}: {what}")]
    Format { path: PathBuf, offset: u64, what: String },
}

impl TraceError {
    /// True when the problem is the file's content (bad input), false for I/O failures.
    pub fn is_bad_input(&self) -> bool {
        match self {
            TraceError::Format { .. } => true,
            TraceError::Io { source, .. } => matches!(
                source.kind(),
                io::ErrorKind::NotFound
                    | io::ErrorKind::PermissionDenied
                    | io::ErrorKind::IsADirectory
                    | io::ErrorKind::InvalidData
            ),
        }
    }
}

/// The container format of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    PcapMicro,
    PcapNano,
    Pcapng,
}

/// Counters of what a lenient reader skipped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReaderCounters {
    /// Corrupt records skipped (lenient mode only).
    pub corrupt_skipped: u64,
    /// True if the rest of the file was abandoned after a corrupt record (lenient mode only).
    pub abandoned_tail: bool,
}

/// One captured packet as stored in the file (a borrowed view).
#[derive(Clone, Copy, Debug)]
pub struct Record<'a> {
    /// Capture timestamp in nanoseconds since the Unix epoch.
    pub ts_ns: u64,
    /// Length of the packet on the wire ("original length").
    pub orig_len: u32,
    /// Link-layer type of the interface it was captured on.
    pub link: u16,
    /// The captured bytes (at most the snap length).
    pub data: &'a [u8],
    /// Byte offset of the record in the file.
    pub offset: u64,
}

#[derive(Clone, Copy, Debug)]
enum TsResol {
    /// Units of 10^-n seconds.
    Dec(u8),
    /// Units of 2^-n seconds.
    Bin(u8),
}

#[derive(Clone, Copy, Debug)]
struct Iface {
    link: u16,
    snaplen: u32,
    resol: TsResol,
    offset_s: i64,
}

enum Kind {
    Classic { be: bool, nanos: bool, snaplen: u32, link: u16 },
    Ng { be: bool, ifaces: Vec<Iface> },
}

/// A streaming reader of one pcap or pcapng file.
pub struct TraceReader<R: Read = BufReader<File>> {
    r: R,
    path: PathBuf,
    offset: u64,
    kind: Kind,
    format: Format,
    buf: Vec<u8>,
    lenient: bool,
    counters: ReaderCounters,
    done: bool,
}

impl TraceReader<BufReader<File>> {
    /// Opens `path` and reads its file header.
    pub fn open(path: &Path, lenient: bool) -> Result<Self, TraceError> {
        let f = File::open(path).map_err(|e| TraceError::Io { path: path.to_owned(), source: e })?;
        if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            return Err(TraceError::Format {
                path: path.to_owned(),
                offset: 0,
                what: "is a directory, expected a pcap or pcapng file".into(),
            });
        }
        Self::new(BufReader::with_capacity(256 * 1024, f), path, lenient)
    }
}

const PCAPNG_SHB: u32 = 0x0A0D_0D0A;
const PCAPNG_BOM: u32 = 0x1A2B_3C4D;

/// A record found in the file: its time, wire length and link type, where it starts (for
/// messages), and where its captured bytes are in the read buffer (`start`, `len` bytes).
struct Found {
    ts_ns: u64,
    orig_len: u32,
    link: u16,
    offset: u64,
    start: usize,
    len: usize,
}

impl<R: Read> TraceReader<R> {
    /// Reads the file header from `r`; `path` is used in messages only.
    pub fn new(mut r: R, path: &Path, lenient: bool) -> Result<Self, TraceError> {
        let path = path.to_owned();
        let mut magic = [0u8; 4];
        let n = read_full(&mut r, &mut magic).map_err(|e| TraceError::Io { path: path.clone(), source: e })?;
        let fmt_err = |offset: u64, what: String| TraceError::Format { path: path.clone(), offset, what };
        if n == 0 {
            return Err(fmt_err(0, "empty file, expected a pcap or pcapng header".into()));
        }
        if n < 4 {
            return Err(fmt_err(0, format!("file of {n} bytes is too short for a pcap or pcapng header")));
        }
        let m_le = u32::from_le_bytes(magic);
        let (kind, format, offset) = match m_le {
            0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 => {
                let be = matches!(m_le, 0xd4c3_b2a1 | 0x4d3c_b2a1);
                let nanos = matches!(m_le, 0xa1b2_3c4d | 0x4d3c_b2a1);
                let mut rest = [0u8; 20];
                let got = read_full(&mut r, &mut rest).map_err(|e| TraceError::Io { path: path.clone(), source: e })?;
                if got < 20 {
                    return Err(fmt_err(
                        4 + got as u64,
                        format!("truncated pcap global header: {} of 24 bytes", 4 + got),
                    ));
                }
                let major = u16v(&rest[0..2], be);
                if major != 2 {
                    return Err(fmt_err(4, format!("unsupported pcap version {major}, expected 2")));
                }
                let snaplen = u32v(&rest[12..16], be);
                let link = (u32v(&rest[16..20], be) & 0x0FFF_FFFF) as u16;
                let format = if nanos { Format::PcapNano } else { Format::PcapMicro };
                (Kind::Classic { be, nanos, snaplen, link }, format, 24)
            }
            PCAPNG_SHB => (Kind::Ng { be: false, ifaces: Vec::new() }, Format::Pcapng, 4),
            _ => {
                return Err(fmt_err(
                    0,
                    format!(
                        "unknown magic number 0x{:08x}: not a pcap (a1b2c3d4 / a1b23c4d) or pcapng (0a0d0d0a) file",
                        u32::from_be_bytes(magic)
                    ),
                ))
            }
        };
        let mut me = TraceReader {
            r,
            path,
            offset,
            kind,
            format,
            buf: Vec::new(),
            lenient,
            counters: ReaderCounters::default(),
            done: false,
        };
        if format == Format::Pcapng {
            // Re-enter the SHB parser with the 4 magic bytes already consumed.
            me.buf.clear();
            me.buf.extend_from_slice(&magic);
            me.read_ng_block_after_type(true)?;
        }
        Ok(me)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
    pub fn format(&self) -> Format {
        self.format
    }
    pub fn counters(&self) -> ReaderCounters {
        self.counters
    }
    /// Link type of a classic pcap file, or of the first pcapng interface seen so far.
    pub fn first_link(&self) -> Option<u16> {
        match &self.kind {
            Kind::Classic { link, .. } => Some(*link),
            Kind::Ng { ifaces, .. } => ifaces.first().map(|i| i.link),
        }
    }

    fn fmt_err(&self, offset: u64, what: String) -> TraceError {
        TraceError::Format { path: self.path.clone(), offset, what }
    }
    fn io_err(&self, e: io::Error) -> TraceError {
        TraceError::Io { path: self.path.clone(), source: e }
    }

    /// Handles a corrupt record: an error, or in lenient mode a counted skip. `resync` says
    /// whether reading can go on after it.
    fn corrupt(&mut self, offset: u64, what: String, resync: bool) -> Result<(), TraceError> {
        if !self.lenient {
            self.done = true;
            return Err(self.fmt_err(offset, what));
        }
        self.counters.corrupt_skipped += 1;
        if !resync {
            self.counters.abandoned_tail = true;
            self.done = true;
        }
        Ok(())
    }

    /// Reads exactly `n` bytes into `self.buf` (replacing it). Returns the count read, which is
    /// less than `n` only at end of file.
    fn fill(&mut self, n: usize) -> Result<usize, TraceError> {
        self.buf.clear();
        self.buf.resize(n, 0);
        let got = read_full(&mut self.r, &mut self.buf).map_err(|e| self.io_err(e))?;
        self.offset += got as u64;
        Ok(got)
    }

    fn skip(&mut self, n: u64) -> Result<u64, TraceError> {
        let got = io::copy(&mut (&mut self.r).take(n), &mut io::sink()).map_err(|e| self.io_err(e))?;
        self.offset += got;
        Ok(got)
    }

    /// The next packet record, or `None` at the end of the file.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Record<'_>>, TraceError> {
        loop {
            if self.done {
                return Ok(None);
            }
            let found = match self.kind {
                Kind::Classic { .. } => self.next_classic()?,
                Kind::Ng { .. } => self.next_ng()?,
            };
            if let Some(Found { ts_ns, orig_len, link, offset, start, len }) = found {
                return Ok(Some(Record { ts_ns, orig_len, link, data: &self.buf[start..start + len], offset }));
            }
            // None with !done: a skipped record or non-packet block; go on.
        }
    }

    /// Returns (ts, orig_len, link, offset, data start, data len) of a good record; `None` for a
    /// skipped one or end of file (then `done` is set).
    #[allow(clippy::type_complexity)]
    fn next_classic(&mut self) -> Result<Option<Found>, TraceError> {
        let Kind::Classic { be, nanos, snaplen, link } = self.kind else { unreachable!() };
        let rec_off = self.offset;
        let got = self.fill(16)?;
        if got == 0 {
            self.done = true;
            return Ok(None);
        }
        if got < 16 {
            self.corrupt(rec_off, format!("truncated record header: {got} of 16 bytes"), false)?;
            return Ok(None);
        }
        let h = &self.buf[..16];
        let sec = u32v(&h[0..4], be) as u64;
        let frac = u32v(&h[4..8], be) as u64;
        let caplen = u32v(&h[8..12], be);
        let origlen = u32v(&h[12..16], be);
        let limit = if snaplen == 0 { MAX_RECORD_BYTES } else { snaplen.min(MAX_RECORD_BYTES) };
        if caplen > limit {
            let why = if caplen > MAX_RECORD_BYTES {
                format!("captured length {caplen} exceeds the maximum record size {MAX_RECORD_BYTES}")
            } else {
                format!("captured length {caplen} exceeds the snap length {snaplen} of the file header")
            };
            // A length up to the record cap can be skipped over; beyond it, nothing can be trusted.
            let resync = caplen <= MAX_RECORD_BYTES;
            self.corrupt(rec_off, why, resync)?;
            if resync && self.skip(caplen as u64)? < caplen as u64 {
                self.counters.abandoned_tail = true;
                self.done = true;
            }
            return Ok(None);
        }
        let got = self.fill(caplen as usize)?;
        if got < caplen as usize {
            self.corrupt(rec_off, format!("truncated record: {got} of {caplen} captured bytes present"), false)?;
            return Ok(None);
        }
        let ts = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        Ok(Some(Found { ts_ns: ts, orig_len: origlen, link, offset: rec_off, start: 0, len: caplen as usize }))
    }

    fn next_ng(&mut self) -> Result<Option<Found>, TraceError> {
        let blk_off = self.offset;
        let got = self.fill(4)?;
        if got == 0 {
            self.done = true;
            return Ok(None);
        }
        if got < 4 {
            self.corrupt(blk_off, format!("truncated block header: {got} of 8 bytes"), false)?;
            return Ok(None);
        }
        let is_shb = u32::from_le_bytes(self.buf[..4].try_into().expect("4 bytes")) == PCAPNG_SHB;
        self.read_ng_block_after_type(is_shb)
    }

    /// Reads the block whose 4 type bytes are in `self.buf[..4]` (already consumed): checks its
    /// framing, then hands its body to [`Self::ng_body`].
    fn read_ng_block_after_type(&mut self, is_shb: bool) -> Result<Option<Found>, TraceError> {
        let blk_off = self.offset - 4;
        let type_bytes: [u8; 4] = self.buf[..4].try_into().expect("4 bytes");
        let mut lenb = [0u8; 4];
        let got = read_full(&mut self.r, &mut lenb).map_err(|e| self.io_err(e))?;
        self.offset += got as u64;
        if got < 4 {
            if is_shb && blk_off == 0 {
                return Err(self.fmt_err(blk_off, "truncated pcapng section header block".into()));
            }
            self.corrupt(blk_off, "truncated block header: no length".into(), false)?;
            return Ok(None);
        }
        let mut be = match &self.kind {
            Kind::Ng { be, .. } => *be,
            Kind::Classic { .. } => unreachable!(),
        };
        if is_shb {
            // The byte-order magic follows the length; peek it to learn this section's order.
            let mut bom = [0u8; 4];
            let got = read_full(&mut self.r, &mut bom).map_err(|e| self.io_err(e))?;
            self.offset += got as u64;
            if got < 4 {
                return Err(self.fmt_err(blk_off, "truncated pcapng section header block".into()));
            }
            be = match u32::from_le_bytes(bom) {
                PCAPNG_BOM => false,
                x if x.swap_bytes() == PCAPNG_BOM => true,
                x => {
                    return Err(
                        self.fmt_err(blk_off + 8, format!("bad pcapng byte-order magic 0x{x:08x}, expected 1a2b3c4d"))
                    )
                }
            };
            if let Kind::Ng { be: b, ifaces } = &mut self.kind {
                *b = be;
                ifaces.clear(); // interface ids are per section
            }
        }
        let btype = u32v(&type_bytes, be);
        let total = u32v(&lenb, be);
        let already = if is_shb { 12 } else { 8 };
        if total < 12 || !total.is_multiple_of(4) || total > MAX_RECORD_BYTES + 64 {
            let what = format!(
                "bad pcapng block length {total} (block type 0x{btype:08x}): must be a multiple of 4 between 12 and {}",
                MAX_RECORD_BYTES + 64
            );
            if is_shb && blk_off == 0 {
                return Err(self.fmt_err(blk_off, what));
            }
            self.corrupt(blk_off, what, false)?;
            return Ok(None);
        }
        if (total as usize) < already + 4 {
            self.corrupt(
                blk_off,
                format!("pcapng block length {total} too small for block type 0x{btype:08x}"),
                false,
            )?;
            return Ok(None);
        }
        // Body (after what was consumed) plus the trailing length.
        let rest = total as usize - already;
        let got = self.fill(rest)?;
        if got < rest {
            if is_shb && blk_off == 0 {
                return Err(self.fmt_err(
                    blk_off,
                    format!("truncated pcapng section header block: {} of {total} bytes", already + got),
                ));
            }
            self.corrupt(blk_off, format!("truncated block: {} of {total} bytes present", already + got), false)?;
            return Ok(None);
        }
        let trailer = u32v(&self.buf[rest - 4..rest], be);
        if trailer != total {
            let what = format!(
                "pcapng block length mismatch: header says {total}, trailer says {trailer} (block type 0x{btype:08x})"
            );
            if is_shb && blk_off == 0 {
                return Err(self.fmt_err(blk_off, what));
            }
            self.corrupt(blk_off, what, true)?;
            return Ok(None);
        }
        self.ng_body(btype, rest - 4, be, blk_off)
    }

    /// The body of a well-framed pcapng block of type `btype` (`body_len` bytes in `self.buf`,
    /// byte order `be`, at `blk_off`): an interface is recorded, a packet is found.
    fn ng_body(&mut self, btype: u32, body_len: usize, be: bool, blk_off: u64) -> Result<Option<Found>, TraceError> {
        match btype {
            PCAPNG_SHB => Ok(None),
            1 => {
                // Interface Description Block
                if body_len < 8 {
                    self.corrupt(blk_off, "interface description block too short".into(), true)?;
                    return Ok(None);
                }
                let link = u16v(&self.buf[0..2], be);
                let snaplen = u32v(&self.buf[4..8], be);
                let mut resol = TsResol::Dec(6);
                let mut offset_s = 0i64;
                for (code, val) in Options::new(&self.buf[8..body_len], be) {
                    match code {
                        9 if !val.is_empty() => {
                            let v = val[0];
                            resol = if v & 0x80 == 0 { TsResol::Dec(v) } else { TsResol::Bin(v & 0x7f) };
                        }
                        14 if val.len() >= 8 => offset_s = u64v(&val[..8], be) as i64,
                        _ => {}
                    }
                }
                if let Kind::Ng { ifaces, .. } = &mut self.kind {
                    ifaces.push(Iface { link, snaplen, resol, offset_s });
                }
                Ok(None)
            }
            6 | 2 => {
                // Enhanced Packet Block / obsolete Packet Block
                if body_len < 20 {
                    self.corrupt(blk_off, "packet block too short for its fixed fields".into(), true)?;
                    return Ok(None);
                }
                let b = &self.buf;
                let ifid = if btype == 6 { u32v(&b[0..4], be) } else { u16v(&b[0..2], be) as u32 };
                let ts_raw = ((u32v(&b[4..8], be) as u64) << 32) | u32v(&b[8..12], be) as u64;
                let caplen = u32v(&b[12..16], be);
                let origlen = u32v(&b[16..20], be);
                let Some(iface) = self.iface(ifid) else {
                    self.corrupt(
                        blk_off,
                        format!(
                            "packet refers to interface {ifid}, but only {} interfaces were described",
                            self.n_ifaces()
                        ),
                        true,
                    )?;
                    return Ok(None);
                };
                if caplen as usize > body_len - 20 {
                    self.corrupt(
                        blk_off,
                        format!("captured length {caplen} exceeds the block's {} data bytes", body_len - 20),
                        true,
                    )?;
                    return Ok(None);
                }
                if iface.snaplen != 0 && caplen > iface.snaplen {
                    self.corrupt(
                        blk_off,
                        format!("captured length {caplen} exceeds the interface snap length {}", iface.snaplen),
                        true,
                    )?;
                    return Ok(None);
                }
                let ts = ts_to_ns(ts_raw, iface.resol, iface.offset_s);
                Ok(Some(Found {
                    ts_ns: ts,
                    orig_len: origlen,
                    link: iface.link,
                    offset: blk_off,
                    start: 20,
                    len: caplen as usize,
                }))
            }
            3 => {
                // Simple Packet Block: interface 0, no timestamp (reported as 0).
                if body_len < 4 {
                    self.corrupt(blk_off, "simple packet block too short".into(), true)?;
                    return Ok(None);
                }
                let origlen = u32v(&self.buf[0..4], be);
                let Some(iface) = self.iface(0) else {
                    self.corrupt(blk_off, "simple packet block before any interface description".into(), true)?;
                    return Ok(None);
                };
                let mut cap = (origlen as usize).min(body_len - 4);
                if iface.snaplen != 0 {
                    cap = cap.min(iface.snaplen as usize);
                }
                Ok(Some(Found { ts_ns: 0, orig_len: origlen, link: iface.link, offset: blk_off, start: 4, len: cap }))
            }
            _ => Ok(None),
        }
    }

    fn iface(&self, id: u32) -> Option<Iface> {
        match &self.kind {
            Kind::Ng { ifaces, .. } => ifaces.get(id as usize).copied(),
            Kind::Classic { .. } => None,
        }
    }
    fn n_ifaces(&self) -> usize {
        match &self.kind {
            Kind::Ng { ifaces, .. } => ifaces.len(),
            Kind::Classic { .. } => 0,
        }
    }
}

fn ts_to_ns(raw: u64, resol: TsResol, offset_s: i64) -> u64 {
    let ns: u128 = match resol {
        TsResol::Dec(n) if n <= 9 => raw as u128 * 10u128.pow(9 - n as u32),
        TsResol::Dec(n) => raw as u128 / 10u128.pow((n as u32 - 9).min(38)),
        TsResol::Bin(n) => (raw as u128 * 1_000_000_000) >> n.min(127),
    };
    let ns = ns as i128 + offset_s as i128 * 1_000_000_000;
    ns.clamp(0, u64::MAX as i128) as u64
}

/// Iterator over pcapng options (code, value); stops at opt_endofopt or malformed data.
struct Options<'a> {
    b: &'a [u8],
    be: bool,
}
impl<'a> Options<'a> {
    fn new(b: &'a [u8], be: bool) -> Self {
        Options { b, be }
    }
}
impl<'a> Iterator for Options<'a> {
    type Item = (u16, &'a [u8]);
    fn next(&mut self) -> Option<Self::Item> {
        if self.b.len() < 4 {
            return None;
        }
        let code = u16v(&self.b[0..2], self.be);
        let len = u16v(&self.b[2..4], self.be) as usize;
        if code == 0 || 4 + len > self.b.len() {
            return None;
        }
        let val = &self.b[4..4 + len];
        let padded = (4 + len).div_ceil(4) * 4;
        self.b = &self.b[padded.min(self.b.len())..];
        Some((code, val))
    }
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn u16v(b: &[u8], be: bool) -> u16 {
    let a = [b[0], b[1]];
    if be {
        u16::from_be_bytes(a)
    } else {
        u16::from_le_bytes(a)
    }
}
fn u32v(b: &[u8], be: bool) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if be {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}
fn u64v(b: &[u8], be: bool) -> u64 {
    let a: [u8; 8] = b[..8].try_into().expect("8 bytes");
    if be {
        u64::from_be_bytes(a)
    } else {
        u64::from_le_bytes(a)
    }
}
