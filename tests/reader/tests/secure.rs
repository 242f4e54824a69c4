//! Secrets at the source: the real `nish-reader` on a private headless desktop, spoken to as
//! the broker does, with Chromium on tests/pages/secrets.html and a GTK 3 app
//! (tests/apps/secrets_gtk3.py).
//!
//! - Fields named in every listed language, a number input, a password input: secure, and
//!   their values (canaries) never leave the reader.
//! - Credential-looking values of ordinary fields: withheld and marked `redacted`; static text
//!   and ordinary values: as they are.
//! - A GTK 3 password entry switched to visible (a plain `text` then) stays secure.
//! - Captures: the window moved and the page scrolled since the walk, the password fields are
//!   still black where they are now (pixels checked); a window moved again and again while
//!   captures are taken gives only refusals or images with the fields black.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nish_proto::model::{Node, Rect, State, Tree, WindowInfo};
use nish_proto::wire::reader::{ReaderToBroker, WalkLimits};
use nish_testdesk::agents::Reader;
use nish_testdesk::wait::{Poll, poll};
use nish_testdesk::{App, Desktop, page};

/// The canaries of secrets.html: values of secure fields that must never leave the reader.
const PAGE_CANARIES: &[&str] = &[
    "canary-",
    "4013397215836",
    "ghp_Q8zR2mWx9LpA4sKd7HfT3nVb6cYe1uJo5iGk",
    "vT7qLm2XpR9sKw4NzB6d",
];
/// The labels of secrets.html's fields that only their name makes secure.
const SECURE_LABELS: &[&str] = &[
    "Password",
    "PIN",
    "CVV",
    "One-time code",
    "Security code",
    "Card number",
    "Passwort",
    "Mot de passe",
    "Contraseña",
    "Codice di sicurezza",
    "Senha",
    "Wachtwoord",
    "Hasło",
    "Пароль",
    "密码",
    "パスワード",
    "Kod PIN",
    "Passphrase",
];

const GTK_PASSWORD: &str = "gtk-password-canary-7731";
const GTK_NOTES: &str = "token: gtk-notes-canary-2290";

fn reader(desk: &Desktop) -> Reader {
    let bin = nish_testdesk::session::workspace_bin("nish-reader").expect("the reader's binary");
    Reader::start(desk, &bin).expect("the reader")
}

fn full() -> WalkLimits {
    WalkLimits {
        budget_ms: 10_000,
        ..WalkLimits::default()
    }
}

fn read_until(r: &mut Reader, w: &WindowInfo, what: &str, ok: impl Fn(&Tree) -> bool) -> Tree {
    poll(what, Duration::from_secs(30), || {
        Ok(match r.read(w, full()) {
            Ok((t, _)) if ok(&t) => Poll::Ready(t),
            Ok((t, _)) => Poll::Pending(format!("{} rows", t.nodes.len())),
            Err(e) => Poll::Pending(format!("{e:#}")),
        })
    })
    .expect(what)
}

fn field<'a>(t: &'a Tree, label: &str) -> &'a Node {
    t.nodes
        .iter()
        .find(|n| {
            n.name == label && matches!(n.role.as_str(), "entry" | "spin_button" | "password_text")
        })
        .unwrap_or_else(|| panic!("no field {label:?}"))
}

fn assert_no_canary(t: &Tree, canaries: &[&str]) {
    let all = format!("{t:?}");
    for c in canaries {
        assert!(!all.contains(c), "{c:?} left the reader");
    }
}

fn decode_png(data: &[u8]) -> (u32, u32, Vec<u8>) {
    let dec = png::Decoder::new(std::io::Cursor::new(data));
    let mut reader = dec.read_info().expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("png frame");
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// The pixels of `rect` (screen coordinates) in a capture whose top-left corner is `origin`,
/// 1 px inside its edges.
fn pixels(rgb: &[u8], w: u32, h: u32, origin: (i32, i32), rect: &Rect) -> Vec<[u8; 3]> {
    let mut out = Vec::new();
    let x0 = (rect.x - origin.0 + 1).max(0);
    let y0 = (rect.y - origin.1 + 1).max(0);
    let x1 = (rect.x - origin.0 + rect.w - 1).min(w as i32);
    let y1 = (rect.y - origin.1 + rect.h - 1).min(h as i32);
    for y in y0..y1 {
        for x in x0..x1 {
            let i = ((y as u32 * w + x as u32) * 3) as usize;
            out.push([rgb[i], rgb[i + 1], rgb[i + 2]]);
        }
    }
    out
}

fn png_of(a: ReaderToBroker) -> Result<(u32, u32, Vec<u8>, u32), String> {
    match a {
        ReaderToBroker::Png {
            width,
            height,
            data,
            redacted,
            ..
        } => {
            let (w, h, rgb) = decode_png(&data);
            assert_eq!((w, h), (width, height));
            Ok((w, h, rgb, redacted))
        }
        ReaderToBroker::Failed { failure, .. } => Err(failure.code),
        other => panic!("unexpected answer {other:?}"),
    }
}

#[test]
fn chromium_secure_fields_redacted_values_and_captures_that_follow_the_fields() {
    let desk = Desktop::start().expect("the desktop");
    let app = desk
        .spawn(App::Chromium {
            page: page("secrets.html"),
        })
        .expect("chromium");
    desk.wait_atspi_app(app.pid, Duration::from_secs(60))
        .expect("chromium on the registry");
    desk.wait_atspi_document(
        app.pid,
        "nish-driver secrets test page",
        Duration::from_secs(60),
    )
    .expect("the page's tree");
    let mut r = reader(&desk);
    let w = r.window_of(app.pid).expect("the window");
    let t = read_until(&mut r, &w, "the secrets page", |t| {
        t.nodes
            .iter()
            .any(|n| n.name == "City" && n.value.as_deref() == Some("Lisbon"))
    });

    // Named secure in every language: secure and without a value.
    for label in SECURE_LABELS {
        let n = field(&t, label);
        assert!(n.is_secure(), "{label:?} is secure: {:?}", n.states);
        assert_eq!(n.value, None, "{label:?}");
    }
    let pw = field(&t, "Account key");
    assert_eq!(pw.role, "password_text");
    assert!(pw.is_secure() && pw.value.is_none());
    // Credential-looking values of ordinary fields: withheld and marked.
    for label in ["Deploy notes", "Build label"] {
        let n = field(&t, label);
        assert!(!n.is_secure(), "{label:?} is not a secure field");
        assert_eq!(n.value, None, "{label:?}");
        assert!(n.states.has(State::Redacted), "{label:?}: {:?}", n.states);
        assert!(n.states.model_names().contains(&"redacted"));
    }
    // Ordinary values and static text: as they are.
    assert_eq!(field(&t, "City").value.as_deref(), Some("Lisbon"));
    assert_eq!(
        field(&t, "Website").value.as_deref(),
        Some("https://example.com/docs/page-2?lang=en")
    );
    assert!(
        t.nodes
            .iter()
            .any(|n| n.name.contains("Example key format: AKIAIOSFODNN7EXAMPLE")),
        "static text is left alone"
    );
    assert_no_canary(&t, PAGE_CANARIES);

    // Read again one by one (after a settle that named them): the secure fields and the rows
    // inside them give nothing; an ordinary field gives its value; an object of no walk is
    // refused.
    let inside: Vec<String> = t
        .nodes
        .iter()
        .filter(|n| n.is_secure())
        .map(|n| n.handle.clone())
        .take(nish_proto::wire::reader::MAX_CHANGED - 1)
        .collect();
    assert!(
        t.nodes.iter().any(|n| n.is_secure()
            && n.role != "entry"
            && n.role != "password_text"
            && n.role != "spin_button"),
        "the page has rows inside a secure field"
    );
    let city = field(&t, "City").handle.clone();
    let mut asked = inside.clone();
    asked.push(city);
    match r.read_objects(&w, asked).expect("an answer") {
        ReaderToBroker::Objects { nodes, .. } => {
            assert_eq!(nodes.len(), inside.len() + 1);
            assert!(
                nodes[..inside.len()].iter().all(Option::is_none),
                "secure rows are not read again: {nodes:?}"
            );
            let c = nodes[inside.len()].as_ref().expect("City read again");
            assert_eq!(c.value.as_deref(), Some("Lisbon"));
            assert_no_canary(
                &Tree {
                    window: w.clone(),
                    nodes: nodes.into_iter().flatten().collect(),
                    truncated: None,
                },
                PAGE_CANARIES,
            );
        }
        other => panic!("expected the objects, got {other:?}"),
    }
    let stranger = format!("{}|/org/a11y/atspi/accessible/nowhere", w.pid);
    assert!(
        matches!(
            r.read_objects(&w, vec![stranger]).expect("an answer"),
            ReaderToBroker::Failed { .. }
        ),
        "an object of no walk is refused"
    );
    // States (the focus check before each typed character on Wayland): read for secure rows
    // too (states carry no text); an object of no walk, or more than MAX_CHANGED, refused.
    let mut asked = inside.clone();
    asked.push(field(&t, "City").handle.clone());
    match r.states(&w, asked.clone()).expect("an answer") {
        ReaderToBroker::States {
            states,
            app_windows,
            ..
        } => {
            assert_eq!(states.len(), asked.len());
            assert!(states.iter().all(Option::is_some), "{states:?}");
            // The app's window count is read with them (Chromium lists windows of its own
            // beside the page's).
            assert!(app_windows.is_some_and(|n| n >= 1), "{app_windows:?}");
        }
        other => panic!("expected the states, got {other:?}"),
    }
    // The walk's own application, an object it did not walk.
    let own = field(&t, "City").handle.clone();
    let bus = own.split_once('|').expect("a handle").0;
    let stranger = format!("{bus}|/org/a11y/atspi/accessible/nowhere");
    assert!(
        matches!(
            r.states(&w, vec![stranger]).expect("an answer"),
            ReaderToBroker::Failed { .. }
        ),
        "the states of an object of no walk are refused"
    );
    let many: Vec<String> = t
        .nodes
        .iter()
        .map(|n| n.handle.clone())
        .take(nish_proto::wire::reader::MAX_CHANGED + 1)
        .collect();
    assert_eq!(many.len(), nish_proto::wire::reader::MAX_CHANGED + 1);
    assert!(
        matches!(
            r.states(&w, many).expect("an answer"),
            ReaderToBroker::Failed { .. }
        ),
        "more than MAX_CHANGED objects are refused"
    );

    // The window moves and the page scrolls after the walk.
    let secure: Vec<String> = t
        .nodes
        .iter()
        .filter(|n| n.is_secure())
        .map(|n| n.handle.clone())
        .collect();
    // The named fields, the password input, and the rows inside the editable region.
    assert!(
        secure.len() > SECURE_LABELS.len(),
        "{} secure rows",
        secure.len()
    );
    let ce = field(&t, "Passphrase");
    let inside: Vec<&Node> = t
        .nodes
        .iter()
        .filter(|n| {
            n.parent
                .is_some_and(|p| t.nodes[p as usize].handle == ce.handle)
        })
        .collect();
    assert!(!inside.is_empty(), "the editable region has child rows");
    assert!(
        inside.iter().all(|n| n.is_secure() && n.name.is_empty()),
        "rows inside a secure field carry nothing: {inside:?}"
    );
    let pw_before = pw.frame.expect("the password field's frame");
    let wid = app.window_id.to_string();
    let (nx, ny) = (w.frame.x + 37, w.frame.y + 23);
    desk.xdotool(&["windowmove", &wid, &nx.to_string(), &ny.to_string()])
        .expect("move the window");
    let moved = poll("the window moved", Duration::from_secs(10), || {
        let now = r.window_of(app.pid)?;
        Ok(if now.frame != w.frame {
            Poll::Ready(now)
        } else {
            Poll::Pending(format!("{:?}", now.frame))
        })
    })
    .expect("move");
    let (cx, cy) = (moved.frame.x + 300, moved.frame.y + 300);
    desk.xdotool(&["mousemove", &cx.to_string(), &cy.to_string()])
        .expect("pointer over the page");
    desk.xdotool(&["click", "--repeat", "2", "--delay", "80", "5"])
        .expect("scroll down");
    // Wait for the page to come to rest (smooth scrolling), reading the field's frame.
    let now = poll("the page scrolled", Duration::from_secs(10), || {
        let (t2, _) = r.read(&moved, full())?;
        let f = field(&t2, "Account key").frame;
        let rel = |f: Rect, win: &WindowInfo| (f.x - win.frame.x, f.y - win.frame.y);
        Ok(match f {
            Some(f) if rel(f, &moved) != rel(pw_before, &w) => {
                std::thread::sleep(Duration::from_millis(400));
                let (t3, _) = r.read(&moved, full())?;
                if field(&t3, "Account key").frame == Some(f) {
                    Poll::Ready(t3)
                } else {
                    Poll::Pending("still scrolling".into())
                }
            }
            other => Poll::Pending(format!("{other:?}")),
        })
    })
    .expect("scroll");
    // The capture is asked for with the old walk's handles (as the broker would).
    let (iw, ih, rgb, redacted) =
        png_of(r.capture(&w, secure.clone()).expect("capture")).expect("the capture is taken");
    assert_eq!((iw as i32, ih as i32), (moved.frame.w, moved.frame.h));
    let origin = (moved.frame.x, moved.frame.y);
    let mut checked = 0;
    for label in SECURE_LABELS.iter().chain(["Account key"].iter()) {
        // Fields scrolled off the page's view are not showing and have no frame.
        let Some(visible) = field(&now, label)
            .frame
            .and_then(|f| f.intersect(&moved.frame))
        else {
            continue;
        };
        let px = pixels(&rgb, iw, ih, origin, &visible);
        assert!(!px.is_empty());
        assert!(
            px.iter().all(|p| *p == [0, 0, 0]),
            "{label:?} is black where it is now ({visible:?})"
        );
        checked += 1;
    }
    assert!(checked >= 10, "{checked} fields on screen");
    assert!(redacted as usize >= checked);
    // The image is the page: an ordinary field shows its yellow background.
    let city = field(&now, "City").frame.expect("city frame");
    let px = pixels(&rgb, iw, ih, origin, &city);
    assert!(
        px.iter().filter(|p| **p == [0xff, 0xf8, 0xd0]).count() > px.len() / 2,
        "the City field is not blacked out"
    );
    println!("moved by (37, 23) and scrolled: {checked} secure fields black where they are");

    // The window moves again and again while captures are taken: each capture is refused, or
    // shows the password field black at its place in the window.
    let pw_now = field(&now, "Account key").frame.expect("frame");
    let offset = (pw_now.x - moved.frame.x, pw_now.y - moved.frame.y);
    let stop = Arc::new(AtomicBool::new(false));
    let env = desk.env();
    let jitter = {
        let stop = stop.clone();
        let wid = wid.clone();
        let (a, b) = (
            moved.frame,
            Rect::new(moved.frame.x + 60, moved.frame.y + 40, 0, 0),
        );
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let p = if n.is_multiple_of(2) { b } else { a };
                let _ = std::process::Command::new("xdotool")
                    .args(["windowmove", &wid, &p.x.to_string(), &p.y.to_string()])
                    .env_clear()
                    .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                    .output();
                n += 1;
            }
            n
        })
    };
    let (mut taken, mut refused) = (0, 0);
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(220));
        match png_of(r.capture(&w, secure.clone()).expect("capture")) {
            Ok((iw, ih, rgb, _)) => {
                let rect = Rect::new(offset.0, offset.1, pw_now.w, pw_now.h);
                let px = pixels(&rgb, iw, ih, (0, 0), &rect);
                assert!(
                    px.iter().all(|p| *p == [0, 0, 0]),
                    "a capture taken while the window moved shows the password field"
                );
                taken += 1;
            }
            Err(code) => {
                assert_eq!(code, "stale_element_token");
                refused += 1;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let moves = jitter.join().expect("jitter thread");
    println!("window moved {moves} times during 12 captures: {taken} taken, {refused} refused");
    assert!(refused >= 1, "the moves were seen");
}

#[test]
fn gtk3_revealed_password_stays_secure() {
    let desk = Desktop::start().expect("the desktop");
    let script = nish_testdesk::test_app("secrets_gtk3.py");
    let app = desk
        .spawn(App::Command {
            program: "/usr/bin/python3".into(),
            args: vec![
                script.into(),
                "--password".into(),
                GTK_PASSWORD.into(),
                "--notes".into(),
                GTK_NOTES.into(),
            ],
        })
        .expect("the GTK 3 app");
    desk.wait_atspi_app(app.pid, Duration::from_secs(45))
        .expect("on the registry");
    let mut r = reader(&desk);
    let w = r.window_of(app.pid).expect("the window");
    let t = read_until(&mut r, &w, "the GTK 3 app", |t| {
        t.nodes.iter().any(|n| n.role == "password_text")
    });
    let pw = t
        .nodes
        .iter()
        .find(|n| n.role == "password_text")
        .expect("the password entry");
    assert!(pw.is_secure() && pw.value.is_none());
    let handle = pw.handle.clone();
    let notes = t
        .nodes
        .iter()
        .find(|n| n.name == "Deploy notes")
        .expect("notes");
    assert!(notes.value.is_none() && notes.states.has(State::Redacted));

    // The app shows the characters (SIGUSR2): the entry becomes a plain text.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(app.pid as i32),
        nix::sys::signal::Signal::SIGUSR2,
    )
    .expect("signal the app");
    let t = read_until(&mut r, &w, "the revealed entry", |t| {
        t.nodes
            .iter()
            .any(|n| n.handle == handle && n.role == "text")
    });
    let revealed = t.nodes.iter().find(|n| n.handle == handle).unwrap();
    assert_eq!(revealed.role, "text", "GTK 3 made it a plain text");
    assert!(
        revealed.is_secure(),
        "once secure, secure: {:?}",
        revealed.states
    );
    assert_eq!(revealed.value, None);
    assert_no_canary(&t, &[GTK_PASSWORD, "gtk-notes-canary"]);
    // A fresh reader has no memory: it reads the revealed entry's text. This is what the memory
    // protects against (the broker keeps its own memory for a restarted reader).
    let mut fresh = reader(&desk);
    let (t2, _) = fresh.read(&w, full()).expect("read");
    let plain = t2.nodes.iter().find(|n| n.handle == handle).unwrap();
    assert_eq!(plain.value.as_deref(), Some(GTK_PASSWORD));
}

/// `tests/pages/jumping.html` (with `query`) in Chromium, read until its password field is
/// there: the app, a reader, the window and the handles of its secure fields.
fn jumping_page(
    desk: &Desktop,
    query: &str,
) -> (nish_testdesk::AppHandle, Reader, WindowInfo, Vec<String>) {
    let mut url = page("jumping.html").into_os_string();
    url.push(query);
    let app = desk
        .spawn(App::Chromium {
            page: PathBuf::from(url),
        })
        .expect("chromium");
    desk.wait_atspi_document(
        app.pid,
        "nish-driver jumping field page",
        Duration::from_secs(60),
    )
    .expect("the page's tree");
    let mut r = reader(desk);
    let w = r.window_of(app.pid).expect("the window");
    let t = read_until(&mut r, &w, "the jumping page", |t| {
        t.nodes
            .iter()
            .any(|n| n.role == "password_text" && n.is_secure())
    });
    let secure = t
        .nodes
        .iter()
        .filter(|n| n.is_secure())
        .map(|n| n.handle.clone())
        .collect();
    (app, r, w, secure)
}

/// Pixels of the jumping page's password field's one colour (magenta) in `rgb`.
fn magenta(rgb: &[u8]) -> usize {
    rgb.chunks_exact(3)
        .filter(|p| *p == [0xff, 0, 0xff])
        .count()
}

/// A hostile page moves its password field away and back, every 7 ms, while captures are
/// taken: the two readings of the field's place can agree while the image shows it at the
/// other place. Every capture must be refused, or show none of the field's one colour
/// (magenta) anywhere.
#[test]
fn chromium_a_field_that_jumps_away_and_back_is_never_captured_uncovered() {
    let desk = Desktop::start().expect("the desktop");
    let (_app, mut r, w, secure) = jumping_page(&desk, "?jump=7");
    // Refusals because the two readings disagreed (the field moved between them) come without
    // the drawing watch too; those the watch made say the window drew.
    let (mut taken, mut refused, mut drew) = (0, 0, 0);
    for _ in 0..12 {
        std::thread::sleep(Duration::from_millis(220));
        let answer = r.capture(&w, secure.clone()).expect("capture");
        if let ReaderToBroker::Failed { failure, .. } = &answer
            && failure.message.contains("drew outside its secure fields")
        {
            drew += 1;
        }
        match png_of(answer) {
            Ok((_, _, rgb, _)) => {
                assert_eq!(
                    magenta(&rgb),
                    0,
                    "a capture taken while the field jumped shows the password field"
                );
                taken += 1;
            }
            Err(code) => {
                assert_eq!(code, "stale_element_token");
                refused += 1;
            }
        }
    }
    println!(
        "a field jumping every 7 ms: {taken} captures taken, {refused} refused, {drew} of them \
         for drawing"
    );
    // The same watch lets a still page's capture through: the Chromium test above captures
    // secrets.html with every field black.
    assert!(drew >= 1, "the watch saw the jumps");
}

/// Chromium tells where a scrolled page's fields are in steps about 500 ms apart, after it has
/// drawn the scroll: a capture right after a wheel scroll read the field's old place twice, and
/// the image showed it scrolled, beside its black box. Every capture right after a scroll must
/// be refused, or show none of the field's one colour.
#[test]
fn chromium_a_capture_right_after_a_scroll_does_not_show_the_field_beside_its_box() {
    let desk = Desktop::start().expect("the desktop");
    let (_app, mut r, w, secure) = jumping_page(&desk, "");
    let (cx, cy) = (w.frame.x + w.frame.w / 2, w.frame.y + w.frame.h / 2);
    desk.xdotool(&["mousemove", &cx.to_string(), &cy.to_string()])
        .expect("pointer over the page");
    let (mut taken, mut refused) = (0, 0);
    for i in 0..6 {
        // Down one notch, then back up: the field stays in view.
        let button = if i % 2 == 0 { "5" } else { "4" };
        desk.xdotool(&["click", button]).expect("scroll");
        match png_of(r.capture(&w, secure.clone()).expect("capture")) {
            Ok((_, _, rgb, _)) => {
                assert_eq!(
                    magenta(&rgb),
                    0,
                    "a capture right after a scroll shows the password field"
                );
                taken += 1;
            }
            Err(code) => {
                assert_eq!(code, "stale_element_token");
                refused += 1;
            }
        }
        // The page comes to rest before the next notch.
        std::thread::sleep(Duration::from_millis(1200));
    }
    println!("a capture right after each of 6 scrolls: {taken} taken, {refused} refused");
    assert!(taken >= 1, "a page at rest after its scroll is captured");
}
