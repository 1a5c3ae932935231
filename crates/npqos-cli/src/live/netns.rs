//! A test bed of three network namespaces: a sender, a middle box and a receiver, joined by
//! two veth pairs (`s0`-`in0`, `out0`-`r0`). The sender has 198.18.0.1/24 (RFC 2544's
//! benchmarking range) and a permanent neighbour entry for 198.18.0.2 pointing at the
//! receiver's MAC, so frames go one way only and pass the middle box unchanged; the receiver
//! has no address (its kernel ignores the frames) and counts them on a packet ring. The middle
//! box runs `npqos live in0 -> out0`, or the kernel (a bridge with htb on `out0`).
//!
//! Used by the namespace test (tests/live.rs) and the benchmark (benches/live.rs). Needs root.

use super::monotonic_ns;
use super::ring::RxRing;
use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

/// Runs `ip`/`tc` (or any command), returning its error output on failure.
pub fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0]).args(&args[1..]).output().map_err(|e| format!("{}: {e}", args[0]))?;
    if !out.status.success() {
        return Err(format!("`{}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Why the bed cannot be built here, if it cannot: not root, no `ip`, or no namespaces.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces and packet sockets need it)".into());
    }
    if sh(&["ip", "-V"]).is_err() {
        return Some("the `ip` command (iproute2) is not installed".into());
    }
    // Unique per call: tests of one process probe at the same time.
    static PROBES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = format!("npqos-probe-{}-{n}", std::process::id());
    if let Err(e) = sh(&["ip", "netns", "add", &probe]) {
        return Some(format!("network namespaces cannot be created: {e}"));
    }
    let _ = sh(&["ip", "netns", "del", &probe]);
    None
}

/// Why `io = "xdp"` cannot run here, if it cannot (a kernel without AF_XDP or BPF): an XDP
/// program and a socket tried on a veth pair in a namespace of their own. Call after
/// [`unavailable`].
pub fn xdp_unavailable() -> Option<String> {
    let ns = format!("npqos-xdp-probe-{}", std::process::id());
    let _ = sh(&["ip", "netns", "del", &ns]);
    let made = sh(&["ip", "netns", "add", &ns])
        .and_then(|_| sh(&["ip", "-n", &ns, "link", "add", "xa", "type", "veth", "peer", "name", "xb"]))
        .and_then(|_| sh(&["ip", "-n", &ns, "link", "set", "xa", "up"]))
        .and_then(|_| sh(&["ip", "-n", &ns, "link", "set", "xb", "up"]));
    let tried = made.and_then(|_| {
        let probe = in_ns(&ns, || -> Result<(), String> {
            let p = std::sync::Arc::new(super::xsk::Program::attach("xa").map_err(|e| e.to_string())?);
            super::xsk::open("xa", 0, Some(&p), 64, 64).map(drop).map_err(|e| e.to_string())
        });
        probe.join().map_err(|_| "the probe panicked".to_string())?.and_then(|r| r)
    });
    let _ = sh(&["ip", "netns", "del", &ns]);
    tried.err().map(|e| format!("AF_XDP is not available: {e}"))
}

/// The three namespaces; deleted (with their veths) on drop.
pub struct Bed {
    pub snd: String,
    pub mid: String,
    pub rcv: String,
    pub rcv_mac: String,
}

pub const SENDER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
pub const RECEIVER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// Flow `i` is UDP from SENDER_IP port `FIRST_PORT + i / DST_PORTS` to RECEIVER_IP port
/// `DST_BASE + i % DST_PORTS`.
pub const FIRST_PORT: u16 = 5000;
pub const DST_BASE: u16 = 10000;
pub const DST_PORTS: u32 = 1000;

impl Bed {
    /// Builds the bed; `tag` makes the namespace names unique (`npqos-<tag>-snd`...).
    pub fn new(tag: &str) -> Result<Bed, String> {
        Self::with_queues(tag, 1)
    }

    /// [`Self::new`] with `queues` transmit and receive queues on every veth: AF_XDP binds a
    /// socket per receive queue, one per forwarding thread (`io = "xdp"`), and the sender's
    /// veth spreads its flows over them by their hash.
    pub fn with_queues(tag: &str, queues: u32) -> Result<Bed, String> {
        let q = queues.to_string();
        let queues = ["numtxqueues", &q, "numrxqueues", &q];
        let n = |r: &str| format!("npqos-{tag}-{r}");
        let bed = Bed { snd: n("snd"), mid: n("mid"), rcv: n("rcv"), rcv_mac: String::new() };
        for ns in [&bed.snd, &bed.mid, &bed.rcv] {
            let _ = sh(&["ip", "netns", "del", ns]);
            sh(&["ip", "netns", "add", ns])?;
        }
        let mut bed = bed;
        let (s, m, r) = (bed.snd.clone(), bed.mid.clone(), bed.rcv.clone());
        for (a, ns_a, b, ns_b) in [("s0", &s, "in0", &m), ("out0", &m, "r0", &r)] {
            let (end, peer) = (["link", "add", a, "netns", ns_a], ["type", "veth", "peer", "name", b, "netns", ns_b]);
            let args: Vec<&str> = ["ip"].into_iter().chain(end).chain(queues).chain(peer).chain(queues).collect();
            sh(&args)?;
        }
        for (ns, ifs) in [(&s, &["s0"][..]), (&m, &["in0", "out0"][..]), (&r, &["r0"][..])] {
            sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])?;
            sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])?;
            for i in ifs {
                sh(&["ip", "-n", ns, "link", "set", i, "up"])?;
            }
        }
        sh(&["ip", "-n", &s, "addr", "add", "198.18.0.1/24", "dev", "s0"])?;
        let link = sh(&["ip", "-n", &r, "-o", "link", "show", "r0"])?;
        let mac = link.split("link/ether ").nth(1).and_then(|t| t.split_whitespace().next()).ok_or("no MAC on r0")?;
        bed.rcv_mac = mac.to_string();
        sh(&["ip", "-n", &s, "neigh", "replace", "198.18.0.2", "lladdr", mac, "dev", "s0", "nud", "permanent"])?;
        Ok(bed)
    }

    /// Steers the endpoints' receive processing to `endpoint_cpu` and the middle's to
    /// `mid_cpu` (RPS on `s0` and `r0`, on `in0` and `out0`). A veth delivers on the CPU that
    /// sent, so without it the sender's and the receiver's TCP stacks run on whichever CPU
    /// forwarded the frame: on a 2-core bed, on the bridge's own CPU, beside (and, as
    /// ksoftirqd, against) its forwarding thread. Steered, each side keeps its CPU, as if the
    /// endpoints were machines of their own.
    pub fn steer(&self, endpoint_cpu: usize, mid_cpu: usize) -> Result<(), String> {
        for (ns, dev, cpu) in [
            (&self.snd, "s0", endpoint_cpu),
            (&self.rcv, "r0", endpoint_cpu),
            (&self.mid, "in0", mid_cpu),
            (&self.mid, "out0", mid_cpu),
        ] {
            let mask = format!("{:x}", 1u64 << cpu);
            let cmd = format!("echo {mask} > /sys/class/net/{dev}/queues/rx-0/rps_cpus");
            sh(&["ip", "netns", "exec", ns, "sh", "-c", &cmd])?;
        }
        Ok(())
    }

    /// The kernel forwards `in0` to `out0`: a bridge `br0` of the two in the middle.
    pub fn bridge(&self) -> Result<(), String> {
        for args in [
            &["link", "add", "br0", "type", "bridge"][..],
            &["link", "set", "in0", "master", "br0"],
            &["link", "set", "out0", "master", "br0"],
            &["link", "set", "br0", "up"],
        ] {
            sh(&[&["ip", "-n", &self.mid][..], args].concat())?;
        }
        Ok(())
    }

    /// The kernel forwards `in0` to `out0` (a bridge) with htb on `out0`: every frame in one
    /// class of `rate_bps` over a bfifo of `limit` bytes (a class that a load saturates).
    pub fn kernel_htb_one_class(&self, rate_bps: u64, limit: u64) -> Result<(), String> {
        let m = &self.mid;
        self.bridge()?;
        let (rate, limit) = (format!("{rate_bps}bit"), limit.to_string());
        for args in [
            &["qdisc", "add", "dev", "out0", "root", "handle", "1:", "htb", "default", "1"][..],
            &["class", "add", "dev", "out0", "parent", "1:", "classid", "1:1", "htb", "rate", &rate, "ceil", &rate],
            &["qdisc", "add", "dev", "out0", "parent", "1:1", "bfifo", "limit", &limit],
        ] {
            sh(&[&["tc", "-n", m][..], args].concat())?;
        }
        Ok(())
    }

    /// The kernel forwards `in0` to `out0` (a bridge) with htb on `out0`: one class per flow
    /// (`flows` flows as [`flow_ports`] numbers them) at `rate` with a `limit`-byte FIFO, the
    /// rest in an unshaped default class.
    pub fn kernel_htb(&self, flows: u32, rate_bps: u64, limit: u64) -> Result<(), String> {
        let m = &self.mid;
        self.bridge()?;
        if flows > 0xfffe {
            return Err(format!("htb has 16-bit class ids: at most 65534 classes, not {flows}"));
        }
        let mut batch = String::from("qdisc add dev out0 root handle 1: htb default ffff\n");
        batch.push_str("class add dev out0 parent 1: classid 1:ffff htb rate 10gbit\n");
        // Hashed u32 filters: one table of 256 buckets keyed on the low byte of the
        // destination port, so a frame's filter is found in a short list.
        batch.push_str("filter add dev out0 parent 1: prio 1 handle 2: protocol ip u32 divisor 256\n");
        batch.push_str(
            "filter add dev out0 parent 1: prio 1 protocol ip u32 ht 800:: match ip protocol 17 0xff hashkey mask 0x000000ff at 20 link 2:\n",
        );
        for i in 0..flows {
            let (sp, dp) = flow_ports(i);
            let c = i + 1;
            batch.push_str(&format!(
                "class add dev out0 parent 1: classid 1:{c:x} htb rate {rate_bps}bit ceil {rate_bps}bit\n"
            ));
            batch.push_str(&format!("qdisc add dev out0 parent 1:{c:x} bfifo limit {limit}\n"));
            batch.push_str(&format!(
                "filter add dev out0 parent 1: prio 1 protocol ip u32 ht 2:{:x}: match ip sport {sp} 0xffff match ip dport {dp} 0xffff flowid 1:{c:x}\n",
                dp & 0xff
            ));
        }
        let path = std::env::temp_dir().join(format!("{}-tc.batch", self.mid));
        std::fs::write(&path, batch).map_err(|e| e.to_string())?;
        let r = sh(&["tc", "-n", m, "-batch", &path.display().to_string()]);
        let _ = std::fs::remove_file(&path);
        r.map(|_| ())
    }

    /// The kernel's htb on a bridge in the middle namespace for TCP: `flows` classes of
    /// `rate_bps` each (a bfifo of `limit` bytes under each), the flow of class i the one whose
    /// client port is `first_port + i` (the data from the client, matched by TCP source port),
    /// anything else in an unshaped default class. What npqos live's per-flow rate is for a
    /// client whose ports are known (`iperf3 --cport`).
    pub fn kernel_htb_tcp(&self, flows: u32, first_port: u16, rate_bps: u64, limit: u64) -> Result<(), String> {
        let m = &self.mid;
        self.bridge()?;
        let mut batch = String::from(
            "qdisc add dev out0 root handle 1: htb default ffff
",
        );
        batch.push_str(
            "class add dev out0 parent 1: classid 1:ffff htb rate 10gbit
",
        );
        for i in 0..flows {
            let (c, port) = (i + 1, first_port as u32 + i);
            batch.push_str(&format!(
                "class add dev out0 parent 1: classid 1:{c:x} htb rate {rate_bps}bit ceil {rate_bps}bit
"
            ));
            batch.push_str(&format!(
                "qdisc add dev out0 parent 1:{c:x} bfifo limit {limit}
"
            ));
            batch.push_str(&format!(
                "filter add dev out0 parent 1: prio 1 protocol ip u32 match ip protocol 6 0xff match ip sport {port} 0xffff flowid 1:{c:x}
"
            ));
        }
        let path = std::env::temp_dir().join(format!("{}-tcp-tc.batch", self.mid));
        std::fs::write(&path, batch).map_err(|e| e.to_string())?;
        let r = sh(&["tc", "-n", m, "-batch", &path.display().to_string()]);
        let _ = std::fs::remove_file(&path);
        r.map(|_| ())
    }

    /// Frames htb dropped on `out0` (its qdiscs' drop counters).
    pub fn htb_drops(&self) -> u64 {
        let s = sh(&["tc", "-n", &self.mid, "-s", "qdisc", "show", "dev", "out0"]).unwrap_or_default();
        s.split("dropped ").skip(1).filter_map(|t| t.split(',').next()?.trim().parse::<u64>().ok()).sum::<u64>() / 2
        // the root htb counts its children's drops again
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        for ns in [&self.snd, &self.mid, &self.rcv] {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}

/// The (source, destination) ports of flow `i`.
pub fn flow_ports(i: u32) -> (u16, u16) {
    (FIRST_PORT + (i / DST_PORTS) as u16, DST_BASE + (i % DST_PORTS) as u16)
}

/// Runs `f` on a new thread inside namespace `ns` (the thread's network namespace only).
pub fn in_ns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::thread::JoinHandle<Result<T, String>> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: setns on a namespace file we hold open; affects only this thread's network ns.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
        }
        Ok(f())
    })
}

/// Pins the calling thread to CPU `cpu`.
pub fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET within its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// What the sender offered.
#[derive(Clone, Debug, Default)]
pub struct Offered {
    /// Datagrams handed to the kernel, per flow.
    pub sent: Vec<u64>,
    /// `send` calls that failed (not sent, not counted above).
    pub send_errors: u64,
    pub elapsed_ns: u64,
    /// The most a round of datagrams went out after its due time, ns ([`send_udp`] only): a
    /// sender that stalled longer than a shaped queue holds left that queue idle.
    pub max_late_ns: u64,
}

/// Sends `flows` UDP flows of `payload`-byte datagrams, each at `rate_bps` of frames (payload +
/// 42 bytes of headers) or as fast as possible with `rate_bps` 0, round robin, for
/// `duration_ns`. Each datagram carries its flow's sequence number in its first 4 bytes. Run
/// it inside the sender's namespace ([`in_ns`]).
pub fn send_udp(flows: u32, rate_bps: u64, payload: usize, duration_ns: u64) -> Result<Offered, String> {
    send_udp_between(SENDER_IP, RECEIVER_IP, flows, rate_bps, payload, duration_ns)
}

/// [`send_udp`] from `src` to `dst` (the way back: from the receiver to the sender).
pub fn send_udp_between(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    flows: u32,
    rate_bps: u64,
    payload: usize,
    duration_ns: u64,
) -> Result<Offered, String> {
    send_udp_from(&vec![src; flows as usize], dst, rate_bps, payload, duration_ns)
}

/// [`send_udp`] to `dst` with flow i sent from the address `srcs[i]` (flows numbered by
/// [`flow_ports`] as ever, so the receiver tells them apart by their ports): subscribers with
/// flows of their own. Every address must be the sender's.
pub fn send_udp_from(
    srcs: &[Ipv4Addr],
    dst: Ipv4Addr,
    rate_bps: u64,
    payload: usize,
    duration_ns: u64,
) -> Result<Offered, String> {
    send_udp_tos(srcs, dst, rate_bps, payload, duration_ns, 0)
}

/// [`send_udp_from`] with the IPv4 TOS byte `tos` on every datagram (its low two bits the ECN
/// field: 0x02 is ECT(0)).
pub fn send_udp_tos(
    srcs: &[Ipv4Addr],
    dst: Ipv4Addr,
    rate_bps: u64,
    payload: usize,
    duration_ns: u64,
    tos: u8,
) -> Result<Offered, String> {
    let flows = srcs.len() as u32;
    let ports = flows.div_ceil(DST_PORTS);
    let mut addrs: Vec<Ipv4Addr> = srcs.to_vec();
    addrs.sort();
    addrs.dedup();
    // One socket per (address, source port); flow i's is at addrs' index of srcs[i].
    let socks: Vec<UdpSocket> = addrs
        .iter()
        .flat_map(|&a| (0..ports).map(move |s| SocketAddrV4::new(a, FIRST_PORT + s as u16)))
        .map(|at| UdpSocket::bind(at).map_err(|e| format!("{at}: {e}")))
        .collect::<Result<_, _>>()?;
    let sock_of = |i: u32, sp: u16| {
        let a = addrs.binary_search(&srcs[i as usize]).unwrap_or(0);
        &socks[a * ports as usize + (sp - FIRST_PORT) as usize]
    };
    for s in &socks {
        let (big, tos): (libc::c_int, libc::c_int) = (4 << 20, tos as libc::c_int);
        // SAFETY: setsockopt with an int, twice.
        unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_SNDBUF,
                &big as *const _ as *const libc::c_void,
                4,
            );
            libc::setsockopt(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS, &tos as *const _ as *const libc::c_void, 4);
        };
    }
    let frame_bits = ((payload + 42) * 8) as u64;
    // Round robin over the flows: one datagram of each flow per round, a round every
    // frame_bits / rate_bps.
    let round_ns = (frame_bits * 1_000_000_000).checked_div(rate_bps).unwrap_or(0);
    let mut buf = vec![0u8; payload];
    let mut off = Offered { sent: vec![0; flows as usize], ..Default::default() };
    let t0 = monotonic_ns();
    let mut round = 0u64;
    'outer: loop {
        let due = t0 + round * round_ns;
        loop {
            let now = monotonic_ns();
            if now >= t0 + duration_ns {
                break 'outer;
            }
            if now >= due {
                off.max_late_ns = off.max_late_ns.max(now - due);
                break;
            }
            // Never past the end: a slow rate's next round may lie beyond it.
            let wake = due.min(t0 + duration_ns);
            if wake.saturating_sub(now) > 200_000 {
                std::thread::sleep(std::time::Duration::from_nanos(wake - now - 100_000));
            } else {
                std::hint::spin_loop();
            }
        }
        for i in 0..flows {
            let (sp, dp) = flow_ports(i);
            let seq = off.sent[i as usize] as u32;
            buf[..4].copy_from_slice(&seq.to_be_bytes());
            let to = SocketAddrV4::new(dst, dp);
            match sock_of(i, sp).send_to(&buf, to) {
                Ok(_) => off.sent[i as usize] += 1,
                Err(_) => off.send_errors += 1,
            }
        }
        round += 1;
    }
    off.elapsed_ns = monotonic_ns() - t0;
    Ok(off)
}

/// The fast sender of the benchmarks (docs/PERFORMANCE.md, "npqos live on every core"): UDP
/// frames of `flows` flows ([`flow_ports`], sequence numbers as [`send_udp`]'s) from
/// [`SENDER_IP`] to [`RECEIVER_IP`] at `dst_mac`, written straight into a packet transmit ring
/// on `iface` (`payload` bytes each, as fast as the ring takes them, round robin over the flows)
/// for `duration_ns`: no socket, no routing, no neighbour lookup, one `send()` per batch of up
/// to 256 frames. A UDP socket sender tops out near 220,000 frames/s here; this one is what the
/// kernel's transmit path allows. With `pace` (frames/s) it offers that rate instead, sleeping
/// between batches rather than spinning, so that a forwarding thread sharing its CPU gets the
/// CPU when frames come. Run it inside the sender's namespace.
pub fn send_ring(
    iface: &str,
    dst_mac: &str,
    flows: u32,
    payload: usize,
    duration_ns: u64,
    pace: Option<u64>,
) -> Result<Offered, String> {
    let mut tx = super::ring::TxRing::open(iface, 4096).map_err(|e| e.to_string())?;
    let dst: Vec<u8> = dst_mac.split(':').filter_map(|h| u8::from_str_radix(h, 16).ok()).collect();
    let mut f = vec![0u8; 42 + payload.max(4)];
    f[..6].copy_from_slice(&dst);
    // A locally administered source address: the middle box forwards any, the receiver
    // looks at the destination (sysfs would show the mounting namespace's s0, not this one's).
    f[6..12].copy_from_slice(&[0x02, 0, 0x5e, 0x10, 0, 1]);
    f[12..14].copy_from_slice(&[8, 0]);
    let ip_len = (f.len() - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&SENDER_IP.octets());
    f[30..34].copy_from_slice(&RECEIVER_IP.octets());
    // The IPv4 header is the same in every frame: its checksum once.
    let sum: u32 = f[14..34].chunks(2).map(|w| u16::from_be_bytes([w[0], w[1]]) as u32).sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    f[24..26].copy_from_slice(&(!((sum & 0xffff) + (sum >> 16)) as u16).to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes()); // UDP length; checksum 0: none
    let mut off = Offered { sent: vec![0; flows as usize], ..Default::default() };
    let t0 = monotonic_ns();
    let mut i = 0u32;
    let mut total = 0u64;
    loop {
        let now = monotonic_ns();
        if now >= t0 + duration_ns {
            break;
        }
        let mut room = tx.room(256);
        if let Some(rate) = pace {
            // Frames due by now at the rate; ahead of it, sleep until the next one is due.
            let due = ((now - t0) as u128 * rate as u128 / 1_000_000_000) as u64;
            if due <= total {
                let next = t0 + ((total + 1) as u128 * 1_000_000_000 / rate.max(1) as u128) as u64;
                std::thread::sleep(std::time::Duration::from_nanos(next.saturating_sub(now).max(20_000)));
                continue;
            }
            room = room.min((due - total) as usize);
        }
        if room == 0 {
            tx.flush();
            std::hint::spin_loop();
            continue;
        }
        for _ in 0..room {
            let (sp, dp) = flow_ports(i);
            f[34..36].copy_from_slice(&sp.to_be_bytes());
            f[36..38].copy_from_slice(&dp.to_be_bytes());
            f[42..46].copy_from_slice(&(off.sent[i as usize] as u32).to_be_bytes());
            tx.push(&f);
            off.sent[i as usize] += 1;
            i = if i + 1 == flows { 0 } else { i + 1 };
        }
        total += room as u64;
        tx.flush();
    }
    // What is still in the ring goes too (it was counted as sent).
    while tx.pending() > 0 {
        tx.flush();
    }
    off.send_errors = tx.counters().errors;
    off.elapsed_ns = monotonic_ns() - t0;
    Ok(off)
}

/// The bed's sender and receiver around whatever forwards in the middle: the receiver counting
/// on `r0`, then 300 ms later [`send_udp`] of `flows` flows at `rate_bps` each for
/// `duration_ns`, then 600 ms for the queues to drain and the receive ring to retire its block.
/// What was offered and what arrived.
pub fn offer_udp(bed: &Bed, flows: u32, rate_bps: u64, payload: usize, duration_ns: u64) -> (Offered, Received) {
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let rcv = in_ns(&bed.rcv, move || receive("r0", &s2));
    std::thread::sleep(std::time::Duration::from_millis(300));
    let snd = in_ns(&bed.snd, move || send_udp(flows, rate_bps, payload, duration_ns));
    let off = snd.join().expect("the sender thread").expect("the sender's namespace").expect("the sender");
    std::thread::sleep(std::time::Duration::from_millis(600));
    stop.store(true, Ordering::Relaxed);
    let got = rcv.join().expect("the receiver thread").expect("the receiver's namespace").expect("the receiver");
    (off, got)
}

/// What the receiver counted of one flow.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlowSeen {
    pub frames: u64,
    pub bytes: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    first_len: u64,
    next_seq: u32,
    /// Frames whose sequence number was below one already seen.
    pub reordered: u64,
    /// Frames whose IPv4 ECN field said Congestion Experienced.
    pub ce: u64,
    /// The longest time between two of the flow's frames, ns. A gap every flow shares is no
    /// property of the shaper: a receiver that opens its ring while the flows run sees one
    /// of 12-25 ms after their first few frames here, and a stall of the machine shows the
    /// same way.
    pub max_gap_ns: u64,
    /// When that gap ended, ns after the flow's first frame.
    pub max_gap_at_ns: u64,
}

impl FlowSeen {
    /// Rate from the first frame to the last, bits/s (the first frame's bytes excluded).
    pub fn rate_bps(&self) -> Option<f64> {
        let span = self.last_ns.checked_sub(self.first_ns).filter(|&s| s > 0)?;
        Some((self.bytes - self.first_len) as f64 * 8e9 / span as f64)
    }
}

/// What the receiver counted.
#[derive(Clone, Debug, Default)]
pub struct Received {
    /// Keyed by flow index ([`flow_ports`] inverted).
    pub flows: HashMap<u32, FlowSeen>,
    /// Bytes per flow per [`BIN_NS`] of kernel time (bin = timestamp / BIN_NS).
    bins: HashMap<u32, BTreeMap<u64, u64>>,
    pub other_frames: u64,
    pub ring_drops: u64,
}

/// The receiver's bins of bytes per flow: 100 ms.
pub const BIN_NS: u64 = 100_000_000;

impl Received {
    /// Flow `flow`'s rate as the median over its whole periods of `period_bins` bins (the
    /// first and last bins, which the flow may fill only in part, left out), bits/s: the rate
    /// it held, which one stall of the machine in one period does not move. None with fewer
    /// than three whole periods.
    pub fn steady_rate_bps(&self, flow: u32, period_bins: u64) -> Option<f64> {
        let bins = self.bins.get(&flow)?;
        let (&first, &last) = (bins.keys().next()?, bins.keys().next_back()?);
        let p = period_bins.max(1);
        let mut rates: Vec<f64> = ((first + 1)..last)
            .step_by(p as usize)
            .filter(|b| b + p <= last)
            .map(|b| {
                (b..b + p).map(|i| bins.get(&i).copied().unwrap_or(0)).sum::<u64>() as f64 * 8e9 / (p * BIN_NS) as f64
            })
            .collect();
        if rates.len() < 3 {
            return None;
        }
        rates.sort_by(f64::total_cmp);
        let n = rates.len();
        Some((rates[(n - 1) / 2] + rates[n / 2]) / 2.0)
    }
}

/// Counts the test flows arriving on `iface` (a packet ring, kernel timestamps) until `stop`
/// is raised. Run it inside the receiver's namespace.
pub fn receive(iface: &str, stop: &AtomicBool) -> Result<Received, String> {
    receive_for(iface, RECEIVER_IP, stop)
}

/// [`receive`] of the test flows to `dst` (the way back: to the sender).
pub fn receive_for(iface: &str, dst: Ipv4Addr, stop: &AtomicBool) -> Result<Received, String> {
    let mut rx = RxRing::open(iface, 64 << 20).map_err(|e| e.to_string())?;
    let mut got = Received::default();
    while !stop.load(Ordering::Relaxed) {
        let n = rx.next_block(|f, ts, _| {
            // Ethernet + IPv4 (no options) + UDP to the receiver.
            if f.len() < 46 || f[12..14] != [8, 0] || f[23] != 17 || f[30..34] != dst.octets() {
                got.other_frames += 1;
                return;
            }
            let sp = u16::from_be_bytes([f[34], f[35]]);
            let dp = u16::from_be_bytes([f[36], f[37]]);
            let seq = u32::from_be_bytes([f[42], f[43], f[44], f[45]]);
            let i = (sp - FIRST_PORT) as u32 * DST_PORTS + (dp - DST_BASE) as u32;
            let s = got.flows.entry(i).or_default();
            if s.frames == 0 {
                s.first_ns = ts;
                s.first_len = f.len() as u64;
            }
            if s.frames > 0 && seq < s.next_seq {
                s.reordered += 1;
            }
            if s.frames > 0 && ts.saturating_sub(s.last_ns) > s.max_gap_ns {
                s.max_gap_ns = ts - s.last_ns;
                s.max_gap_at_ns = ts - s.first_ns;
            }
            s.next_seq = s.next_seq.max(seq + 1);
            s.ce += (f[15] & 3 == 3) as u64;
            s.frames += 1;
            s.bytes += f.len() as u64;
            s.last_ns = ts;
            *got.bins.entry(i).or_default().entry(ts / BIN_NS).or_default() += f.len() as u64;
        });
        if n == 0 {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
    while rx.next_block(|_, _, _| {}) > 0 {}
    got.ring_drops = rx.counters().ring_drops;
    Ok(got)
}

/// Busy CPU time of the whole machine so far (user + nice + system + irq + softirq), ns, from
/// /proc/stat: what the kernel spends forwarding shows here and nowhere else.
pub fn machine_busy_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = s.lines().next().unwrap_or("");
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let busy = v.first().copied().unwrap_or(0)
        + v.get(1).copied().unwrap_or(0)
        + v.get(2).copied().unwrap_or(0)
        + v.get(5).copied().unwrap_or(0)
        + v.get(6).copied().unwrap_or(0);
    busy * 1_000_000_000 / hz
}
