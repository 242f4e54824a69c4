//! The one place the sandbox crate needs `unsafe`: raw system calls that no safe wrapper offers,
//! made by the self-test to show they are refused; taking ownership of a descriptor a process
//! inherited, checked, once ([`adopt`]: every agent's broker link, the MCP shim's control
//! channel, the descriptors a test hands `--self-test`); taking the descriptors the broker
//! hands an agent (`SCM_RIGHTS`), the same way in every agent ([`recv_with_fds`]); and the
//! `SIGSYS` handler of the agents' seccomp allow-lists (it logs a refused call and makes it
//! fail with `EPERM`).
#![allow(unsafe_code)]

use std::os::fd::{BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::libc;

/// Makes system call `nr` with integer arguments and returns the errno it failed with, or
/// `None` when it succeeded (a descriptor it returned is closed).
pub(crate) fn errno_of(nr: libc::c_long, args: [libc::c_long; 4]) -> Option<i32> {
    // SAFETY: every call made through here passes only integers and null pointers
    // (perf_event_open with a null attribute, keyctl on the session keyring id, bpf with a null
    // attribute, userfaultfd with flags, kill/tkill/tgkill with signal 0, which only checks
    // that the target could be signalled, fcntl(F_SETOWN) on a socket the caller owns,
    // prlimit64 with null limits, personality's query value 0xffffffff); the
    // kernel validates each argument and touches no memory of this process for them. A
    // returned descriptor is closed below.
    let r = unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3]) };
    if r < 0 {
        return Some(nix::errno::Errno::last_raw());
    }
    if matches!(
        nr,
        libc::SYS_perf_event_open | libc::SYS_userfaultfd | libc::SYS_bpf
    ) {
        // SAFETY: `r` is a descriptor this call just returned to this process and nothing
        // else holds it.
        unsafe {
            libc::close(r as libc::c_int);
        }
    }
    None
}

/// What an inherited descriptor may be, for [`adopt`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A Unix stream socket (a socketpair end, a connection): the broker's link of an agent,
    /// a host's control channel, a connection a test hands to `--self-test`.
    UnixStream,
    /// A pipe or a FIFO (one direction of a host's control channel).
    Fifo,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::UnixStream => "a socket (a Unix stream socket)",
            Kind::Fifo => "a pipe",
        }
    }
}

/// Why an inherited descriptor was not adopted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdoptError {
    /// 0, 1 or 2: standard input, output or error.
    StandardStream(RawFd),
    /// No open descriptor has that number.
    NotOpen(RawFd),
    /// It is close-on-exec, so it was not inherited: this process opened it (something else
    /// owns it), or it was adopted already.
    NotInherited(RawFd),
    /// It is another kind of file than the caller takes.
    Kind {
        /// The number.
        fd: RawFd,
        /// What it is.
        found: &'static str,
        /// What the caller takes.
        accept: Vec<Kind>,
    },
    /// Close-on-exec could not be set on it.
    CloseOnExec(RawFd, nix::errno::Errno),
}

impl std::fmt::Display for AdoptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AdoptError::StandardStream(fd) => write!(
                f,
                "fd {fd} is a standard stream; pass a descriptor numbered 3 or higher"
            ),
            AdoptError::NotOpen(fd) => write!(f, "fd {fd} is not open"),
            AdoptError::NotInherited(fd) => write!(
                f,
                "fd {fd} was not inherited (it is close-on-exec: this process's own, or taken already)"
            ),
            AdoptError::Kind { fd, found, accept } => {
                let wanted: Vec<&str> = accept.iter().map(|k| k.name()).collect();
                write!(f, "fd {fd} is {found}, not {}", wanted.join(" nor "))
            }
            AdoptError::CloseOnExec(fd, e) => write!(f, "fd {fd}: cannot set close-on-exec: {e}"),
        }
    }
}

impl std::error::Error for AdoptError {}

impl From<AdoptError> for std::io::Error {
    fn from(e: AdoptError) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string())
    }
}

/// Adoptions are made one at a time: the close-on-exec check and the flag set after it are one
/// step for every caller.
static ADOPTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes ownership of the descriptor `fd` this process inherited, once, when it is of a kind
/// in `accept`; returns it with its kind, close-on-exec from now on.
///
/// Refused: a standard stream (0 to 2), a number that is not open, a descriptor that is
/// close-on-exec (a descriptor inherited across `exec` never is, so this one was opened by
/// this process and is owned elsewhere in it, or was adopted already: adopting sets the flag),
/// another kind of file. Every check is made before ownership is taken, so a refused number
/// stays as it was.
pub fn adopt(fd: RawFd, accept: &[Kind]) -> Result<(OwnedFd, Kind), AdoptError> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    use nix::sys::stat::{SFlag, fstat};
    if (0..=2).contains(&fd) {
        return Err(AdoptError::StandardStream(fd));
    }
    if fd < 0 {
        return Err(AdoptError::NotOpen(fd));
    }
    let _one_at_a_time = ADOPTING.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: F_GETFD takes no pointer argument and only reads the descriptor table; on a
    // number that is not open it fails with EBADF and changes nothing.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(AdoptError::NotOpen(fd));
    }
    if flags & libc::FD_CLOEXEC != 0 {
        return Err(AdoptError::NotInherited(fd));
    }
    // SAFETY: `fd` is open (F_GETFD succeeded under the lock, and nothing in this process
    // closes a descriptor it does not own); the borrow lives only for the checks below, before
    // ownership is taken.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let st = fstat(borrowed).map_err(|_| AdoptError::NotOpen(fd))?;
    let fmt = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    let kind = if fmt == SFlag::S_IFIFO {
        Ok(Kind::Fifo)
    } else if fmt == SFlag::S_IFSOCK {
        use nix::sys::socket::{AddressFamily, SockType, SockaddrLike as _, UnixAddr};
        use nix::sys::socket::{getsockname, getsockopt, sockopt};
        let stream = getsockopt(&borrowed, sockopt::SockType).is_ok_and(|t| t == SockType::Stream);
        let unix =
            getsockname::<UnixAddr>(fd).is_ok_and(|a| a.family() == Some(AddressFamily::Unix));
        if stream && unix {
            Ok(Kind::UnixStream)
        } else {
            Err("a socket of another kind")
        }
    } else if fmt == SFlag::S_IFREG {
        Err("a regular file")
    } else if fmt == SFlag::S_IFCHR {
        Err("a character device (a terminal?)")
    } else if fmt == SFlag::S_IFDIR {
        Err("a directory")
    } else {
        Err("another kind of file")
    };
    let kind = match kind {
        Ok(k) if accept.contains(&k) => k,
        Ok(k) => {
            return Err(AdoptError::Kind {
                fd,
                found: match k {
                    Kind::UnixStream => "a Unix stream socket",
                    Kind::Fifo => "a pipe",
                },
                accept: accept.to_vec(),
            });
        }
        Err(found) => {
            return Err(AdoptError::Kind {
                fd,
                found,
                accept: accept.to_vec(),
            });
        }
    };
    fcntl(borrowed, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
        .map_err(|e| AdoptError::CloseOnExec(fd, e))?;
    // SAFETY: `fd` is open and was inherited (it was not close-on-exec: nothing this process
    // opened, so nothing in it owns the number), and it was not adopted before (that would
    // have set close-on-exec, which was just checked under the lock and is set now). So the
    // new `OwnedFd` is its only owner, and a later adoption of the number is refused.
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, kind))
}

/// [`adopt`] of a Unix stream socket: an agent's link to the broker.
pub fn adopt_unix_stream(fd: RawFd) -> Result<UnixStream, AdoptError> {
    let (fd, _) = adopt(fd, &[Kind::UnixStream])?;
    Ok(UnixStream::from(fd))
}

/// Most descriptors taken from one read of the broker link; the broker attaches one per answer.
pub const MAX_FDS_PER_READ: usize = 8;

/// Reads from the broker's socket like `read`, and takes ownership of the descriptors that came
/// with the bytes, close-on-exec. `dont_wait`: `MSG_DONTWAIT` (for a non-blocking caller).
/// Returns the byte count and the descriptors.
pub fn recv_with_fds(
    fd: std::os::fd::BorrowedFd<'_>,
    buf: &mut [u8],
    dont_wait: bool,
) -> std::io::Result<(usize, Vec<std::os::fd::OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::AsRawFd as _;
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS_PER_READ]);
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if dont_wait {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    let msg = recvmsg::<()>(fd.as_raw_fd(), &mut iov, Some(&mut space), flags)
        .map_err(std::io::Error::from)?;
    let n = msg.bytes;
    let mut fds = Vec::new();
    // A truncated control message is refused by `cmsgs`: the descriptors that fit are lost
    // (the broker never sends that many).
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmRights(raw) = c {
                for r in raw {
                    // SAFETY: the kernel installed `r` in this process's table just now for
                    // this message (SCM_RIGHTS); nothing else knows of it, so the new `OwnedFd`
                    // is its only owner.
                    fds.push(unsafe { OwnedFd::from_raw_fd(r) });
                }
            }
        }
    }
    Ok((n, fds))
}

/// The line the SIGSYS handler writes for a system call outside an agent's allow-list, before
/// the call's number: `nish-sandbox: refused system call 999`.
pub const REFUSED_LINE: &str = "nish-sandbox: refused system call ";

/// The line written once, after [`MAX_REFUSAL_LINES`] refusals, instead of any further ones.
pub const REFUSALS_SILENCED: &str = "nish-sandbox: further refused system calls not logged";

/// How many refusals the SIGSYS handler logs in one process; later ones are refused just the
/// same, silently (a library retrying a refused call in a loop must not flood the log).
pub const MAX_REFUSAL_LINES: u32 = 32;

/// Refusals logged so far (atomics are async-signal-safe).
static REFUSALS_LOGGED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The start of the kernel's `siginfo_t` for `SIGSYS` on a 64-bit architecture
/// (`<asm-generic/siginfo.h>`: three ints, padding to the union, then `_sigsys`).
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
#[repr(C)]
struct SigsysInfo {
    signo: libc::c_int,
    errno: libc::c_int,
    code: libc::c_int,
    _pad: libc::c_int,
    call_addr: *mut libc::c_void,
    syscall: libc::c_int,
    arch: libc::c_uint,
}

/// Writes `nr` in decimal after `prefix` into `buf` and returns the length, with no allocation.
fn refusal_line(buf: &mut [u8; 96], prefix: &[u8], nr: u32) -> usize {
    let mut n = prefix.len().min(buf.len() - 12);
    buf[..n].copy_from_slice(&prefix[..n]);
    let mut digits = [0u8; 10];
    let mut len = 0;
    let mut v = nr;
    loop {
        digits[len] = b'0' + (v % 10) as u8;
        len += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    for d in digits[..len].iter().rev() {
        buf[n] = *d;
        n += 1;
    }
    buf[n] = b'\n';
    n + 1
}

/// The `SIGSYS` handler for a system call the allow-list traps (`SECCOMP_RET_TRAP`): logs one
/// line on descriptor 2 (at most [`MAX_REFUSAL_LINES`] in all) and makes the call return
/// `-EPERM`. Only async-signal-safe calls: `write`, atomics, and errno saved and restored.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
extern "C" fn on_sigsys(_sig: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    use std::sync::atomic::Ordering;
    // SAFETY: `__errno_location` returns this thread's errno, valid for the thread's life; the
    // handler saves it and restores it below so the interrupted code sees its own value.
    let saved_errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel delivers SIGSYS from a seccomp trap with a `siginfo_t` whose union is
    // `_sigsys` (`SYS_SECCOMP`), laid out as `SigsysInfo` on 64-bit architectures; the pointer
    // is valid for the handler's duration. A SIGSYS sent by another means (kill is limited to
    // this process by the filters) carries other fields: the number logged is then meaningless
    // but harmless, and the code is checked before the context is changed.
    let (code, nr) = unsafe {
        let i = &*(info as *const SigsysInfo);
        (i.code, i.syscall)
    };
    const SYS_SECCOMP: libc::c_int = 1;
    if code != SYS_SECCOMP {
        return;
    }
    let count = REFUSALS_LOGGED.fetch_add(1, Ordering::Relaxed);
    let mut buf = [0u8; 96];
    let line: &[u8] = if count < MAX_REFUSAL_LINES {
        let n = refusal_line(&mut buf, REFUSED_LINE.as_bytes(), nr as u32);
        &buf[..n]
    } else if count == MAX_REFUSAL_LINES {
        buf[..REFUSALS_SILENCED.len()].copy_from_slice(REFUSALS_SILENCED.as_bytes());
        buf[REFUSALS_SILENCED.len()] = b'\n';
        &buf[..REFUSALS_SILENCED.len() + 1]
    } else {
        &[]
    };
    if !line.is_empty() {
        // SAFETY: `write` is async-signal-safe; `line` is a live buffer of `line.len()` bytes on
        // this handler's stack. A short or failed write loses (part of) the line, nothing else.
        let _ = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
    }
    // SAFETY: for a handler installed with SA_SIGINFO the third argument is the interrupted
    // thread's `ucontext_t`, which the kernel restores on `rt_sigreturn`; the register that
    // carries the system call's return value (the call was not made: the filter trapped it)
    // is set to -EPERM, so the caller sees the call fail with EPERM.
    unsafe {
        let uc = &mut *(context as *mut libc::ucontext_t);
        #[cfg(target_arch = "x86_64")]
        {
            uc.uc_mcontext.gregs[libc::REG_RAX as usize] = -(libc::EPERM as libc::greg_t);
        }
        #[cfg(target_arch = "aarch64")]
        {
            uc.uc_mcontext.regs[0] = (-(libc::EPERM as i64)) as u64;
        }
        *libc::__errno_location() = saved_errno;
    }
}

/// Installs [`on_sigsys`] for `SIGSYS` (process-wide; threads share it) and unblocks `SIGSYS`
/// in the calling thread. True when the handler is in place: the allow-list then traps to it;
/// false on architectures without it (the allow-list then fails calls with `EPERM` directly).
pub(crate) fn install_sigsys_handler() -> Result<bool, String> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
        let action = SigAction::new(
            SigHandler::SigAction(on_sigsys),
            SaFlags::SA_SIGINFO,
            SigSet::empty(),
        );
        // SAFETY: `on_sigsys` uses only async-signal-safe operations (an atomic counter, a
        // stack buffer, `write` on descriptor 2, errno saved and restored) and touches only the
        // siginfo and ucontext the kernel hands it; replacing the SIGSYS disposition affects
        // no other handler. No other code of the agents handles SIGSYS.
        unsafe { sigaction(Signal::SIGSYS, &action) }
            .map_err(|e| format!("SIGSYS handler: {e}"))?;
        let mut sys = SigSet::empty();
        sys.add(Signal::SIGSYS);
        nix::sys::signal::pthread_sigmask(
            nix::sys::signal::SigmaskHow::SIG_UNBLOCK,
            Some(&sys),
            None,
        )
        .map_err(|e| format!("unblock SIGSYS: {e}"))?;
        Ok(true)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::{AdoptError, Kind, adopt, adopt_unix_stream};
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    use std::os::fd::{AsFd, AsRawFd as _, IntoRawFd as _};

    /// Clears close-on-exec, as a parent passing `fd` across `exec` does.
    fn inherited<F: AsFd>(f: &F) {
        fcntl(f.as_fd(), FcntlArg::F_SETFD(FdFlag::empty())).unwrap();
    }

    #[test]
    fn refusal_line_is_the_prefix_and_the_number() {
        let mut buf = [0u8; 96];
        let n = super::refusal_line(&mut buf, super::REFUSED_LINE.as_bytes(), 1073741824 + 59);
        assert_eq!(&buf[..n], b"nish-sandbox: refused system call 1073741883\n");
        let n = super::refusal_line(&mut buf, super::REFUSED_LINE.as_bytes(), 0);
        assert_eq!(&buf[..n], b"nish-sandbox: refused system call 0\n");
    }

    #[test]
    fn an_inherited_unix_stream_is_adopted_once_and_close_on_exec() {
        let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        inherited(&a);
        let raw = a.into_raw_fd();
        let mut adopted = adopt_unix_stream(raw).expect("adopted");
        let flags = fcntl(&adopted, FcntlArg::F_GETFD).unwrap();
        assert_ne!(flags & nix::libc::FD_CLOEXEC, 0, "close-on-exec");
        // A second adoption of the number would make a second owner: refused.
        assert_eq!(
            adopt_unix_stream(raw).unwrap_err(),
            AdoptError::NotInherited(raw)
        );
        // It is the socket.
        use std::io::{Read as _, Write as _};
        adopted.write_all(b"x").unwrap();
        let mut got = [0u8; 1];
        b.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"x");
    }

    #[test]
    fn what_is_not_an_inherited_descriptor_of_the_kind_asked_is_refused() {
        for fd in 0..3 {
            let e = adopt(fd, &[Kind::UnixStream, Kind::Fifo]).unwrap_err();
            assert_eq!(e, AdoptError::StandardStream(fd));
            assert!(e.to_string().contains("standard stream"), "{e}");
        }
        let e = adopt(1 << 30, &[Kind::UnixStream]).unwrap_err();
        assert!(e.to_string().contains("not open"), "{e}");
        // This process's own socket (close-on-exec, as everything it opens): owned elsewhere.
        let (own, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(
            adopt(own.as_raw_fd(), &[Kind::UnixStream]).unwrap_err(),
            AdoptError::NotInherited(own.as_raw_fd())
        );
        // A pipe where a socket is asked; a datagram socket; a regular file.
        let (r, _w) = nix::unistd::pipe().unwrap();
        inherited(&r);
        let e = adopt(r.as_raw_fd(), &[Kind::UnixStream]).unwrap_err();
        assert!(e.to_string().contains("is a pipe, not a socket"), "{e}");
        let (d, _d2) = std::os::unix::net::UnixDatagram::pair().unwrap();
        inherited(&d);
        let e = adopt(d.as_raw_fd(), &[Kind::UnixStream, Kind::Fifo]).unwrap_err();
        assert!(e.to_string().contains("a socket of another kind"), "{e}");
        let f = std::fs::File::open("/proc/self/status").unwrap();
        inherited(&f);
        let e = adopt(f.as_raw_fd(), &[Kind::Fifo]).unwrap_err();
        assert!(e.to_string().contains("a regular file, not a pipe"), "{e}");
        // Each refused number is as it was: still open, still inherited.
        for fd in [r.as_fd(), d.as_fd(), f.as_fd()] {
            let flags = fcntl(fd, FcntlArg::F_GETFD).unwrap();
            assert_eq!(flags & nix::libc::FD_CLOEXEC, 0);
        }
        // A pipe where one is taken.
        let raw = r.into_raw_fd();
        let (fifo, kind) = adopt(raw, &[Kind::UnixStream, Kind::Fifo]).expect("a pipe");
        assert_eq!(kind, Kind::Fifo);
        drop(fifo);
    }
}
