//! The one place that needs `unsafe`: adopting the socket the broker handed over on a file
//! descriptor number.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;

/// Takes ownership of the Unix socket on `fd` after checking that it is one.
pub fn adopt_socket(fd: RawFd) -> std::io::Result<UnixStream> {
    if fd < 3 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "refusing to adopt a standard stream as the broker socket",
        ));
    }
    let st = nix::sys::stat::fstat(fd_borrow(fd)?).map_err(std::io::Error::from)?;
    if nix::sys::stat::SFlag::from_bits_truncate(st.st_mode) & nix::sys::stat::SFlag::S_IFMT
        != nix::sys::stat::SFlag::S_IFSOCK
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the descriptor is not a socket",
        ));
    }
    // SAFETY: `fd` is open (fstat succeeded above) and is a socket the broker passed to this
    // process for its exclusive use; nothing else in the process owns or closes it, so the
    // new `UnixStream` becomes its only owner.
    Ok(unsafe { UnixStream::from_raw_fd(fd) })
}

fn fd_borrow(fd: RawFd) -> std::io::Result<std::os::fd::BorrowedFd<'static>> {
    if fd < 0 {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    // SAFETY: the borrow is used only for the fstat call in `adopt_socket`, while the
    // descriptor is still open and before ownership is taken.
    Ok(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })
}
