//! A window's pixels from its screen-cast stream, as the broker hands them for a capture
//! ([`ConnectTarget::CastFrame`](nish_proto::wire::ConnectTarget::CastFrame)): the window's part
//! of the stream's first frame, packed RGBA, in a sealed memfd. The reader gets no PipeWire
//! connection (the broker's `handover::frame` says why).
//!
//! mutter sends the window with its client-side shadow; where the window sits inside its
//! shadow is not sent: [`locate`] finds it from the pixels, checked against the size the
//! application gives its window.

use std::os::fd::OwnedFd;

use nish_proto::wire::{MAX_CAST_PIXELS, MAX_CAST_SIDE};

use nish_atspi::failure::Failure;
/// A window's pixels from its stream: packed RGBA, `width` x `height`, the fourth byte as the
/// compositor gave it: alpha, or in a format without alpha its padding byte, which mutter 43
/// fills with the window's alpha (measured: its window streams offer `BGRx` only, and the
/// padding is 0 outside the window's shadow, between 0 and 255 in it, 255 on the window).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 4` bytes.
    pub rgba: Vec<u8>,
}

/// Where the window's own frame (`frame_w` x `frame_h`, the size its application reports)
/// lies in `frame` ([`nish_proto::wire::cast::window_at`]); `None` when it is not known.
pub fn locate(frame: &Frame, frame_w: u32, frame_h: u32) -> Option<(u32, u32)> {
    nish_proto::wire::cast::window_at(frame.width, frame.height, &frame.rgba, frame_w, frame_h)
}

/// The frame the broker handed in `fd` (`width` x `height`, RGBA), read whole.
pub fn from_memfd(fd: OwnedFd, width: u32, height: u32) -> Result<Frame, Failure> {
    use std::os::unix::fs::FileExt as _;
    let bad = || Failure::backend("the broker's frame is malformed");
    if width == 0
        || height == 0
        || width > MAX_CAST_SIDE
        || height > MAX_CAST_SIDE
        || u64::from(width) * u64::from(height) > MAX_CAST_PIXELS
    {
        return Err(bad());
    }
    let file = std::fs::File::from(fd);
    let len = width as usize * height as usize * 4;
    if file.metadata().map_err(|_| bad())?.len() != len as u64 {
        return Err(bad());
    }
    let mut rgba = vec![0u8; len];
    file.read_exact_at(&mut rgba, 0).map_err(|_| bad())?;
    Ok(Frame {
        width,
        height,
        rgba,
    })
}
