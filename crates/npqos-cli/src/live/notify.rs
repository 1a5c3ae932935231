//! Readiness for a service manager (systemd's `sd_notify` protocol, `Type=notify`): once every
//! ring is open and every pipeline built, npqos live sends the datagram `READY=1` to the
//! AF_UNIX socket that `NOTIFY_SOCKET` names (a path, or after `@` an abstract name). A unit
//! (or a test) can then start its traffic when frames will be taken, not after a guessed delay.

use std::ffi::OsStr;
use std::io;
use std::os::unix::net::UnixDatagram;

/// Sends `READY=1` and `STATUS=<status>` to the socket named by `NOTIFY_SOCKET`; without it,
/// nothing. A failure is logged, never an error of the run (the frames are forwarded anyway).
pub fn ready(status: &str) {
    if let Some(to) = std::env::var_os("NOTIFY_SOCKET") {
        if let Err(e) = ready_to(&to, status) {
            tracing::warn!("NOTIFY_SOCKET {}: {e}", to.to_string_lossy());
        }
    }
}

/// [`ready`] to the socket `to` (a path, or `@` and an abstract name).
pub fn ready_to(to: &OsStr, status: &str) -> io::Result<()> {
    let msg = format!("READY=1\nSTATUS={status}\n");
    let sock = UnixDatagram::unbound()?;
    match to.as_encoded_bytes().strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
            sock.send_to_addr(msg.as_bytes(), &addr)?;
        }
        None => {
            sock.send_to(msg.as_bytes(), to)?;
        }
    }
    Ok(())
}

/// Spawns `cmd` (an `npqos live`, perhaps behind `ip netns exec`) with `NOTIFY_SOCKET` set to a
/// socket bound at `path`, and returns the child once it has sent `READY=1`: for tests and
/// scripts that must not send before its rings are open. An error if it exits first or says
/// nothing within `within` (it is killed then).
pub fn spawn_ready(
    cmd: &mut std::process::Command,
    path: &std::path::Path,
    within: std::time::Duration,
) -> Result<std::process::Child, String> {
    let listener = Listener::bind(path)?;
    let mut child = listener.spawn(cmd)?;
    match listener.wait(&mut child, within)? {
        Readiness::Ready => Ok(child),
        Readiness::Exited(status) => Err(format!("npqos live exited with {status} before its rings were open")),
        Readiness::Silent => {
            let _ = child.kill();
            let _ = child.wait();
            Err(format!("npqos live did not say it was ready within {within:?}"))
        }
    }
}

/// What [`Listener::wait`] saw.
#[derive(Debug)]
pub enum Readiness {
    /// `READY=1` arrived.
    Ready,
    /// The child exited first (the `Child` keeps its status for a later `wait`).
    Exited(std::process::ExitStatus),
    /// Neither within the time given; the child is left running.
    Silent,
}

/// A socket bound at a path for a child's `READY=1` (the file is removed when it is dropped).
pub struct Listener {
    sock: UnixDatagram,
    path: std::path::PathBuf,
}

impl Listener {
    /// Binds at `path`, replacing a file there.
    pub fn bind(path: &std::path::Path) -> Result<Self, String> {
        let _ = std::fs::remove_file(path);
        let sock = UnixDatagram::bind(path).map_err(|e| format!("{}: {e}", path.display()))?;
        sock.set_read_timeout(Some(std::time::Duration::from_millis(100))).map_err(|e| e.to_string())?;
        Ok(Listener { sock, path: path.to_path_buf() })
    }
    /// Spawns `cmd` with `NOTIFY_SOCKET` naming this socket.
    pub fn spawn(&self, cmd: &mut std::process::Command) -> Result<std::process::Child, String> {
        cmd.env("NOTIFY_SOCKET", &self.path).spawn().map_err(|e| format!("npqos live: {e}"))
    }
    /// Spawns `cmd` and returns it once it says it is ready or has exited (a start that fails,
    /// for a caller that expects one); an error, the child killed, if neither within `within`.
    pub fn spawn_started(
        &self,
        cmd: &mut std::process::Command,
        within: std::time::Duration,
    ) -> Result<std::process::Child, String> {
        let mut child = self.spawn(cmd)?;
        match self.wait(&mut child, within)? {
            Readiness::Ready | Readiness::Exited(_) => Ok(child),
            Readiness::Silent => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("npqos live did not say it was ready within {within:?}"))
            }
        }
    }
    /// Waits up to `within` for `READY=1` or for `child` to exit.
    pub fn wait(&self, child: &mut std::process::Child, within: std::time::Duration) -> Result<Readiness, String> {
        let asked = std::time::Instant::now();
        let mut buf = [0u8; 512];
        loop {
            match self.sock.recv(&mut buf) {
                Ok(n) if buf[..n].starts_with(b"READY=1") => return Ok(Readiness::Ready),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) => return Err(format!("{}: {e}", self.path.display())),
            }
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                return Ok(Readiness::Exited(status));
            }
            if asked.elapsed() > within {
                return Ok(Readiness::Silent);
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(sock: &UnixDatagram) -> String {
        sock.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 256];
        let n = sock.recv(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// The datagram reaches a socket named by a path and one named by an abstract name.
    #[test]
    fn ready_reaches_a_path_and_an_abstract_socket() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("notify.sock");
        let sock = UnixDatagram::bind(&path).unwrap();
        ready_to(path.as_os_str(), "forwarding in0 -> out0").unwrap();
        assert_eq!(received(&sock), "READY=1\nSTATUS=forwarding in0 -> out0\n");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("npqos-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let sock = UnixDatagram::bind_addr(&addr).unwrap();
        ready_to(OsStr::new(&format!("@{name}")), "x").unwrap();
        assert_eq!(received(&sock), "READY=1\nSTATUS=x\n");
    }

    /// A listener tells a child that says it is ready from one that exits first and from one
    /// that says nothing in time (left running).
    #[test]
    fn a_listener_sees_ready_an_exit_or_silence() {
        use std::process::Command;
        use std::time::Duration;
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("n.sock");
        let l = Listener::bind(&path).unwrap();
        let mut exits = l.spawn(Command::new("sh").args(["-c", "exit 3"])).unwrap();
        match l.wait(&mut exits, Duration::from_secs(10)).unwrap() {
            Readiness::Exited(s) => assert_eq!(s.code(), Some(3)),
            r => panic!("{r:?}"),
        }
        assert_eq!(exits.wait().unwrap().code(), Some(3), "the status stays with the child");
        let mut silent = l.spawn(Command::new("sleep").arg("5")).unwrap();
        assert!(matches!(l.wait(&mut silent, Duration::from_millis(300)).unwrap(), Readiness::Silent));
        ready_to(path.as_os_str(), "x").unwrap();
        assert!(matches!(l.wait(&mut silent, Duration::from_secs(10)).unwrap(), Readiness::Ready));
        silent.kill().unwrap();
        silent.wait().unwrap();
        drop(l);
        assert!(!path.exists(), "the socket's file goes with the listener");
    }

    /// A socket nobody listens on is an error for the caller to log.
    #[test]
    fn nobody_listening_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(ready_to(d.path().join("absent.sock").as_os_str(), "x").is_err());
    }
}
