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
    let _ = std::fs::remove_file(path);
    let sock = UnixDatagram::bind(path).map_err(|e| format!("{}: {e}", path.display()))?;
    sock.set_read_timeout(Some(std::time::Duration::from_millis(100))).map_err(|e| e.to_string())?;
    let mut child = cmd.env("NOTIFY_SOCKET", path).spawn().map_err(|e| format!("npqos live: {e}"))?;
    let asked = std::time::Instant::now();
    let mut buf = [0u8; 512];
    loop {
        match sock.recv(&mut buf) {
            Ok(n) if buf[..n].starts_with(b"READY=1") => break,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            return Err(format!("npqos live exited with {status} before its rings were open"));
        }
        if asked.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("npqos live did not say it was ready within {within:?}"));
        }
    }
    let _ = std::fs::remove_file(path);
    Ok(child)
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

    /// A socket nobody listens on is an error for the caller to log.
    #[test]
    fn nobody_listening_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        assert!(ready_to(d.path().join("absent.sock").as_os_str(), "x").is_err());
    }
}
