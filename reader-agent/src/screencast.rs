//! One frame of a window's screen-cast stream, read over a PipeWire connection the broker hands
//! in ([`ConnectTarget::PipeWire`](nish_proto::wire::ConnectTarget::PipeWire)).
//!
//! The broker starts the stream (mutter's `RecordWindow`) for one capture and stops it right
//! after; the reader connects to the stream's node, takes the first buffer that holds pixels,
//! and disconnects. mutter sends the window's own pixels (no other window is in them), with
//! its client-side shadow, in a buffer the size of the monitor: the window's part is the
//! buffer's crop region ([`Frame`] holds that part only). Where the window sits inside its
//! shadow is not sent: [`locate`] finds it from the pixels, checked against the size the
//! application gives its window.
//!
//! Nothing here reads a file of the person's or talks to a bus: libpipewire reads its client
//! configuration under `/usr/share/pipewire` and `/etc/pipewire` and loads its plugins from
//! the system's libraries, as the reader's lock-down allows.

use std::cell::RefCell;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::Duration;

use pipewire as pw;
use pw::spa;
use spa::param::video::VideoFormat;

use nish_atspi::failure::Failure;

/// Widest or tallest window taken (mutter's window streams are the monitor's size at most).
pub const MAX_SIDE: u32 = 8_192;
/// Most pixels of a window taken: an 8K monitor's (a window's pixels are held twice, as RGBA
/// and as RGB, at most about 230 MB).
pub const MAX_PIXELS: u64 = 7_680 * 4_320;

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

/// The pixel formats asked for, those with alpha first ([`locate`] reads the fourth byte).
const FORMATS: [VideoFormat; 4] = [
    VideoFormat::BGRA,
    VideoFormat::RGBA,
    VideoFormat::BGRx,
    VideoFormat::RGBx,
];

/// Where the window's own frame (`frame_w` x `frame_h`, the size its application reports)
/// lies in `frame`: at the origin when the image is that size (no shadow, or a toolkit that
/// counts its shadow as its window, as GTK 3 does); else where the image's fully opaque pixels
/// (the fourth byte 255, see [`Frame`]) are, when they make exactly a rectangle of that size
/// with its edges' middles opaque (GTK 4 draws its shadow translucent around an opaque window).
/// `None` otherwise: the place is not known, and nothing is guessed. A compositor that fills
/// the padding byte with 255 everywhere makes the whole image opaque: refused unless the
/// image is the window's size.
pub fn locate(frame: &Frame, frame_w: u32, frame_h: u32) -> Option<(u32, u32)> {
    if (frame.width, frame.height) == (frame_w, frame_h) {
        return Some((0, 0));
    }
    let (w, h) = (frame.width as usize, frame.height as usize);
    let opaque = |x: usize, y: usize| frame.rgba[(y * w + x) * 4 + 3] == 255;
    let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0usize, 0usize);
    for y in 0..h {
        for x in 0..w {
            if opaque(x, y) {
                x0 = x0.min(x);
                y0 = y0.min(y);
                x1 = x1.max(x);
                y1 = y1.max(y);
            }
        }
    }
    if x0 == usize::MAX {
        return None;
    }
    let (bw, bh) = (x1 - x0 + 1, y1 - y0 + 1);
    if (bw, bh) != (frame_w as usize, frame_h as usize) {
        return None;
    }
    // A window with rounded corners leaves its corners translucent; its edges' middles are
    // opaque, so a rectangle of that size is one. More than the corners translucent is not.
    let mid_x = x0 + bw / 2;
    let mid_y = y0 + bh / 2;
    let edges = [(mid_x, y0), (mid_x, y1), (x0, mid_y), (x1, mid_y)];
    edges
        .iter()
        .all(|&(x, y)| opaque(x, y))
        .then_some((x0 as u32, y0 as u32))
}

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

/// What the stream's callbacks leave for [`one_frame`].
#[derive(Default)]
struct Taken {
    format: Option<(VideoFormat, u32, u32)>,
    outcome: Option<Result<Frame, String>>,
}

/// The first frame with pixels of the stream `node`, over the PipeWire connection `fd`,
/// within `wait`. Blocking (libpipewire's loop runs on the calling thread); call it from a
/// blocking thread.
pub fn one_frame(fd: OwnedFd, node: u32, wait: Duration) -> Result<Frame, Failure> {
    pw::init();
    let fail = |what: &str| Failure::backend(format!("the screen cast: {what}"));
    let mainloop = pw::main_loop::MainLoopRc::new(None).map_err(|_| fail("no loop"))?;
    let context = pw::context::ContextRc::new(&mainloop, Some(identity()))
        .map_err(|_| fail("no PipeWire context"))?;
    let core = context
        .connect_fd_rc(fd, Some(identity()))
        .map_err(|_| fail("PipeWire did not take the connection"))?;
    let taken = Rc::new(RefCell::new(Taken::default()));

    let (ml, t) = (mainloop.clone(), taken.clone());
    let _core_listener = core
        .add_listener_local()
        .error(move |_, _, _, _| {
            t.borrow_mut()
                .outcome
                .get_or_insert(Err("PipeWire refused the stream".into()));
            ml.quit();
        })
        .register();

    let stream = pw::stream::StreamBox::new(
        &core,
        "nish-reader",
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
            if let pw::stream::StreamState::Error(_) | pw::stream::StreamState::Unconnected = new {
                t2.borrow_mut()
                    .outcome
                    .get_or_insert(Err("the stream ended".into()));
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
            if t.borrow().outcome.is_some() {
                return;
            }
            let Some(mut buffer) = s.dequeue_buffer() else {
                return;
            };
            let crop = buffer
                .find_meta::<spa::buffer::meta::MetaVideoCrop>()
                .map(|c| {
                    let r = c.meta_region().region();
                    (r.position.x, r.position.y, r.size.width, r.size.height)
                });
            let Some((format, width, height)) = t.borrow().format else {
                return;
            };
            let Some(data) = buffer.datas_mut().first_mut() else {
                return;
            };
            let chunk = data.chunk();
            let (offset, size, stride) = (chunk.offset(), chunk.size(), chunk.stride());
            // Buffers with no pixels (a pointer move only), and those the producer marks
            // corrupted, are skipped.
            if size == 0 || chunk.flags().contains(spa::buffer::ChunkFlags::CORRUPTED) {
                return;
            }
            let outcome = match (
                crop_within(crop, width, height),
                usize::try_from(stride).ok(),
                data.data(),
            ) {
                (Some(region), ..)
                    if region.2 > MAX_SIDE
                        || region.3 > MAX_SIDE
                        || u64::from(region.2) * u64::from(region.3) > MAX_PIXELS =>
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
            };
            t.borrow_mut().outcome = Some(outcome);
            ml.quit();
        })
        .register()
        .map_err(|_| fail("no stream listener"))?;

    let format = format_param().map_err(|_| fail("no format"))?;
    let meta = crop_param().map_err(|_| fail("no crop"))?;
    let mut params = [
        spa::pod::Pod::from_bytes(&format).ok_or_else(|| fail("no format"))?,
        spa::pod::Pod::from_bytes(&meta).ok_or_else(|| fail("no crop"))?,
    ];
    stream
        .connect(
            spa::utils::Direction::Input,
            Some(node),
            pw::stream::StreamFlags::AUTOCONNECT | pw::stream::StreamFlags::MAP_BUFFERS,
            &mut params,
        )
        .map_err(|e| fail(&format!("the stream did not connect ({e})")))?;

    let ml = mainloop.clone();
    let t = taken.clone();
    let timer = mainloop.loop_().add_timer(move |_| {
        t.borrow_mut()
            .outcome
            .get_or_insert(Err("no frame came in time".into()));
        ml.quit();
    });
    timer.update_timer(Some(wait), None);
    mainloop.run();
    let _ = stream.disconnect();
    let outcome = taken.borrow_mut().outcome.take();
    match outcome {
        Some(Ok(f)) => Ok(f),
        Some(Err(why)) => Err(fail(&why)),
        None => Err(fail("no frame")),
    }
}

/// What the reader tells PipeWire of itself. Given, libpipewire does not look them up: the
/// user's name would be asked of the system's name services, which may need a socket the
/// reader's lock-down refuses.
fn identity() -> pw::properties::PropertiesBox {
    pw::properties::properties! {
        *pw::keys::APP_NAME => "nish-reader",
        *pw::keys::APP_PROCESS_BINARY => "nish-reader",
        *pw::keys::APP_PROCESS_USER => "nish-reader",
        *pw::keys::APP_PROCESS_HOST => "localhost",
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
                width: MAX_SIDE,
                height: MAX_SIDE
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
    let obj = spa::pod::Object {
        type_: spa::utils::SpaTypes::ObjectParamMeta.as_raw(),
        id: spa::param::ParamType::Meta.as_raw(),
        properties: vec![
            spa::pod::Property::new(
                spa::sys::SPA_PARAM_META_type,
                spa::pod::Value::Id(spa::utils::Id(spa::sys::SPA_META_VideoCrop)),
            ),
            spa::pod::Property::new(
                spa::sys::SPA_PARAM_META_size,
                spa::pod::Value::Int(std::mem::size_of::<spa::sys::spa_meta_region>() as i32),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A `w` x `h` frame, transparent, with an opaque rectangle `(x, y, rw, rh)` and a
    /// translucent shadow ring around it.
    fn framed(w: u32, h: u32, r: (u32, u32, u32, u32)) -> Frame {
        let mut rgba = vec![0u8; (w * h * 4) as usize];
        for y in 0..h {
            for x in 0..w {
                let i = ((y * w + x) * 4) as usize;
                let inside = x >= r.0 && x < r.0 + r.2 && y >= r.1 && y < r.1 + r.3;
                let near = x + 3 >= r.0 && x < r.0 + r.2 + 3 && y + 3 >= r.1 && y < r.1 + r.3 + 3;
                rgba[i + 3] = if inside {
                    255
                } else if near {
                    60
                } else {
                    0
                };
            }
        }
        Frame {
            width: w,
            height: h,
            rgba,
        }
    }

    #[test]
    fn a_window_is_found_inside_its_shadow_only_at_its_own_size() {
        let f = framed(40, 30, (7, 5, 20, 15));
        assert_eq!(locate(&f, 20, 15), Some((7, 5)));
        assert_eq!(locate(&f, 21, 15), None, "another size is not guessed at");
        assert_eq!(locate(&f, 40, 30), Some((0, 0)), "the whole image");
        let padded = Frame {
            rgba: f
                .rgba
                .chunks_exact(4)
                .flat_map(|p| [p[0], p[1], p[2], 255])
                .collect(),
            ..f.clone()
        };
        assert_eq!(locate(&padded, 20, 15), None, "all opaque: no place");
    }

    #[test]
    fn a_rectangle_with_a_translucent_edge_is_not_taken() {
        let mut f = framed(40, 30, (7, 5, 20, 15));
        // The top edge's middle translucent: the opaque pixels are not a window's rectangle.
        let i = ((5 * 40 + 17) * 4 + 3) as usize;
        f.rgba[i] = 100;
        assert_eq!(locate(&f, 20, 15), None);
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
