//! Writers of classic pcap and pcapng files, and a builder of synthetic IP packets: for test
//! corpora, generated workloads and round-trip tests of the reader.

use etherparse::PacketBuilder;
use std::io::{self, Write};

/// Writes a classic pcap file.
pub struct PcapWriter<W: Write> {
    w: W,
    big_endian: bool,
    nanos: bool,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the 24-byte global header.
    pub fn new(mut w: W, link: u16, snaplen: u32, nanos: bool, big_endian: bool) -> io::Result<Self> {
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        let mut h = Vec::with_capacity(24);
        let p32 =
            |h: &mut Vec<u8>, v: u32| h.extend_from_slice(&if big_endian { v.to_be_bytes() } else { v.to_le_bytes() });
        p32(&mut h, magic);
        let p16 =
            |h: &mut Vec<u8>, v: u16| h.extend_from_slice(&if big_endian { v.to_be_bytes() } else { v.to_le_bytes() });
        p16(&mut h, 2);
        p16(&mut h, 4);
        p32(&mut h, 0);
        p32(&mut h, 0);
        p32(&mut h, snaplen);
        p32(&mut h, link as u32);
        w.write_all(&h)?;
        Ok(PcapWriter { w, big_endian, nanos })
    }
    /// Writes one record: `data` captured, `orig_len` on the wire.
    pub fn write(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let sec = (ts_ns / 1_000_000_000) as u32;
        let frac = if self.nanos { ts_ns % 1_000_000_000 } else { (ts_ns % 1_000_000_000) / 1000 } as u32;
        let mut h = [0u8; 16];
        for (i, v) in [sec, frac, data.len() as u32, orig_len].into_iter().enumerate() {
            h[4 * i..4 * i + 4].copy_from_slice(&if self.big_endian { v.to_be_bytes() } else { v.to_le_bytes() });
        }
        self.w.write_all(&h)?;
        self.w.write_all(data)
    }
    pub fn into_inner(self) -> W {
        self.w
    }
}

/// Writes a little-endian pcapng file with one section.
pub struct PcapNgWriter<W: Write> {
    w: W,
}

impl<W: Write> PcapNgWriter<W> {
    pub fn new(mut w: W) -> io::Result<Self> {
        let mut b = Vec::new();
        b.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&(-1i64).to_le_bytes()); // section length unknown
        write_block(&mut w, 0x0A0D_0D0A, &b)?;
        Ok(PcapNgWriter { w })
    }
    /// Adds an interface; `tsresol` is the raw if_tsresol byte (6 = microseconds, 9 = ns,
    /// 0x80 | n = 2^-n seconds).
    pub fn interface(&mut self, link: u16, snaplen: u32, tsresol: u8) -> io::Result<()> {
        let mut b = Vec::new();
        b.extend_from_slice(&link.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&snaplen.to_le_bytes());
        b.extend_from_slice(&9u16.to_le_bytes()); // if_tsresol
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&[tsresol, 0, 0, 0]);
        b.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        write_block(&mut self.w, 1, &b)
    }
    /// An Enhanced Packet Block; `ts` in the interface's units.
    pub fn packet(&mut self, iface: u32, ts: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        self.packet_with_comment(iface, ts, data, orig_len, None)
    }
    /// [`Self::packet`] with an `opt_comment` option (a drop's reason).
    pub fn packet_with_comment(
        &mut self,
        iface: u32,
        ts: u64,
        data: &[u8],
        orig_len: u32,
        comment: Option<&str>,
    ) -> io::Result<()> {
        let mut b = Vec::with_capacity(20 + data.len() + 3 + comment.map_or(0, |c| c.len() + 12));
        b.extend_from_slice(&iface.to_le_bytes());
        b.extend_from_slice(&((ts >> 32) as u32).to_le_bytes());
        b.extend_from_slice(&(ts as u32).to_le_bytes());
        b.extend_from_slice(&(data.len() as u32).to_le_bytes());
        b.extend_from_slice(&orig_len.to_le_bytes());
        b.extend_from_slice(data);
        while b.len() % 4 != 0 {
            b.push(0);
        }
        if let Some(c) = comment {
            b.extend_from_slice(&1u16.to_le_bytes()); // opt_comment
            b.extend_from_slice(&(c.len() as u16).to_le_bytes());
            b.extend_from_slice(c.as_bytes());
            while b.len() % 4 != 0 {
                b.push(0);
            }
            b.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
        }
        write_block(&mut self.w, 6, &b)
    }
    pub fn into_inner(self) -> W {
        self.w
    }
}

fn write_block<W: Write>(w: &mut W, btype: u32, body: &[u8]) -> io::Result<()> {
    let total = (12 + body.len()) as u32;
    w.write_all(&btype.to_le_bytes())?;
    w.write_all(&total.to_le_bytes())?;
    w.write_all(body)?;
    w.write_all(&total.to_le_bytes())
}

/// Builds an Ethernet + IPv4 + UDP frame with `payload_len` zero bytes of payload.
pub fn udp4_frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]).ipv4(src, dst, 64).udp(sport, dport);
    let payload = vec![0u8; payload_len];
    let mut out = Vec::with_capacity(b.size(payload_len));
    b.write(&mut out, &payload).expect("writing to a Vec cannot fail");
    out
}

/// Builds an Ethernet + IPv4 + TCP frame with `payload_len` zero bytes of payload, its SYN
/// and ACK flags as `syn` and `ack` say (a handshake's first, second or third segment).
pub fn tcp4_frame(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    syn: bool,
    ack: bool,
    payload_len: usize,
) -> Vec<u8> {
    let mut b =
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]).ipv4(src, dst, 64).tcp(sport, dport, 1, 1024);
    if syn {
        b = b.syn();
    }
    if ack {
        b = b.ack(1);
    }
    let payload = vec![0u8; payload_len];
    let mut out = Vec::with_capacity(b.size(payload_len));
    b.write(&mut out, &payload).expect("writing to a Vec cannot fail");
    out
}

/// The detectors' crafted capture (`npqos trace detect`'s and the router's packet-function
/// tests), whose answer is known: 400 ms from 2023-11-14, one round a millisecond of a SYN scan of
/// 300 ports of 198.18.2.2 by 198.18.1.1 (the first 300 rounds), a SYN from one of 200 spoofed
/// sources to 198.18.5.5:80 never completed, and benign traffic: a handshake from
/// 198.18.3.3 to one of 10 ports of 198.18.4.4 (SYN, the server's SYN-ACK, the third segment
/// with 100 bytes), each packet of a round 1 ns after the one before.
pub fn attacks_capture(path: &std::path::Path) -> io::Result<()> {
    let mut w = PcapWriter::new(io::BufWriter::new(std::fs::File::create(path)?), 1, 65535, true, false)?;
    let (scanner, victim, client, server, flooded) =
        ([198, 18, 1, 1], [198, 18, 2, 2], [198, 18, 3, 3], [198, 18, 4, 4], [198, 18, 5, 5]);
    let t0 = 1_700_000_000_000_000_000u64;
    for i in 0..400u16 {
        let t = t0 + i as u64 * 1_000_000;
        let mut put = |dt: u64, f: Vec<u8>| w.write(t + dt, &f, f.len() as u32);
        if i < 300 {
            put(0, tcp4_frame(scanner, victim, 40000, 1 + i, true, false, 0))?;
        }
        put(1, tcp4_frame([198, 18, 6, (i % 200) as u8], flooded, 10000 + i, 80, true, false, 0))?;
        put(2, tcp4_frame(client, server, 20000 + i, 443 + i % 10, true, false, 0))?;
        put(3, tcp4_frame(server, client, 443 + i % 10, 20000 + i, true, true, 0))?;
        put(4, tcp4_frame(client, server, 20000 + i, 443 + i % 10, false, true, 100))?;
    }
    io::Write::flush(&mut w.into_inner())
}

/// Builds a raw (no link layer) IPv6 + TCP packet.
pub fn tcp6_packet(src: [u8; 16], dst: [u8; 16], sport: u16, dport: u16, payload_len: usize) -> Vec<u8> {
    let b = PacketBuilder::ipv6(src, dst, 64).tcp(sport, dport, 1, 1024);
    let payload = vec![0u8; payload_len];
    let mut out = Vec::with_capacity(b.size(payload_len));
    b.write(&mut out, &payload).expect("writing to a Vec cannot fail");
    out
}
