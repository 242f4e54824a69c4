//! One frame of a window's screen-cast stream, read by the broker for the reader
//! ([`ConnectTarget::CastFrame`](nish_proto::wire::ConnectTarget::CastFrame)).
//!
//! The reader gets no PipeWire connection: PipeWire gives a connection of the person's own
//! programs every right over every object (the microphone, the cameras, every stream), and
//! before PipeWire 0.3.75 a connection narrowed as the desktop portal narrows one still gets
//! any node it makes linked by the session manager. So the broker connects (to a socket served
//! by the person's own user), takes the stream's first buffer that holds pixels, and hands the
//! reader the window's part of it, packed as RGBA, in a sealed memfd.
//!
//! mutter sends the window alone, with its client-side shadow, in a buffer the size of the
//! monitor, the window's part named by the buffer's crop; its window streams offer `BGRx`
//! only, and the padding byte holds the window's alpha (measured), which is kept: the reader
//! finds the window inside its shadow by it.

use std::cell::RefCell;
use std::os::fd::OwnedFd;

use nish_proto::wire::{MAX_CAST_PIXELS, MAX_CAST_SIDE};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pipewire as pw;
use pw::spa;
use spa::param::video::VideoFormat;

/// A window's pixels from its stream: packed RGBA, `width` x `height`, the fourth byte as the
/// compositor gave it (alpha, or the padding byte of a format without alpha).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 4` bytes.
    pub rgba: Vec<u8>,
}

/// The pixel formats asked for, those with alpha first (the reader reads the fourth byte).
const FORMATS: [VideoFormat; 4] = [
    VideoFormat::BGRA,
    VideoFormat::RGBA,
    VideoFormat::BGRx,
    VideoFormat::RGBx,
];

/// The crop region of a buffer of `width` x `height`, or the whole buffer when the stream
/// sends none; `None` when the region leaves the buffer or is empty.
pub fn crop_within(
    crop: Option<(i32, i32, u32, u32)>,
    width: u32,
    height: u32,
) -> Option<(u32, u32, u32, u32)> {
    let (x, y, w, h) = crop.unwrap_or((0, 0, width, height));
    let (x, y) = (u32::try_from(x).ok()?, u32::try_from(y).ok()?);
    (w > 0 && h > 0 && x.checked_add(w)? <= width && y.checked_add(h)? <= height)
        .then_some((x, y, w, h))
}

/// Packs the region `(x, y, w, h)` of a buffer (`stride` bytes a row from `offset` in
/// `data`) in `format` into RGBA; `None` when the data is too short for it.
pub fn pack(
    data: &[u8],
    offset: usize,
    stride: usize,
    region: (u32, u32, u32, u32),
    format: VideoFormat,
) -> Option<Vec<u8>> {
    let (x, y, w, h) = (
        region.0 as usize,
        region.1 as usize,
        region.2 as usize,
        region.3 as usize,
    );
    if stride < (x + w).checked_mul(4)? {
        return None;
    }
    let end = offset.checked_add(stride.checked_mul(y + h)?)?;
    if end > data.len() {
        return None;
    }
    let mut out = Vec::with_capacity(w * h * 4);
    for row in y..y + h {
        let start = offset + row * stride + x * 4;
        for p in data[start..start + w * 4].chunks_exact(4) {
            let px = match format {
                VideoFormat::BGRA => [p[2], p[1], p[0], p[3]],
                VideoFormat::RGBA => [p[0], p[1], p[2], p[3]],
                VideoFormat::BGRx => [p[2], p[1], p[0], p[3]],
                VideoFormat::RGBx => [p[0], p[1], p[2], p[3]],
                _ => return None,
            };
            out.extend_from_slice(&px);
        }
    }
    Some(out)
}

/// Where a buffer's cursor metadata puts the pointer. mutter fills it, for a window's stream
/// with cursor mode "metadata", in the window's own surface coordinates (the stream's), and
/// only while the pointer is over that window with nothing above it there: the actor under
/// the pointer, as mutter's own pick finds it, is inside the window's (`meta_window_has_pointer`,
/// mutter 43); else it marks the cursor absent (id 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pointer {
    /// The buffer carries no cursor metadata.
    Unknown,
    /// The pointer is not over the window, or something covers the window there.
    Off,
    /// The pointer is over the window, here.
    At(i32, i32),
}

/// One buffer of a stream: when mutter recorded it (`CLOCK_MONOTONIC`, ns), where it says the
/// pointer is, and its pixels when it holds some and they were asked for.
#[derive(Debug)]
pub struct Seen {
    /// The buffer's presentation time (mutter stamps its monotonic clock at recording).
    pub pts_ns: Option<i64>,
    /// Where the pointer is ([`Pointer`]).
    pub pointer: Pointer,
    /// The window's pixels (the buffer's crop), when the buffer holds pixels and they were
    /// asked for.
    pub frame: Option<Result<Frame, String>>,
    /// The buffer's crop as the producer gave it (`x, y, w, h`), if any.
    pub crop: Option<(i32, i32, u32, u32)>,
    /// The stream's size (its buffers'), as negotiated.
    pub stream: (u32, u32),
}

/// What [`consume`] does after a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Stop reading.
    Quit,
    /// Read on, packing the pixels of the buffers to come, or not.
    More { pixels: bool },
}

/// What the stream's callbacks leave for [`consume`].
#[derive(Default)]
struct Taken {
    format: Option<(VideoFormat, u32, u32)>,
    /// The node's media class, as the registry lists it.
    class: Option<String>,
    /// Whether the next buffer's pixels are packed.
    no_pixels: bool,
    /// Why the stream ended, if not by `each`'s [`Flow::Quit`].
    failed: Option<String>,
    done: bool,
}

/// The first frame with pixels of the stream `node`, over the PipeWire connection `fd`,
/// within `wait`; for a stream sized as the monitor (`monitor_sized`, mutter's), one that may
/// have been cut at the monitor's edge is refused ([`cut_at_edge`]). Blocking (libpipewire's
/// loop runs on the calling thread); call it from a blocking thread.
pub fn one_frame(
    fd: OwnedFd,
    node: u32,
    wait: Duration,
    monitor_sized: bool,
) -> Result<Frame, String> {
    let got: Rc<RefCell<Option<Result<Frame, String>>>> = Rc::new(RefCell::new(None));
    let g = got.clone();
    consume(fd, node, wait, false, None, move |seen| match seen.frame {
        Some(f) => {
            *g.borrow_mut() = Some(f.and_then(|f| {
                if monitor_sized && cut_at_edge(&f, seen.crop, seen.stream) {
                    Err(
                        "the window reaches past the monitor's edge: where it lies in the frame \
                         cannot be told"
                            .into(),
                    )
                } else {
                    Ok(f)
                }
            }));
            Flow::Quit
        }
        None => Flow::More { pixels: true },
    })?;
    let fail = |what: &str| format!("the screen cast: {what}");
    match got.borrow_mut().take() {
        Some(Ok(f)) => Ok(f),
        Some(Err(why)) => Err(fail(&why)),
        None => Err(fail("no frame came in time")),
    }
}

/// Whether a window's frame `f` (its buffer's `crop` of a stream of size `stream`) may have
/// been cut at the stream's edge: mutter sizes a window's stream as its monitor and clips the
/// crop there, on the right and the bottom, so a window whose shadow makes it larger than the
/// monitor comes with its shadow cut off on two sides only, and the window's place in it is
/// no longer where its alpha says. True when the frame reaches the stream's right or bottom
/// edge while its fully opaque pixels do not reach its left and top edges (a shadow there; a
/// maximised window has none, and its opaque header bar reaches both even where its content
/// is see-through): the place is then not known, and nothing is guessed.
pub fn cut_at_edge(f: &Frame, crop: Option<(i32, i32, u32, u32)>, stream: (u32, u32)) -> bool {
    let (x, y) = crop.map_or((0, 0), |c| (c.0.max(0) as u32, c.1.max(0) as u32));
    let at_edge = x.saturating_add(f.width) >= stream.0 || y.saturating_add(f.height) >= stream.1;
    if !at_edge {
        return false;
    }
    let w = (f.width as usize).max(1);
    let (mut left, mut top) = (false, false);
    for (i, px) in f.rgba.chunks_exact(4).enumerate() {
        if px[3] == 255 {
            left |= i % w == 0;
            top |= i < w;
            if left && top {
                return false;
            }
        }
    }
    true
}

/// Reads the stream `node` over the PipeWire connection `fd`, handing each buffer to `each`
/// ([`Seen`]) until it says [`Flow::Quit`], `stop` is raised, or `wait` has passed; with
/// `cursor`, the cursor's metadata and the buffers' times are asked for too. Buffers without
/// pixels (a pointer move only) come with no frame. Blocking (libpipewire's loop runs on the
/// calling thread); call it from a blocking thread. Errs when the stream could not be read:
/// not a screen cast's output stream, refused, or ended by its producer.
pub fn consume(
    fd: OwnedFd,
    node: u32,
    wait: Duration,
    cursor: bool,
    stop: Option<Arc<AtomicBool>>,
    each: impl FnMut(Seen) -> Flow + 'static,
) -> Result<(), String> {
    pw::init();
    let fail = |what: &str| format!("the screen cast: {what}");
    let mainloop = pw::main_loop::MainLoopRc::new(None).map_err(|_| fail("no loop"))?;
    let context = pw::context::ContextRc::new(&mainloop, Some(identity()))
        .map_err(|_| fail("no PipeWire context"))?;
    let core = context
        .connect_fd_rc(fd, Some(identity()))
        .map_err(|_| fail("PipeWire did not take the connection"))?;
    let taken = Rc::new(RefCell::new(Taken::default()));
    let each = Rc::new(RefCell::new(each));
    // What the node is: a screen cast's output stream, not (were its id taken by another
    // object since mutter named it) a camera or a microphone.
    let registry = core
        .get_registry_rc()
        .map_err(|_| fail("no PipeWire registry"))?;
    let t = taken.clone();
    let _registry_listener = registry
        .add_listener_local()
        .global(move |g| {
            if g.id == node && g.type_ == pw::types::ObjectType::Node {
                t.borrow_mut().class = g
                    .props
                    .and_then(|p| p.get(*pw::keys::MEDIA_CLASS).map(str::to_string));
            }
        })
        .register();

    let (ml, t) = (mainloop.clone(), taken.clone());
    let _core_listener = core
        .add_listener_local()
        .error(move |_, _, _, _| {
            if !t.borrow().done {
                let mut t = t.borrow_mut();
                t.failed.get_or_insert("PipeWire refused the stream".into());
                t.done = true;
            }
            ml.quit();
        })
        .register();

    let stream = pw::stream::StreamBox::new(
        &core,
        "nish-driver",
        pw::properties::properties! {
            *pw::keys::MEDIA_TYPE => "Video",
            *pw::keys::MEDIA_CATEGORY => "Capture",
            *pw::keys::MEDIA_ROLE => "Screen",
        },
    )
    .map_err(|_| fail("no stream"))?;
    let (ml, t) = (mainloop.clone(), taken.clone());
    let (ml2, t2) = (mainloop.clone(), taken.clone());
    let _listener = stream
        .add_local_listener_with_user_data(())
        .state_changed(move |_, _, _, new| {
            // Not once the reading is done (the disconnect at the end says Unconnected too).
            if let pw::stream::StreamState::Error(_) | pw::stream::StreamState::Unconnected = new
                && !t2.borrow().done
            {
                let mut t = t2.borrow_mut();
                t.failed.get_or_insert("the stream ended".into());
                t.done = true;
                ml2.quit();
            }
        })
        .param_changed({
            let t = taken.clone();
            move |_, _, id, param| {
                let Some(param) = param else { return };
                if id != spa::param::ParamType::Format.as_raw() {
                    return;
                }
                let mut info = spa::param::video::VideoInfoRaw::default();
                if info.parse(param).is_ok() {
                    t.borrow_mut().format =
                        Some((info.format(), info.size().width, info.size().height));
                }
            }
        })
        .process(move |s, _| {
            if t.borrow().done {
                return;
            }
            let Some(mut buffer) = s.dequeue_buffer() else {
                return;
            };
            let Some((format, width, height)) = t.borrow().format else {
                return;
            };
            if t.borrow().class.as_deref() != Some("Stream/Output/Video") {
                let mut t = t.borrow_mut();
                t.failed = Some("the node is not a screen cast's stream".into());
                t.done = true;
                ml.quit();
                return;
            }
            let crop = buffer
                .find_meta::<spa::buffer::meta::MetaVideoCrop>()
                .map(|c| {
                    let r = c.meta_region().region();
                    (r.position.x, r.position.y, r.size.width, r.size.height)
                });
            let header = buffer
                .find_meta::<spa::buffer::meta::MetaHeader>()
                .map(|h| (h.pts(), h.flags()));
            // A buffer its producer marks corrupted carries nothing written for it (mutter
            // queues one so when it cannot write it): its cursor and time are stale.
            if header
                .is_some_and(|(_, f)| f.contains(spa::buffer::meta::MetaHeaderFlags::CORRUPTED))
            {
                return;
            }
            let pts_ns = header.map(|(pts, _)| pts);
            let pointer = match buffer.find_meta::<spa::buffer::meta::MetaCursor>() {
                None => Pointer::Unknown,
                Some(c) if c.id() == 0 => Pointer::Off,
                Some(c) => Pointer::At(c.position().x, c.position().y),
            };
            let want = !t.borrow().no_pixels;
            let frame = buffer
                .datas_mut()
                .first_mut()
                .and_then(|data| want.then(|| pixels_of(data, crop, format, width, height)))
                .flatten();
            let flow = (each.borrow_mut())(Seen {
                pts_ns,
                pointer,
                frame,
                crop,
                stream: (width, height),
            });
            match flow {
                Flow::Quit => {
                    t.borrow_mut().done = true;
                    ml.quit();
                }
                Flow::More { pixels } => t.borrow_mut().no_pixels = !pixels,
            }
        })
        .register()
        .map_err(|_| fail("no stream listener"))?;

    let format = format_param().map_err(|_| fail("no format"))?;
    let metas: Vec<Vec<u8>> = std::iter::once(crop_param())
        .chain(cursor.then(cursor_param))
        .chain(cursor.then(header_param))
        .collect::<Result<_, _>>()
        .map_err(|_| fail("no metadata"))?;
    let mut params = vec![spa::pod::Pod::from_bytes(&format).ok_or_else(|| fail("no format"))?];
    for m in &metas {
        params.push(spa::pod::Pod::from_bytes(m).ok_or_else(|| fail("no metadata"))?);
    }
    stream
        .connect(
            spa::utils::Direction::Input,
            Some(node),
            pw::stream::StreamFlags::AUTOCONNECT | pw::stream::StreamFlags::MAP_BUFFERS,
            &mut params,
        )
        .map_err(|e| fail(&format!("the stream did not connect ({e})")))?;

    // A tick checks the time and the stop flag.
    let (ml, t) = (mainloop.clone(), taken.clone());
    let deadline = std::time::Instant::now() + wait;
    let timer = mainloop.loop_().add_timer(move |_| {
        let stopped = stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst));
        if stopped || std::time::Instant::now() >= deadline {
            t.borrow_mut().done = true;
            ml.quit();
        }
    });
    timer.update_timer(Some(TICK), Some(TICK));
    mainloop.run();
    let _ = stream.disconnect();
    match taken.borrow_mut().failed.take() {
        Some(why) => Err(fail(&why)),
        None => Ok(()),
    }
}

/// How often [`consume`]'s loop looks at its time and its stop flag.
const TICK: Duration = Duration::from_millis(10);

/// The pixels of one buffer's region (its crop), packed RGBA; `None` for a buffer with none
/// (a pointer move only), or one its producer marks corrupted.
fn pixels_of(
    data: &mut spa::buffer::Data,
    crop: Option<(i32, i32, u32, u32)>,
    format: VideoFormat,
    width: u32,
    height: u32,
) -> Option<Result<Frame, String>> {
    let chunk = data.chunk();
    let (offset, size, stride) = (chunk.offset(), chunk.size(), chunk.stride());
    if size == 0 || chunk.flags().contains(spa::buffer::ChunkFlags::CORRUPTED) {
        return None;
    }
    Some(
        match (
            crop_within(crop, width, height),
            usize::try_from(stride).ok(),
            data.data(),
        ) {
            (Some(region), ..)
                if region.2 > MAX_CAST_SIDE
                    || region.3 > MAX_CAST_SIDE
                    || u64::from(region.2) * u64::from(region.3) > MAX_CAST_PIXELS =>
            {
                Err("the window is too large".to_string())
            }
            (Some(region), Some(stride), Some(bytes)) => {
                // Only what the chunk says it holds is read, not the whole mapping.
                let end = (offset as usize)
                    .saturating_add(size as usize)
                    .min(bytes.len());
                match pack(&bytes[..end], offset as usize, stride, region, format) {
                    Some(rgba) => Ok(Frame {
                        width: region.2,
                        height: region.3,
                        rgba,
                    }),
                    None => Err("a buffer does not hold its region".to_string()),
                }
            }
            (None, ..) => Err("the stream's region leaves its buffer".into()),
            _ => Err("a buffer is not readable".into()),
        },
    )
}

/// What the broker tells PipeWire of itself.
fn identity() -> pw::properties::PropertiesBox {
    pw::properties::properties! {
        *pw::keys::APP_NAME => "nish-driver",
        *pw::keys::APP_PROCESS_BINARY => "nish-driver",
    }
}

/// The formats asked for: raw video in one of [`FORMATS`], any size, any rate.
fn format_param() -> Result<Vec<u8>, spa::pod::serialize::GenError> {
    let obj = spa::pod::object!(
        spa::utils::SpaTypes::ObjectParamFormat,
        spa::param::ParamType::EnumFormat,
        spa::pod::property!(
            spa::param::format::FormatProperties::MediaType,
            Id,
            spa::param::format::MediaType::Video
        ),
        spa::pod::property!(
            spa::param::format::FormatProperties::MediaSubtype,
            Id,
            spa::param::format::MediaSubtype::Raw
        ),
        spa::pod::property!(
            spa::param::format::FormatProperties::VideoFormat,
            Choice,
            Enum,
            Id,
            FORMATS[0],
            FORMATS[0],
            FORMATS[1],
            FORMATS[2],
            FORMATS[3]
        ),
        spa::pod::property!(
            spa::param::format::FormatProperties::VideoSize,
            Choice,
            Range,
            Rectangle,
            spa::utils::Rectangle {
                width: 1280,
                height: 800
            },
            spa::utils::Rectangle {
                width: 1,
                height: 1
            },
            spa::utils::Rectangle {
                width: MAX_CAST_SIDE,
                height: MAX_CAST_SIDE
            }
        ),
        spa::pod::property!(
            spa::param::format::FormatProperties::VideoFramerate,
            Choice,
            Range,
            Fraction,
            spa::utils::Fraction { num: 0, denom: 1 },
            spa::utils::Fraction { num: 0, denom: 1 },
            spa::utils::Fraction {
                num: 1000,
                denom: 1
            }
        ),
    );
    serialize(obj)
}

/// The crop region asked for with each buffer (mutter puts the window's part there).
fn crop_param() -> Result<Vec<u8>, spa::pod::serialize::GenError> {
    meta_param(
        spa::sys::SPA_META_VideoCrop,
        std::mem::size_of::<spa::sys::spa_meta_region>(),
    )
}

/// The cursor's metadata asked for with each buffer, room for a bitmap of mutter's largest
/// cursor (384 x 384) though only the position is read.
fn cursor_param() -> Result<Vec<u8>, spa::pod::serialize::GenError> {
    let size = std::mem::size_of::<spa::sys::spa_meta_cursor>()
        + std::mem::size_of::<spa::sys::spa_meta_bitmap>()
        + 384 * 384 * 4;
    meta_param(spa::sys::SPA_META_Cursor, size)
}

/// The buffer's header (its time) asked for with each buffer.
fn header_param() -> Result<Vec<u8>, spa::pod::serialize::GenError> {
    meta_param(
        spa::sys::SPA_META_Header,
        std::mem::size_of::<spa::sys::spa_meta_header>(),
    )
}

fn meta_param(kind: u32, size: usize) -> Result<Vec<u8>, spa::pod::serialize::GenError> {
    let obj = spa::pod::Object {
        type_: spa::utils::SpaTypes::ObjectParamMeta.as_raw(),
        id: spa::param::ParamType::Meta.as_raw(),
        properties: vec![
            spa::pod::Property::new(
                spa::sys::SPA_PARAM_META_type,
                spa::pod::Value::Id(spa::utils::Id(kind)),
            ),
            spa::pod::Property::new(
                spa::sys::SPA_PARAM_META_size,
                spa::pod::Value::Int(i32::try_from(size).unwrap_or(i32::MAX)),
            ),
        ],
    };
    serialize(obj)
}

fn serialize(obj: spa::pod::Object) -> Result<Vec<u8>, spa::pod::serialize::GenError> {
    Ok(spa::pod::serialize::PodSerializer::serialize(
        std::io::Cursor::new(Vec::new()),
        &spa::pod::Value::Object(obj),
    )?
    .0
    .into_inner())
}

/// Longest wait for the stream's first frame (mutter sent it within about 60 ms here).
pub const FRAME_WAIT: Duration = Duration::from_secs(2);

/// Reads the first frame of the stream `node` over `stream` (a connection to PipeWire) and
/// puts the window's part of it in a sealed memfd: `(width, height, memfd)`. Blocking.
pub fn frame_memfd(
    stream: std::os::unix::net::UnixStream,
    node: u32,
    monitor_sized: bool,
) -> Result<(u32, u32, OwnedFd), String> {
    use nix::fcntl::{FcntlArg, SealFlag, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let f = one_frame(OwnedFd::from(stream), node, FRAME_WAIT, monitor_sized)?;
    let fd = memfd_create(
        c"nish-capture-frame",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )
    .map_err(|e| format!("no memory for the frame: {e}"))?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, &f.rgba).map_err(|e| format!("the frame: {e}"))?;
    let fd = OwnedFd::from(file);
    // Sealed: the reader (or anyone it hands it to) can neither change nor resize it.
    fcntl(
        &fd,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_SHRINK
                | SealFlag::F_SEAL_GROW
                | SealFlag::F_SEAL_WRITE
                | SealFlag::F_SEAL_SEAL,
        ),
    )
    .map_err(|e| format!("the frame's seals: {e}"))?;
    Ok((f.width, f.height, fd))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_cut_at_the_streams_edge_is_told_by_its_shadow() {
        let frame = |w: u32, h: u32, shadow: u32| {
            let mut rgba = vec![0u8; (w * h * 4) as usize];
            for y in 0..h {
                for x in 0..w {
                    let a = if x < shadow || y < shadow { 60 } else { 255 };
                    rgba[((y * w + x) * 4 + 3) as usize] = a;
                }
            }
            Frame {
                width: w,
                height: h,
                rgba,
            }
        };
        // A maximised window: the whole stream, opaque to its edges.
        assert!(!cut_at_edge(
            &frame(40, 30, 0),
            Some((0, 0, 40, 30)),
            (40, 30)
        ));
        // A maximised window whose content is see-through, its header bar opaque.
        let mut clear = frame(40, 30, 0);
        for (i, px) in clear.rgba.chunks_exact_mut(4).enumerate() {
            if i >= 40 * 5 {
                px[3] = 200;
            }
        }
        assert!(!cut_at_edge(&clear, Some((0, 0, 40, 30)), (40, 30)));
        // A shadowed window cut at the stream's right and bottom.
        assert!(cut_at_edge(
            &frame(40, 30, 3),
            Some((0, 0, 40, 30)),
            (40, 30)
        ));
        // The same inside a larger stream: not cut, its alpha tells its place.
        assert!(!cut_at_edge(
            &frame(40, 30, 3),
            Some((0, 0, 40, 30)),
            (100, 80)
        ));
        // Reaching the right edge from inside the stream.
        assert!(cut_at_edge(
            &frame(40, 30, 3),
            Some((60, 0, 40, 30)),
            (100, 80)
        ));
    }

    #[test]
    fn a_crop_must_lie_in_its_buffer() {
        assert_eq!(crop_within(None, 10, 8), Some((0, 0, 10, 8)));
        assert_eq!(crop_within(Some((2, 3, 4, 5)), 10, 8), Some((2, 3, 4, 5)));
        assert_eq!(crop_within(Some((7, 0, 4, 5)), 10, 8), None);
        assert_eq!(crop_within(Some((-1, 0, 4, 5)), 10, 8), None);
        assert_eq!(crop_within(Some((0, 0, 0, 5)), 10, 8), None);
        assert_eq!(crop_within(Some((0, 0, u32::MAX, 5)), 10, 8), None);
    }

    #[test]
    fn pixels_are_packed_from_their_region_in_rgba() {
        // 3 x 2 buffer, BGRA, stride 16 (4 bytes of padding a row).
        let mut data = vec![0u8; 32];
        for (i, px) in data.chunks_exact_mut(4).enumerate() {
            px.copy_from_slice(&[i as u8, 10, 20, 255]);
        }
        let out = pack(&data, 0, 16, (1, 1, 2, 1), VideoFormat::BGRA).unwrap();
        assert_eq!(out, vec![20, 10, 5, 255, 20, 10, 6, 255]);
        data[3] = 9;
        let out = pack(&data, 0, 16, (0, 0, 1, 1), VideoFormat::BGRx).unwrap();
        assert_eq!(out, vec![20, 10, 0, 9], "the padding byte is kept");
        assert_eq!(
            pack(&data, 0, 16, (0, 0, 1, 3), VideoFormat::BGRA),
            None,
            "too short"
        );
        assert_eq!(
            pack(&data, 0, 4, (0, 0, 2, 1), VideoFormat::BGRA),
            None,
            "stride"
        );
        assert_eq!(pack(&data, 0, 16, (0, 0, 1, 1), VideoFormat::I420), None);
    }
}
