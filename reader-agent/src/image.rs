//! Pixel work for captures, free of I/O: X image data to RGB, redaction, PNG.

use nish_proto::model::Rect;

/// How the X server lays out the pixels of a `ZPixmap` image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PixelLayout {
    /// Bits per pixel (only 32 is supported).
    pub bits_per_pixel: u8,
    /// Scanline padding in bits.
    pub scanline_pad: u8,
    /// Least significant byte first.
    pub lsb_first: bool,
    /// Red, green and blue masks of the visual.
    pub masks: (u32, u32, u32),
}

/// Why pixels could not be converted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PixelError {
    /// A pixel format this reader does not convert.
    #[error("unsupported pixel format: {0} bits per pixel")]
    Unsupported(u8),
    /// The server sent fewer bytes than the size needs.
    #[error("short image data: {got} bytes for {want}")]
    Short {
        /// Bytes received.
        got: usize,
        /// Bytes needed.
        want: usize,
    },
}

fn channel(px: u32, mask: u32) -> u8 {
    if mask == 0 {
        return 0;
    }
    let shift = mask.trailing_zeros();
    let bits = (mask >> shift).count_ones();
    let v = (px & mask) >> shift;
    if bits >= 8 {
        (v >> (bits - 8)) as u8
    } else {
        // Scale up a narrow channel to 8 bits.
        ((v * 255) / ((1 << bits) - 1)) as u8
    }
}

/// Converts `ZPixmap` data of `w` x `h` pixels to packed RGB.
pub fn to_rgb(data: &[u8], w: u32, h: u32, layout: &PixelLayout) -> Result<Vec<u8>, PixelError> {
    if layout.bits_per_pixel != 32 {
        return Err(PixelError::Unsupported(layout.bits_per_pixel));
    }
    let pad = layout.scanline_pad.max(8) as usize;
    let stride = (w as usize * 32).div_ceil(pad) * pad / 8;
    let want = stride * h as usize;
    if data.len() < want {
        return Err(PixelError::Short {
            got: data.len(),
            want,
        });
    }
    let (rm, gm, bm) = layout.masks;
    let mut out = Vec::with_capacity(w as usize * h as usize * 3);
    for y in 0..h as usize {
        let line = &data[y * stride..y * stride + w as usize * 4];
        for px in line.chunks_exact(4) {
            let b = [px[0], px[1], px[2], px[3]];
            let v = if layout.lsb_first {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            };
            out.push(channel(v, rm));
            out.push(channel(v, gm));
            out.push(channel(v, bm));
        }
    }
    Ok(out)
}

/// Screen rectangles in image coordinates (the image's top-left corner at `origin` on the
/// screen), clipped to the image; rectangles outside it are dropped.
pub fn to_image_rects(screen: &[Rect], origin: (i32, i32), w: u32, h: u32) -> Vec<Rect> {
    let img = Rect::new(0, 0, w as i32, h as i32);
    screen
        .iter()
        .filter(|r| !r.is_empty())
        .filter_map(|r| {
            // Hidden widgets may sit at i32::MIN (GTK 3): no arithmetic may overflow.
            let x = i64::from(r.x) - i64::from(origin.0);
            let y = i64::from(r.y) - i64::from(origin.1);
            let far = |v: i64| !(-(1 << 24)..=(1 << 24)).contains(&v);
            if far(x) || far(y) {
                return None;
            }
            Rect::new(x as i32, y as i32, r.w.min(1 << 24), r.h.min(1 << 24)).intersect(&img)
        })
        .collect()
}

/// Paints each rectangle (image coordinates, already clipped) black in packed RGB.
pub fn black_out(rgb: &mut [u8], w: u32, rects: &[Rect]) {
    let w = w as usize;
    for r in rects {
        for y in r.y.max(0) as usize..(r.y + r.h).max(0) as usize {
            let start = (y * w + r.x.max(0) as usize) * 3;
            let end = (y * w + (r.x + r.w).max(0) as usize) * 3;
            if end <= rgb.len() && start <= end {
                rgb[start..end].fill(0);
            }
        }
    }
}

/// Encodes packed RGB as PNG.
pub fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_compression(png::Compression::Fast);
        let mut writer = enc.write_header()?;
        writer.write_image_data(rgb)?;
        writer.finish()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BGRX: PixelLayout = PixelLayout {
        bits_per_pixel: 32,
        scanline_pad: 32,
        lsb_first: true,
        masks: (0xff0000, 0x00ff00, 0x0000ff),
    };

    #[test]
    fn bgrx_converts_to_rgb() {
        // Two pixels: red, then (10, 20, 30).
        let data = [0, 0, 255, 0, 30, 20, 10, 0];
        assert_eq!(
            to_rgb(&data, 2, 1, &BGRX).unwrap(),
            vec![255, 0, 0, 10, 20, 30]
        );
        let be = PixelLayout {
            lsb_first: false,
            ..BGRX
        };
        let data = [0, 255, 0, 0];
        assert_eq!(to_rgb(&data, 1, 1, &be).unwrap(), vec![255, 0, 0]);
    }

    #[test]
    fn narrow_channels_scale_up() {
        let l = PixelLayout {
            masks: (0xf800, 0x07e0, 0x001f),
            ..BGRX
        };
        let v: u32 = 0xffff;
        assert_eq!(
            to_rgb(&v.to_le_bytes(), 1, 1, &l).unwrap(),
            vec![255, 255, 255]
        );
    }

    #[test]
    fn bad_data_is_refused() {
        assert_eq!(
            to_rgb(&[0; 7], 2, 1, &BGRX),
            Err(PixelError::Short { got: 7, want: 8 })
        );
        let l = PixelLayout {
            bits_per_pixel: 16,
            ..BGRX
        };
        assert_eq!(to_rgb(&[0; 8], 2, 1, &l), Err(PixelError::Unsupported(16)));
    }

    #[test]
    fn redaction_rects_are_translated_and_clipped() {
        let r = to_image_rects(
            &[
                Rect::new(110, 220, 30, 10),            // inside
                Rect::new(90, 195, 20, 10),             // over the top-left corner
                Rect::new(500, 500, 10, 10),            // outside
                Rect::new(120, 230, 0, 5),              // empty
                Rect::new(i32::MIN, i32::MIN, 120, 24), // a hidden GTK 3 widget
            ],
            (100, 200),
            100,
            50,
        );
        assert_eq!(r, vec![Rect::new(10, 20, 30, 10), Rect::new(0, 0, 10, 5)]);
    }

    #[test]
    fn black_out_paints_only_the_rectangle() {
        let (w, h) = (4u32, 3u32);
        let mut rgb = vec![200u8; (w * h * 3) as usize];
        black_out(&mut rgb, w, &[Rect::new(1, 1, 2, 1)]);
        for y in 0..h {
            for x in 0..w {
                let i = ((y * w + x) * 3) as usize;
                let black = y == 1 && (1..3).contains(&x);
                assert_eq!(rgb[i] == 0, black, "pixel {x},{y}");
            }
        }
    }

    #[test]
    fn png_round_trips() {
        let (w, h) = (3u32, 2u32);
        let rgb: Vec<u8> = (0..w * h * 3).map(|i| i as u8 * 10).collect();
        let data = encode_png(&rgb, w, h).unwrap();
        let dec = png::Decoder::new(std::io::Cursor::new(&data));
        let mut reader = dec.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (w, h));
        assert_eq!(&buf[..info.buffer_size()], &rgb[..]);
    }
}
