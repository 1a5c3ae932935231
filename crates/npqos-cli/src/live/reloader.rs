//! SIGHUP's reload off the forwarding threads (docs/live.md, "Reload"). A thread of its own waits
//! for the signal, reads the file again and builds both ways' pipelines for every forwarding
//! thread, then hands each its own on a channel and wakes it through an eventfd in its poll set. The forwarding
//! thread only swaps them in ([`Reloading::take`]): it never stops forwarding to read a file or
//! to build a table, and looking at the channel each turn is an atomic load, not a system call.
//!
//! [`Reloading::take`]: npqos_sim::live::reload::Reloading::take

use super::monotonic_ns;
use npqos_sim::live::{Forwarder, LiveSpec};
use signal_hook::iterator::{Handle, Signals};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc::{channel, Receiver, TryRecvError};

/// How to read the file again at SIGHUP: the configuration, or its problems (or the key that
/// changed and needs a restart) in one message.
pub type ReadAgain = Box<dyn Fn() -> Result<LiveSpec, String> + Send>;

/// One SIGHUP's outcome: when the signal was taken (CLOCK_MONOTONIC, ns), and both ways'
/// pipelines built for the file read again, or why it was refused.
pub struct Built {
    pub signalled_ns: u64,
    /// When the pipelines were built (or the file refused), CLOCK_MONOTONIC, ns.
    pub built_ns: u64,
    pub pipelines: Result<(Forwarder, Option<Forwarder>), String>,
}

/// The reload thread; [`Reloader::stop`] ends it.
pub struct Reloader {
    signals: Handle,
    thread: std::thread::JoinHandle<()>,
}

/// A forwarding thread's end of the reload thread: its own pipelines of each reload, and an
/// eventfd for its poll set.
pub struct ReloadPort {
    built: Receiver<Built>,
    wake: OwnedFd,
}

/// A fresh non-blocking eventfd.
fn eventfd() -> std::io::Result<OwnedFd> {
    // SAFETY: eventfd(2) with valid flags; the descriptor is owned from here on.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Both ways' pipelines for the file read again, or why not.
fn build(next: &LiveSpec, max_in: u32, max_back: Option<u32>) -> Result<(Forwarder, Option<Forwarder>), String> {
    let way_in = Forwarder::new(next, max_in).map_err(|e| e.to_string())?;
    let way_back = match (max_back, next.reversed()) {
        (Some(max), Some(back)) => Some(Forwarder::new(&back, max).map_err(|e| format!("the way back: {e}"))?),
        _ => None,
    };
    Ok((way_in, way_back))
}

impl Reloader {
    /// Starts the thread: at each signal of `signals`, `read` the file and build, for each of
    /// `threads` forwarding threads, the way in's pipeline with transmit slots of `max_in`
    /// bytes and, if `max_back` is given (the way back is shaped), the way back's. Returns the
    /// thread and one port per forwarding thread.
    pub fn start(
        signals: Signals,
        read: ReadAgain,
        max_in: u32,
        max_back: Option<u32>,
        threads: usize,
    ) -> std::io::Result<(Self, Vec<ReloadPort>)> {
        let mut ports = Vec::new();
        let mut ends = Vec::new();
        for _ in 0..threads.max(1) {
            let wake = eventfd()?;
            let ring = wake.try_clone()?;
            let (tx, built) = channel();
            ports.push(ReloadPort { built, wake });
            ends.push((tx, ring));
        }
        let handle = signals.handle();
        let mut signals = signals;
        let thread = std::thread::Builder::new().name("npqos-reload".into()).spawn(move || {
            // Ahead of the forwarding thread when they share a CPU, so that a reload takes a
            // few milliseconds of it at once rather than half of it for twice as long (nice
            // -10 needs CAP_SYS_NICE, which npqos live's raw sockets come with; without it the
            // thread keeps the process's priority).
            // SAFETY: setpriority(2) on the calling thread (who = 0).
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -10) };
            for _ in signals.forever() {
                let signalled_ns = monotonic_ns();
                // Every thread's pipelines are built before any is handed over.
                let pipelines: Vec<_> = match read() {
                    Ok(next) => {
                        let own = next.for_thread(ends.len());
                        ends.iter().map(|_| build(&own, max_in, max_back)).collect()
                    }
                    Err(e) => ends.iter().map(|_| Err(e.clone())).collect(),
                };
                if let Some(Err(e)) = pipelines.first() {
                    tracing::error!("reload refused, the running configuration stays: {e}");
                }
                let built_ns = monotonic_ns();
                for ((tx, ring), pipelines) in ends.iter().zip(pipelines) {
                    if tx.send(Built { signalled_ns, built_ns, pipelines }).is_err() {
                        return;
                    }
                    let one = 1u64.to_ne_bytes();
                    // SAFETY: writes 8 bytes from a valid buffer to our eventfd.
                    unsafe { libc::write(ring.as_raw_fd(), one.as_ptr().cast(), 8) };
                }
            }
        })?;
        Ok((Reloader { signals: handle, thread }, ports))
    }

    /// Ends the thread (a reload under way is finished and dropped).
    pub fn stop(self) {
        self.signals.close();
        let _ = self.thread.join();
    }
}

impl ReloadPort {
    /// The descriptor that becomes readable when a reload is ready (for the poll set).
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// A reload that is ready, if any: an atomic load when there is none.
    pub fn ready(&self) -> Option<Built> {
        match self.built.try_recv() {
            Ok(b) => {
                self.clear();
                Some(b)
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => None,
        }
    }

    /// Takes the eventfd's count (after a wake-up), so that poll sleeps again.
    pub fn clear(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a valid buffer from our non-blocking eventfd.
        unsafe { libc::read(self.wake.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
    }
}
