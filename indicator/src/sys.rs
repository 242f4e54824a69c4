//! The one place this program turns a raw file descriptor number into an owned socket, and
//! maps the shared memory the Wayland dialog draws into.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{SockType, UnixAddr, getsockname, getsockopt, sockopt};
use nix::sys::stat::fstat;

/// Takes ownership of the broker's end of the socketpair, inherited as `fd`.
///
/// Checks first that `fd` is open and is a Unix stream socket, so a wrong `--fd` is a readable
/// error and never adopts some other file.
pub fn adopt_broker_socket(fd: RawFd) -> anyhow::Result<UnixStream> {
    if fd < 0 {
        anyhow::bail!("--fd must be a file descriptor number");
    }
    // SAFETY: `fd` is only borrowed for the duration of these checks; `fstat` reports EBADF
    // without side effects when it is not open.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    fstat(borrowed).map_err(|e| anyhow::anyhow!("fd {fd} is not open: {e}"))?;
    let ty = getsockopt(&borrowed, sockopt::SockType)
        .map_err(|e| anyhow::anyhow!("fd {fd} is not a socket: {e}"))?;
    if ty != SockType::Stream {
        anyhow::bail!("fd {fd} is not a stream socket");
    }
    getsockname::<UnixAddr>(fd)
        .map_err(|e| anyhow::anyhow!("fd {fd} is not a Unix socket: {e}"))?;
    // SAFETY: the checks above show `fd` is an open Unix stream socket. It was inherited from
    // the broker for this process alone; nothing else in this program refers to the number, so
    // taking ownership here (once, at start) creates no second owner.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(UnixStream::from(owned))
}

/// Shared memory for the Wayland dialog's pixels: a sealed memfd, mapped once.
///
/// Made before the lock-down: afterwards `RLIMIT_FSIZE` 0 makes growing a file (a memfd too)
/// fail. The memfd is sparse: only the pages drawn into take memory. Its size is sealed, so the
/// compositor (the only other holder) cannot shrink it under the mapping.
#[derive(Debug)]
pub struct ShmMem {
    fd: OwnedFd,
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

impl ShmMem {
    /// A memfd of `len` bytes (not zero), sealed against size changes, mapped read-write.
    pub fn new(len: usize) -> anyhow::Result<ShmMem> {
        use nix::fcntl::{FcntlArg, SealFlag, fcntl};
        use nix::sys::memfd::{MFdFlags, memfd_create};
        use nix::sys::mman::{MapFlags, ProtFlags, mmap};
        let n = std::num::NonZeroUsize::new(len).ok_or_else(|| anyhow::anyhow!("empty pool"))?;
        let fd = memfd_create(
            c"nish-indicator-pixels",
            MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
        )?;
        nix::unistd::ftruncate(&fd, i64::try_from(len)?)?;
        fcntl(
            &fd,
            FcntlArg::F_ADD_SEALS(
                SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
            ),
        )?;
        // SAFETY: a fresh shared mapping of the whole memfd (its size sealed at `len`, so no
        // access inside the mapping can fault); the pointer is kept with the descriptor and
        // unmapped once, in `drop`.
        let ptr = unsafe {
            mmap(
                None,
                n,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &fd,
                0,
            )?
        };
        Ok(ShmMem {
            fd,
            ptr: ptr.cast(),
            len,
        })
    }

    /// The descriptor, for `wl_shm.create_pool`.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd as _;
        self.fd.as_fd()
    }

    /// The size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The bytes `offset..offset + len` (clamped to the mapping).
    pub fn bytes_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        let start = offset.min(self.len);
        let len = len.min(self.len - start);
        // SAFETY: `start + len <= self.len`, inside the mapping made in `new`, which lives as
        // long as `self`; `&mut self` makes this the only Rust reference into it. The
        // compositor reads the same pages concurrently: plain bytes, no invariant to break
        // (at worst it shows a half-drawn frame, which the buffer protocol avoids).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(start), len) }
    }
}

impl Drop for ShmMem {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of `len` bytes, unmapped only here; no slice from
        // `bytes_mut` outlives `self`.
        let _ = unsafe { nix::sys::mman::munmap(self.ptr.cast(), self.len) };
    }
}
