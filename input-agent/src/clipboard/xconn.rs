//! An X connection whose every wait has a deadline.
//!
//! x11rb's [`RustConnection`] blocks in its stream's `poll` while it waits for a reply, an
//! event or room to write. [`DeadlineStream`] bounds that poll by the deadline of the call in
//! progress ([`XConn::within`]): past it, the wait fails with `TimedOut` and the caller drops
//! the connection (a reply may still be on its way, so the connection is not used again). No
//! wait is ever longer than [`BACKSTOP`], even outside `within`.

use std::io;
use std::os::fd::AsFd;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nish_atspi::agent::connector::Connector;
use nish_atspi::agent::handed::x11_stream;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use x11rb::reexports::x11rb_protocol::parse_display::parse_display;
use x11rb::reexports::x11rb_protocol::xauth::get_auth;
use x11rb::rust_connection::{DefaultStream, PollMode, RustConnection, Stream};
use x11rb::utils::RawFdContainer;

/// The longest any single wait may last when no call deadline is set.
pub const BACKSTOP: Duration = Duration::from_secs(2);

/// A stream whose `poll` gives up at a deadline.
#[derive(Debug)]
pub struct DeadlineStream {
    inner: DefaultStream,
    deadline: Mutex<Option<Instant>>,
}

impl DeadlineStream {
    fn deadline(&self) -> Option<Instant> {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_deadline(&self, d: Option<Instant>) {
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = d;
    }
}

fn timed_out() -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        "the X server did not answer in time",
    )
}

impl Stream for DeadlineStream {
    fn poll(&self, mode: PollMode) -> io::Result<()> {
        let deadline = self.deadline().unwrap_or_else(|| Instant::now() + BACKSTOP);
        let mut flags = PollFlags::empty();
        if mode.readable() {
            flags |= PollFlags::POLLIN;
        }
        if mode.writable() {
            flags |= PollFlags::POLLOUT;
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(timed_out());
            }
            // Rounded up, so a wait never ends a little before its deadline and spins.
            let ms = (left.as_micros().div_ceil(1000)).min(u128::from(u16::MAX)) as u16;
            let mut fds = [PollFd::new(self.inner.as_fd(), flags)];
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(0) => continue,
                Ok(_) => return Ok(()),
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn read(&self, buf: &mut [u8], fd_storage: &mut Vec<RawFdContainer>) -> io::Result<usize> {
        self.inner.read(buf, fd_storage)
    }

    fn write(&self, buf: &[u8], fds: &mut Vec<RawFdContainer>) -> io::Result<usize> {
        self.inner.write(buf, fds)
    }

    fn write_vectored(
        &self,
        bufs: &[io::IoSlice<'_>],
        fds: &mut Vec<RawFdContainer>,
    ) -> io::Result<usize> {
        self.inner.write_vectored(bufs, fds)
    }
}

/// A connection to the X server with bounded waits.
pub struct XConn {
    /// The connection.
    pub conn: RustConnection<DeadlineStream>,
    /// The default screen's number.
    pub screen: usize,
}

impl std::fmt::Debug for XConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XConn")
            .field("screen", &self.screen)
            .finish()
    }
}

impl XConn {
    /// Connects through `connector`: handed in by the broker, or to `$DISPLAY` with the whole
    /// handshake ending by `deadline`.
    pub fn connect(connector: &Connector, deadline: Instant) -> Result<XConn, String> {
        if nish_atspi::agent::is_wayland() {
            return Err("no X connection on a Wayland session".into());
        }
        if let Connector::Broker(h) = connector {
            // In the agent: the broker connects and runs the handshake.
            let (s, setup, screen) = x11_stream(h).map_err(|f| f.message)?;
            let (inner, _) = DefaultStream::from_unix_stream(s)
                .map_err(|e| format!("cannot use the X connection: {e}"))?;
            let stream = DeadlineStream {
                inner,
                deadline: Mutex::new(None),
            };
            let conn = RustConnection::for_connected_stream(stream, setup)
                .map_err(|e| format!("cannot use the X connection: {e}"))?;
            let _ = deadline;
            return Ok(XConn { conn, screen });
        }
        let parsed = parse_display(None).map_err(|e| format!("no X display: {e}"))?;
        let screen = usize::from(parsed.screen);
        let mut last = String::from("no address to connect to");
        for addr in parsed.connect_instruction() {
            let (stream, (family, address)) = match DefaultStream::connect(&addr) {
                Ok(s) => s,
                Err(e) => {
                    last = format!("cannot connect to the X display: {e}");
                    continue;
                }
            };
            let (name, data) = get_auth(family, &address, parsed.display)
                .ok()
                .flatten()
                .unwrap_or_default();
            let stream = DeadlineStream {
                inner: stream,
                deadline: Mutex::new(Some(deadline)),
            };
            let conn = RustConnection::connect_to_stream_with_auth_info(stream, screen, name, data)
                .map_err(|e| format!("the X handshake failed: {e}"))?;
            conn.stream().set_deadline(None);
            return Ok(XConn { conn, screen });
        }
        Err(last)
    }

    /// Runs `f` with every wait inside it ending by `deadline`.
    pub fn within<T>(
        &self,
        deadline: Instant,
        f: impl FnOnce(&RustConnection<DeadlineStream>) -> T,
    ) -> T {
        self.conn.stream().set_deadline(Some(deadline));
        let r = f(&self.conn);
        self.conn.stream().set_deadline(None);
        r
    }

    /// The descriptor to poll for events.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.conn.stream().inner.as_fd()
    }
}

/// True when an x11rb error is a timed-out wait.
pub fn is_timeout(e: &x11rb::errors::ConnectionError) -> bool {
    matches!(e, x11rb::errors::ConnectionError::IoError(io) if io.kind() == io::ErrorKind::TimedOut)
}
