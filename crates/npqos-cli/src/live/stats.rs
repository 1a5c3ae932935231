//! `npqos live`'s statistics while it runs (docs/live.md, "Statistics while it runs"): the
//! forwarding thread fills a snapshot of its counters every `live.sample_every` and publishes
//! it through a triple buffer (no lock, no system call: the buffers are its own and reach
//! their size in the first snapshots); a thread of its own serves the latest one, read-only,
//! on a TCP address (loopback unless the file says otherwise) or a UNIX socket readable by its
//! owner only: `GET /metrics` in the Prometheus text format, `GET /tc` as `tc -s class show`
//! prints, anything else answered 400.
//!
//! A hand-written responder rather than an HTTP server crate: what matters here is the bound
//! on what hostile clients can make it hold, and this one serves one connection at a time
//! with a deadline for the whole exchange (1 s), reads at most [`REQUEST_MAX`] bytes of a
//! request and holds one response (one line per metric and row: about 1.5 KiB per flow of the
//! table, 6.3 MB at the default 4,096 flows) at a time. A client that connects a
//! thousand times, sends garbage or never reads costs at most that, and waits its turn.

use npqos_sim::live::snapshot::{self, RateMemory, ServiceInfo, Snapshot, Way};
use npqos_sim::live::spec::StatsListen;
use npqos_sim::live::Forwarder;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest request read, bytes.
pub const REQUEST_MAX: usize = 4096;
/// The deadline of one exchange, from accept to the last byte written.
pub const DEADLINE: Duration = Duration::from_secs(1);

/// What is published: the way in, and the way back when it is shaped, each with its
/// services (the way in's change at a reload).
#[derive(Clone, Debug, Default)]
pub struct Published {
    pub way_in: Snapshot,
    pub way_back: Option<Snapshot>,
    pub services_in: Arc<Vec<ServiceInfo>>,
    pub services_back: Option<Arc<Vec<ServiceInfo>>>,
}

/// The forwarding thread's end: fills and publishes.
pub struct Publisher {
    input: triple_buffer::Input<Published>,
    mem: (RateMemory, RateMemory),
    services: (Arc<Vec<ServiceInfo>>, Option<Arc<Vec<ServiceInfo>>>),
}

impl Publisher {
    /// The services from now on (a reload: the way in's, and the shaped way back's if it
    /// changed); their counters start again with the new configuration's forwarders.
    pub fn set_services(&mut self, way_in: Vec<ServiceInfo>, way_back: Option<Vec<ServiceInfo>>) {
        self.services.0 = Arc::new(way_in);
        self.mem.0 = RateMemory::default();
        if let Some(b) = way_back {
            self.services.1 = Some(Arc::new(b));
            self.mem.1 = RateMemory::default();
        }
    }

    /// Snapshots of `fw` (and the shaped way back's `back`) at `now`, published.
    pub fn publish(&mut self, fw: &Forwarder, back: Option<&Forwarder>, now: npqos_core::Instant) {
        let p = self.input.input_buffer_mut();
        // Reference counts only: no allocation, no system call.
        p.services_in = self.services.0.clone();
        p.services_back = self.services.1.clone();
        fw.snapshot(now, &mut p.way_in, &mut self.mem.0);
        if let Some(b) = back {
            b.snapshot(now, p.way_back.get_or_insert_with(Snapshot::default), &mut self.mem.1);
        }
        self.input.publish();
    }
}

/// The serving thread, stopped and joined on drop (its UNIX socket removed).
pub struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    unix: Option<std::path::PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(p) = &self.unix {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A listening socket of either kind.
enum Listener {
    Tcp(std::net::TcpListener),
    Unix(std::os::unix::net::UnixListener),
}

/// An accepted connection of either kind.
trait Conn: Read + Write {
    fn deadline(&self, d: Duration) -> std::io::Result<()>;
}
impl Conn for std::net::TcpStream {
    fn deadline(&self, d: Duration) -> std::io::Result<()> {
        self.set_nonblocking(false)?;
        self.set_read_timeout(Some(d))?;
        self.set_write_timeout(Some(d))
    }
}
impl Conn for std::os::unix::net::UnixStream {
    fn deadline(&self, d: Duration) -> std::io::Result<()> {
        self.set_nonblocking(false)?;
        self.set_read_timeout(Some(d))?;
        self.set_write_timeout(Some(d))
    }
}

/// Binds `at` and starts serving what the returned publisher publishes; `ways` are the
/// services of the way in and of the shaped way back.
///
/// Errors: the address cannot be bound (in use, not ours, no such directory).
pub fn start(
    at: &StatsListen,
    services_in: Vec<ServiceInfo>,
    services_back: Option<Vec<ServiceInfo>>,
    threads: usize,
) -> std::io::Result<(Vec<Publisher>, Server)> {
    let (listener, unix) = match at {
        StatsListen::Tcp(a) => {
            if !a.ip().is_loopback() {
                tracing::warn!("statistics served on {a}, not loopback: anyone who reaches it can read them");
            }
            (Listener::Tcp(std::net::TcpListener::bind(a)?), None)
        }
        StatsListen::Unix(p) => {
            let _ = std::fs::remove_file(p);
            let l = std::os::unix::net::UnixListener::bind(p)?;
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
            (Listener::Unix(l), Some(p.clone()))
        }
    };
    match &listener {
        Listener::Tcp(l) => l.set_nonblocking(true)?,
        Listener::Unix(l) => l.set_nonblocking(true)?,
    }
    // One triple buffer per forwarding thread; the server adds their snapshots up.
    let (inputs, outputs): (Vec<_>, Vec<_>) =
        (0..threads.max(1)).map(|_| triple_buffer::triple_buffer(&Published::default())).unzip();
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let thread = std::thread::Builder::new().name("npqos-stats".into()).spawn(move || serve(listener, outputs, &s2))?;
    let services = (Arc::new(services_in), services_back.map(Arc::new));
    let publishers =
        inputs.into_iter().map(|input| Publisher { input, mem: Default::default(), services: services.clone() });
    Ok((publishers.collect(), Server { stop, thread: Some(thread), unix }))
}

/// The latest of every thread's snapshots, added up (the first thread's services).
fn merged(outputs: &mut [triple_buffer::Output<Published>]) -> Published {
    let mut all = outputs.iter_mut();
    let mut p = all.next().map(|o| o.read().clone()).unwrap_or_default();
    for o in all {
        let q = o.read();
        p.way_in.add(&q.way_in);
        if let (Some(a), Some(b)) = (p.way_back.as_mut(), q.way_back.as_ref()) {
            a.add(b);
        }
    }
    p
}

fn serve(listener: Listener, mut outputs: Vec<triple_buffer::Output<Published>>, stop: &AtomicBool) {
    let fd = match &listener {
        Listener::Tcp(l) => std::os::fd::AsRawFd::as_raw_fd(l),
        Listener::Unix(l) => std::os::fd::AsRawFd::as_raw_fd(l),
    };
    while !stop.load(Ordering::Relaxed) {
        // Wait for a client, looking at the stop flag every 100 ms.
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
            continue;
        }
        let conn: Box<dyn Conn> = match &listener {
            Listener::Tcp(l) => match l.accept() {
                Ok((c, _)) => Box::new(c),
                Err(_) => continue,
            },
            Listener::Unix(l) => match l.accept() {
                Ok((c, _)) => Box::new(c),
                Err(_) => continue,
            },
        };
        let p = merged(&mut outputs);
        let mut ways = vec![Way { name: "in", snapshot: &p.way_in, services: &p.services_in }];
        if let (Some(s), Some(b)) = (&p.way_back, &p.services_back) {
            ways.push(Way { name: "back", snapshot: s, services: b });
        }
        if let Err(e) = exchange(conn, &ways) {
            tracing::debug!("statistics client: {e}");
        }
    }
}

/// One request and its answer, within [`DEADLINE`].
fn exchange(mut c: Box<dyn Conn>, ways: &[Way<'_>]) -> std::io::Result<()> {
    let t0 = Instant::now();
    c.deadline(DEADLINE)?;
    let mut buf = [0u8; REQUEST_MAX];
    let mut n = 0;
    while n < buf.len() && !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") && !buf[..n].windows(2).any(|w| w == b"\n\n")
    {
        let left = DEADLINE.checked_sub(t0.elapsed()).filter(|d| !d.is_zero());
        let Some(left) = left else { return Ok(()) };
        c.deadline(left)?;
        match c.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    let line = std::str::from_utf8(&buf[..n]).unwrap_or("").lines().next().unwrap_or("");
    let mut body = String::new();
    let (status, kind) = match line.split_whitespace().collect::<Vec<_>>()[..] {
        ["GET", "/metrics", ..] | ["GET", "/", ..] => {
            snapshot::prometheus(ways, &mut body);
            ("200 OK", "text/plain; version=0.0.4")
        }
        ["GET", "/tc", ..] => {
            snapshot::tc_style(ways, 20, &mut body);
            ("200 OK", "text/plain")
        }
        _ => {
            body.push_str(
                "npqos live statistics: GET /metrics (Prometheus text) or GET /tc (tc -s style); read-only\n",
            );
            ("400 Bad Request", "text/plain")
        }
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let left = DEADLINE.checked_sub(t0.elapsed()).filter(|d| !d.is_zero()).unwrap_or(Duration::from_millis(1));
    c.deadline(left)?;
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())?;
    c.flush()
}

/// Fetches `path` (`/metrics`, `/tc`) from the statistics of an `npqos live` serving at `at`.
///
/// Errors: nothing serves there, or it did not answer 200.
pub fn fetch(at: &StatsListen, path: &str) -> Result<String, String> {
    let req = format!("GET {path} HTTP/1.0\r\n\r\n");
    let mut text = String::new();
    let r = match at {
        StatsListen::Tcp(a) => std::net::TcpStream::connect_timeout(a, Duration::from_secs(2)).and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(req.as_bytes())?;
            s.read_to_string(&mut text)
        }),
        StatsListen::Unix(p) => std::os::unix::net::UnixStream::connect(p).and_then(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(req.as_bytes())?;
            s.read_to_string(&mut text)
        }),
    };
    r.map_err(|e| format!("no npqos live statistics at {at}: {e}"))?;
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| format!("{at}: not an HTTP answer"))?;
    if !head.starts_with("HTTP/1.0 200") {
        return Err(format!("{at}: {}", head.lines().next().unwrap_or("")));
    }
    Ok(body.to_string())
}
