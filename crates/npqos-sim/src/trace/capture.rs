//! Packet captures of a pipeline's ports (docs/router.md, "Packet captures"): the records of
//! its taps ([`npqos_core::pipeline::router::Tapped`]) written as the run goes to one pcapng
//! file per port, nanosecond timestamps (`if_tsresol` = 9) at the pipeline's time, each packet
//! an Ethernet + IPv4/IPv6 + TCP/UDP header built from its 5-tuple and padded with zeros to its
//! length (no packet bytes are kept), cut at the snap length; a drop's reason in the record's
//! comment. Each file holds at most `limit` packets: past it the packets are counted, not
//! written. Files are written under a temporary name and renamed when the run ends.

use crate::trace::writer::PcapNgWriter;
use etherparse::PacketBuilder;
use npqos_core::flow::FlowKey;
use npqos_core::pipeline::router::{Port, Tapped};
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

/// What a port's capture holds: its file, the packets written, and past the limit the packets
/// not written and the time of the first of them (ns).
#[derive(Clone, Debug, PartialEq)]
pub struct Captured {
    pub port: Port,
    pub path: PathBuf,
    pub written: u64,
    pub not_written: u64,
    pub cut_at_ns: Option<u64>,
}

struct One {
    w: PcapNgWriter<BufWriter<File>>,
    tmp: PathBuf,
    c: Captured,
}

/// The captures of one run's tapped ports.
pub struct PortCaptures {
    files: [Option<One>; 3],
    limit: u64,
    snaplen: u32,
    frame: Vec<u8>,
}

impl PortCaptures {
    /// Creates `dir` and a capture of each port of `ports`, named `<prefix><port>.pcapng`.
    pub fn create(dir: &Path, prefix: &str, ports: &[Port], limit: u64, snaplen: u32) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let mut files: [Option<One>; 3] = Default::default();
        for &port in ports {
            let path = dir.join(format!("{prefix}{}.pcapng", port.name()));
            let tmp = dir.join(format!(".{prefix}{}.pcapng.tmp", port.name()));
            let mut w = PcapNgWriter::new(BufWriter::with_capacity(1 << 16, File::create(&tmp)?))?;
            w.interface(1, snaplen, 9)?;
            let c = Captured { port, path, written: 0, not_written: 0, cut_at_ns: None };
            files[port as usize] = Some(One { w, tmp, c });
        }
        Ok(PortCaptures { files, limit, snaplen, frame: Vec::new() })
    }

    /// Writes (or past the limit counts) each record, emptying `records`.
    pub fn write(&mut self, records: &mut Vec<Tapped>) -> io::Result<()> {
        for r in records.drain(..) {
            let Some(f) = self.files[r.port as usize].as_mut() else { continue };
            if f.c.written >= self.limit {
                f.c.not_written += 1;
                f.c.cut_at_ns.get_or_insert(r.t);
                continue;
            }
            frame(&r.key, r.len, &mut self.frame);
            let cap = self.frame.len().min(self.snaplen as usize).min(r.len as usize);
            f.w.packet_with_comment(0, r.t, &self.frame[..cap], r.len, r.reason)?;
            f.c.written += 1;
        }
        Ok(())
    }

    /// Flushes and renames every file: what each holds.
    pub fn finish(self) -> io::Result<Vec<Captured>> {
        let mut out = Vec::new();
        for f in self.files.into_iter().flatten() {
            let mut w = f.w.into_inner();
            io::Write::flush(&mut w)?;
            drop(w);
            std::fs::rename(&f.tmp, &f.c.path)?;
            out.push(f.c);
        }
        Ok(out)
    }
}

/// A frame of `len` bytes for a packet of flow `key` into `out`: Ethernet, IPv4 or IPv6, and
/// TCP or UDP (another protocol: the IP header alone), then zeros; headers longer than `len`
/// are kept whole (the caller cuts the record at `len`).
pub fn frame(key: &FlowKey, len: u32, out: &mut Vec<u8>) {
    let eth = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let v4 = |a: &[u8; 16]| [a[12], a[13], a[14], a[15]];
    let ip = match key.is_v6 {
        true => eth.ipv6(key.src, key.dst, 64),
        false => eth.ipv4(v4(&key.src), v4(&key.dst), 64),
    };
    out.clear();
    let zeros = |head: usize| vec![0u8; (len as usize).saturating_sub(head)];
    let _ = match key.proto {
        6 => {
            let b = ip.tcp(key.src_port, key.dst_port, 0, 65535);
            let p = zeros(b.size(0));
            b.write(out, &p)
        }
        17 => {
            let b = ip.udp(key.src_port, key.dst_port);
            let p = zeros(b.size(0));
            b.write(out, &p)
        }
        proto => {
            let p = zeros(if key.is_v6 { 54 } else { 34 });
            ip.write(out, etherparse::IpNumber(proto), &p)
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::reader::TraceReader;

    fn key(proto: u8, v6: bool) -> FlowKey {
        let mut k = FlowKey { proto, is_v6: v6, src_port: 1234, dst_port: 80, ..Default::default() };
        if !v6 {
            k.src[10..16].copy_from_slice(&[0xff, 0xff, 198, 18, 0, 1]);
            k.dst[10..16].copy_from_slice(&[0xff, 0xff, 198, 18, 0, 2]);
        } else {
            k.src[0] = 0x20;
            k.dst[0] = 0x20;
            k.dst[15] = 2;
        }
        k
    }

    /// Every packet comes back from our reader with its time, length and flow; the limit cuts
    /// the file and says where; a drop's comment is in the file.
    #[test]
    fn captures_read_back_and_stop_at_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let mut c = PortCaptures::create(d.path(), "", &[Port::Ingress, Port::Drops], 3, 128).unwrap();
        let mut recs: Vec<Tapped> = [(6, false), (17, true), (1, false), (6, true)]
            .iter()
            .enumerate()
            .map(|(i, &(p, v6))| Tapped {
                port: Port::Ingress,
                t: 1_000 + i as u64,
                len: 1500,
                key: key(p, v6),
                reason: None,
            })
            .collect();
        recs.push(Tapped { port: Port::Drops, t: 7, len: 60, key: key(17, false), reason: Some("late") });
        recs.push(Tapped { port: Port::Egress, t: 8, len: 60, key: key(17, false), reason: None });
        c.write(&mut recs).unwrap();
        assert!(recs.is_empty());
        let got = c.finish().unwrap();
        assert_eq!(got[0].written, 3);
        assert_eq!((got[0].not_written, got[0].cut_at_ns), (1, Some(1_003)));
        assert_eq!((got[1].written, got[1].not_written), (1, 0));
        assert!(!d.path().join("egress.pcapng").exists(), "an untapped port has no file");
        let mut r = TraceReader::open(&d.path().join("ingress.pcapng"), false).unwrap();
        let mut n = 0;
        while let Some(rec) = r.next().unwrap() {
            assert_eq!((rec.ts_ns, rec.orig_len, rec.data.len()), (1_000 + n, 1500, 128));
            let m = crate::trace::decode::decode(&rec).unwrap();
            let k = key([6, 17, 1][n as usize], n == 1);
            assert_eq!((m.flow.proto, m.flow.is_v6, m.flow.src, m.flow.dst), (k.proto, k.is_v6, k.src, k.dst));
            n += 1;
        }
        assert_eq!(n, 3);
        let drops = std::fs::read(d.path().join("drops.pcapng")).unwrap();
        assert!(drops.windows(4).any(|w| w == b"late"), "the reason is the record's comment");
    }
}
