//! The one place this program needs `unsafe`: it maps the shared memory the Wayland dialog
//! draws into. (The broker's socket is adopted by the agents' one start,
//! `nish_sandbox::start::start`.)
#![allow(unsafe_code)]

use std::os::fd::OwnedFd;

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
