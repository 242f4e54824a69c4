//! The dialog's fonts: the system's, from the system font directories fontconfig's own
//! configuration names on every major distribution ([`SYSTEM_FONT_DIRS`]; the person's
//! fontconfig files are not read: any program of that user could write them, to point the scan
//! at a huge tree or at files the dialog would then parse), of which only files root owns and
//! alone may write are kept (a font the person's user can write could be planted by any of
//! their programs to draw one word where the text says another), read into memory once,
//! **before the lock-down** (after it the indicator may open no file), and rasterised with
//! `ab_glyph`.
//!
//! One sans-serif family comes first (regular and bold); then, for every script in
//! [`SCRIPT_SAMPLES`] that the fonts so far lack, the first face that has it. Each character
//! is drawn with the first font of the chain that has a glyph for it; a character none has is
//! drawn as an empty box, never as a `?`.

use std::os::unix::fs::MetadataExt as _;

use ab_glyph::{Font as _, FontRef, FontVec};

/// Names a font family to try first (a fontconfig family name, such as `Noto Sans`).
pub const FONT_ENV: &str = "NISH_INDICATOR_FONT";

/// Sans-serif families tried in order for the first font (the desktops' own UI fonts first).
const FAMILIES: &[&str] = &[
    "Cantarell",
    "Noto Sans",
    "DejaVu Sans",
    "Ubuntu",
    "Liberation Sans",
    "Roboto",
    "Open Sans",
    "Arial",
    "FreeSans",
];

/// One character of each script the fallback fonts must cover if the system has a font for
/// it: Latin Extended (Polish), Greek, Cyrillic, Hebrew, Arabic, Devanagari, Thai, Georgian,
/// Hangul, Kana, CJK ideographs, and the full-width forms the Chinese and Japanese text uses.
pub const SCRIPT_SAMPLES: &[char] = &[
    'ł', 'Ω', 'Ж', 'א', 'ع', 'क', 'ก', 'ა', '한', 'あ', 'ア', '漢', '：', '「', '…',
];

/// A font of the chain.
#[derive(Debug)]
pub struct Face {
    /// The font.
    pub font: FontVec,
    /// Its family (for logs and tests).
    pub family: String,
}

/// The fonts the dialog draws with.
#[derive(Debug, Default)]
pub struct Fonts {
    /// Every font read.
    pub faces: Vec<Face>,
    /// Regular text: indices into `faces`, in fallback order.
    pub regular: Vec<usize>,
    /// Bold text: the first family's bold face (when it has one), then the regular chain.
    pub bold: Vec<usize>,
}

/// Where the system's fonts are: the directories `/etc/fonts/fonts.conf` names besides the
/// user's own on Debian, Ubuntu, Fedora and Arch.
pub const SYSTEM_FONT_DIRS: &[&str] = &["/usr/share/fonts", "/usr/local/share/fonts"];

impl Fonts {
    /// Finds and reads the system's fonts (call before the lock-down).
    pub fn load() -> Fonts {
        let started = std::time::Instant::now();
        let mut db = fontdb::Database::new();
        for dir in SYSTEM_FONT_DIRS {
            db.load_fonts_dir(dir);
        }
        // Only the system's own font files: a font the person's user can write (their own
        // fonts, or a directory their fontconfig adds) could be planted by any program of that
        // user to draw one word where the text says another.
        let untrusted: Vec<fontdb::ID> = db
            .faces()
            .filter(|f| match &f.source {
                fontdb::Source::File(path) => {
                    !std::fs::metadata(path).is_ok_and(|m| trusted(m.uid(), m.mode()))
                }
                _ => true,
            })
            .map(|f| f.id)
            .collect();
        for id in &untrusted {
            db.remove_face(*id);
        }
        let wanted = std::env::var(FONT_ENV).ok().filter(|v| !v.is_empty());
        let fonts = Fonts::from_db(&db, wanted.as_deref());
        let families: Vec<&str> = fonts.faces.iter().map(|f| f.family.as_str()).collect();
        tracing::debug!(
            "fonts: {} faces known ({} not the system's, left out), read {families:?} in {} ms",
            db.len(),
            untrusted.len(),
            started.elapsed().as_millis()
        );
        fonts
    }

    /// Chooses the chain from `db`, trying `wanted` first.
    pub fn from_db(db: &fontdb::Database, wanted: Option<&str>) -> Fonts {
        use fontdb::{Family, Query, Stretch, Style, Weight};
        let mut regular: Vec<(fontdb::ID, Face)> = Vec::new();
        let query = |name: &str, weight| {
            db.query(&Query {
                families: &[Family::Name(name)],
                weight,
                stretch: Stretch::Normal,
                style: Style::Normal,
            })
        };
        let mut bold = None;
        for name in wanted.into_iter().chain(FAMILIES.iter().copied()) {
            let Some(id) = query(name, Weight::NORMAL) else {
                continue;
            };
            if let Some(face) = read(db, id) {
                bold = query(name, Weight::BOLD)
                    .filter(|b| *b != id && db.face(*b).is_some_and(|f| f.weight.0 >= 600))
                    .and_then(|b| read(db, b));
                regular.push((id, face));
                break;
            }
        }
        // Fallbacks: per script, the first face (upright, regular, proportional preferred)
        // that has it.
        let mut candidates: Vec<&fontdb::FaceInfo> = db.faces().collect();
        candidates.sort_by_key(|f| {
            (
                f.style != Style::Normal,
                f.weight.0.abs_diff(400),
                f.monospaced,
                !f.families.iter().any(|(n, _)| n.contains("Sans")),
                f.families.first().map(|(n, _)| n.clone()),
            )
        });
        if regular.is_empty()
            && let Some(face) = candidates.first().and_then(|f| read(db, f.id))
        {
            regular.push((candidates[0].id, face));
        }
        for &c in SCRIPT_SAMPLES {
            if regular.iter().any(|(_, f)| has(&f.font, c)) {
                continue;
            }
            let found = candidates.iter().find(|f| {
                !regular.iter().any(|(id, _)| *id == f.id)
                    && db
                        .with_face_data(f.id, |data, index| {
                            FontRef::try_from_slice_and_index(data, index)
                                .is_ok_and(|font| font.glyph_id(c).0 != 0)
                        })
                        .unwrap_or(false)
            });
            if let Some(f) = found
                && let Some(face) = read(db, f.id)
            {
                regular.push((f.id, face));
            }
        }
        let mut faces: Vec<Face> = regular.into_iter().map(|(_, f)| f).collect();
        let regular: Vec<usize> = (0..faces.len()).collect();
        let mut bold_chain = Vec::new();
        if let Some(b) = bold {
            faces.push(b);
            bold_chain.push(faces.len() - 1);
        }
        bold_chain.extend(regular.iter().copied());
        Fonts {
            faces,
            regular,
            bold: bold_chain,
        }
    }

    /// True when no font was found (the dialog then draws boxes for every character).
    pub fn is_empty(&self) -> bool {
        self.regular.is_empty()
    }
}

/// True for a font file root owns and only root may write (the system's own).
pub fn trusted(uid: u32, mode: u32) -> bool {
    uid == 0 && mode & 0o022 == 0
}

/// True when `font` has a glyph for `c`.
pub fn has(font: &FontVec, c: char) -> bool {
    font.glyph_id(c).0 != 0
}

/// The largest font file read (the biggest CJK collections are a few tens of MiB).
const MAX_FONT_FILE: u64 = 256 << 20;

/// Reads a font file through one handle: opened without following a symlink at its end, then
/// checked on that handle (a regular file root owns and only root may write) and read through
/// it, so what is checked is what is read (a path flipped after a check by path is not).
pub fn read_trusted(path: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)
        .ok()?;
    let m = f.metadata().ok()?;
    if !m.is_file() || !trusted(m.uid(), m.mode()) || m.len() > MAX_FONT_FILE {
        return None;
    }
    let mut bytes = Vec::with_capacity(m.len() as usize);
    f.take(MAX_FONT_FILE).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Reads face `id` into memory: a font file only through [`read_trusted`], never by path
/// again (fontdb would map it by path).
fn read(db: &fontdb::Database, id: fontdb::ID) -> Option<Face> {
    let info = db.face(id)?;
    let family = info
        .families
        .first()
        .map(|(n, _)| n.clone())
        .unwrap_or_default();
    let font = match &info.source {
        fontdb::Source::File(path) => {
            let bytes = read_trusted(path);
            if bytes.is_none() {
                tracing::debug!("a font file is not the system's: left out");
            }
            FontVec::try_from_vec_and_index(bytes?, info.index).ok()?
        }
        fontdb::Source::Binary(_) => db
            .with_face_data(id, |data, index| {
                FontVec::try_from_vec_and_index(data.to_vec(), index).ok()
            })
            .flatten()?,
        // Mapped by path elsewhere: not read.
        fontdb::Source::SharedFile(..) => return None,
    };
    Some(Face { font, family })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fonts_root_owns_and_alone_writes_are_read() {
        assert!(trusted(0, 0o100644));
        assert!(!trusted(1000, 0o100644), "the person's own font");
        assert!(!trusted(0, 0o100666), "anyone may write it");
        assert!(!trusted(0, 0o100664), "a group may write it");
    }

    #[test]
    fn the_check_is_on_the_handle_that_is_read() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("nish-fonts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        // A font file the test user owns (as root: given to nobody), planted where a user font
        // directory would be: refused whatever its path.
        let own = dir.join("planted.ttf");
        std::fs::write(&own, b"not really a font").unwrap();
        if std::fs::metadata(&own).unwrap().uid() == 0 {
            nix::unistd::chown(&own, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
        }
        assert_eq!(read_trusted(&own), None, "a user-owned font");
        // A root-owned file read directly is read; through a symlink it is not (the link can
        // be flipped between a check and a read).
        let system = std::path::Path::new("/etc/passwd");
        if std::fs::metadata(system).is_ok_and(|m| trusted(m.uid(), m.mode())) {
            assert!(read_trusted(system).is_some_and(|b| !b.is_empty()));
            let link = dir.join("link.ttf");
            std::os::unix::fs::symlink(system, &link).unwrap();
            assert_eq!(read_trusted(&link), None, "a symlink is not followed");
        }
        // Root's own file that others may write is refused too.
        if nix::unistd::geteuid().is_root() {
            let loose = dir.join("loose.ttf");
            std::fs::write(&loose, b"x").unwrap();
            std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o666)).unwrap();
            assert_eq!(read_trusted(&loose), None, "writable by others");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
