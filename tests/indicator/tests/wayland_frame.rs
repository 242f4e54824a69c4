//! The takeover frame on the Wayland compositors that offer layer-shell: the real
//! `nish-indicator` with the test as its broker, on sway 1.7 headless and on KWin 5.27 on a
//! virtual framebuffer; the person through sway's virtual pointer (`wlr_person.py`) and KDE's
//! portal (`kde_person.py`).
//!
//! What it shows, on sway, read from the screen's pixels (`grim`, through wlroots'
//! screencopy): `TakeoverShown` comes only after the indicator saw every side drawn; the ring is exactly
//! the frame's width, red, on all four edges, and nothing of it lies inside; it takes no
//! input (the person's pointer on the ring reaches the full-screen consent dialog under it);
//! it stays bright while one of two sessions is active and dims when both are paused; a
//! screen added during a takeover gets its own ring; it goes with the last session; a screen
//! switched off leaves the takeover as it was (sway 1.7 closes no side then: the indicator's
//! `TakeoverLost` "indicator_destroyed" on a side the compositor closed is reached by no
//! test here). On KWin, read from KWin's own list of windows
//! (its scripting API): the four sides at the screen's edges, the same pointer check, and
//! nothing left after the takeover.

mod common;

use std::time::{Duration, Instant};

use common::wayland::{Indicator, Person};
use nish_proto::wire::indicator::{BrokerToIndicator, IndicatorToBroker};
use nish_testdesk::WaylandDesktop;

const ANSWER: Duration = Duration::from_secs(5);
/// The frame's width in pixels (the X11 frame's).
const WIDTH: usize = 6;
/// The indicator's red and dimmed red, as the screen shows them.
const RED: [u8; 3] = [0xe0, 0x1b, 0x24];
const DIM: [u8; 3] = [0x8a, 0x3b, 0x3b];

/// Where the person's pointer rests while the screen is read: sway draws it into the picture,
/// and there it is on no point checked.
const AWAY: (f64, f64) = (300.0, 500.0);

/// One screen's pixels, RGB.
struct Shot {
    w: usize,
    h: usize,
    px: Vec<u8>,
}

impl Shot {
    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.w + x) * 3;
        [self.px[i], self.px[i + 1], self.px[i + 2]]
    }

    /// Where the ring is not `colour`: points on each edge, at the frame's inner row, and the
    /// first row inside it; empty when the ring is exactly there.
    fn ring_faults(&self, colour: [u8; 3]) -> Vec<String> {
        let (w, h) = (self.w, self.h);
        let mut faults = Vec::new();
        let mut want = |x: usize, y: usize, on: bool| {
            let c = self.at(x, y);
            if (c == colour) != on {
                faults.push(format!("({x},{y}) is {c:?}, ring {on}"));
            }
        };
        for t in [0, w / 3, w / 2, w - 1] {
            want(t, 0, true);
            want(t, WIDTH - 1, true);
            want(t, h - WIDTH, true);
            want(t, h - 1, true);
        }
        for t in [0, h / 3, h - 1] {
            want(0, t, true);
            want(WIDTH - 1, t, true);
            want(w - WIDTH, t, true);
            want(w - 1, t, true);
        }
        // Just inside, away from the takeover surface (sway floats it in the middle).
        for t in [w / 8, w - w / 8] {
            want(t, WIDTH, false);
            want(t, h - WIDTH - 1, false);
        }
        for t in [h / 8, h - h / 8] {
            want(WIDTH, t, false);
            want(w - WIDTH - 1, t, false);
        }
        faults
    }

    /// Whether no point of the ring's edges shows red or dimmed red.
    fn ringless(&self) -> bool {
        let (w, h) = (self.w, self.h);
        let points = [(w / 3, 0), (w / 3, h - 1), (0, h / 3), (w - 1, h / 3)];
        points
            .iter()
            .all(|&(x, y)| self.at(x, y) != RED && self.at(x, y) != DIM)
    }
}

/// The screen `output` (or the whole layout) as grim reads it through screencopy.
fn grim(desk: &WaylandDesktop, output: Option<&str>) -> Shot {
    let mut cmd = desk.command("/usr/bin/grim");
    if let Some(o) = output {
        cmd.args(["-o", o]);
    }
    let out = cmd.args(["-t", "ppm", "-"]).output().expect("grim runs");
    assert!(
        out.status.success(),
        "grim: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // P6, width height, 255, then the pixels.
    let b = out.stdout;
    let mut fields = Vec::new();
    let mut i = 0;
    while fields.len() < 4 {
        while b[i].is_ascii_whitespace() {
            i += 1;
        }
        let start = i;
        while !b[i].is_ascii_whitespace() {
            i += 1;
        }
        fields.push(String::from_utf8_lossy(&b[start..i]).to_string());
    }
    assert_eq!(fields[0], "P6");
    let (w, h): (usize, usize) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    let px = b[i + 1..].to_vec();
    assert_eq!(px.len(), w * h * 3, "a whole {w}x{h} picture");
    Shot { w, h, px }
}

/// Reads the screen until `good` holds (the compositor shows a commit within a frame or two).
fn until(desk: &WaylandDesktop, output: Option<&str>, what: &str, good: impl Fn(&Shot) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let shot = grim(desk, output);
        if good(&shot) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not on the screen in 3 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Shows `session`'s takeover and waits for `TakeoverShown`; the indicator must have said the
/// frame is shown (on `sides` sides) before it told the broker.
fn show(ind: &mut Indicator, session: &str, sides: &str) {
    let (_, mark) = ind.logged(0);
    ind.send(BrokerToIndicator::ShowTakeover {
        session: session.into(),
        paused: false,
        show: 11,
    });
    assert_eq!(
        ind.recv(ANSWER),
        Some(IndicatorToBroker::TakeoverShown {
            session: session.into(),
            show: 11,
        })
    );
    // The log line written right before the message was sent may come a moment after it.
    let deadline = Instant::now() + ANSWER;
    let lines = loop {
        let (lines, _) = ind.logged(mark);
        if lines.iter().any(|l| l.contains("takeover indicator shown")) {
            break lines;
        }
        assert!(Instant::now() < deadline, "no shown line: {lines:#?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let frame = lines
        .iter()
        .position(|l| l.contains("takeover frame shown"));
    let told = lines
        .iter()
        .position(|l| l.contains("takeover indicator shown"));
    if sides.is_empty() {
        // A second session shares the frame already shown.
        assert_eq!(frame, None, "{lines:#?}");
        return;
    }
    let f = frame.unwrap_or_else(|| panic!("no frame line: {lines:#?}"));
    assert!(
        Some(f) < told,
        "the frame was shown before the broker was told: {lines:#?}"
    );
    assert!(lines[f].ends_with(sides), "{:?}", lines[f]);
}

/// The person's pointer on the frame's top side reaches the full-screen consent dialog under
/// it: the frame takes no input.
fn pointer_passes_the_frame(ind: &mut Indicator, person: &mut Person) {
    ind.show(common::consent_request(7, &[("gedit", true)]));
    ind.drain_log();
    person.corner();
    person.move_to(640.0, 3.0);
    let entered = ind.wait_log("pointer entered the consent dialog at (", ANSWER);
    let at = entered.split("at (").nth(1).unwrap();
    let y: f64 = at
        .split(',')
        .nth(1)
        .unwrap()
        .trim_matches(|c: char| !c.is_ascii_digit() && c != '.')
        .parse()
        .unwrap();
    assert!(y < WIDTH as f64, "entered on the frame's rows: {entered}");
    ind.send(BrokerToIndicator::CancelConsent { id: 7 });
    ind.wait_log("consent 7 cancelled", ANSWER);
    person.move_to(AWAY.0, AWAY.1);
}

#[test]
fn the_frame_rings_every_screen_on_sway_dims_when_all_pause_and_takes_no_input() {
    let desk = WaylandDesktop::start_sway().expect("sway starts");
    let mut person = Person::start(&desk);
    person.move_to(AWAY.0, AWAY.1);
    let mut ind = Indicator::spawn(&desk);
    until(&desk, None, "a screen without a frame", Shot::ringless);

    show(&mut ind, "s1", "4 sides on 1 screens");
    let faults = grim(&desk, None).ring_faults(RED);
    assert!(faults.is_empty(), "the red frame: {faults:#?}");
    pointer_passes_the_frame(&mut ind, &mut person);

    // Bright while one session is active, dimmed when both are paused.
    show(&mut ind, "s2", "");
    ind.send(BrokerToIndicator::SetPaused {
        session: "s1".into(),
        paused: true,
    });
    ind.wait_log("takeover surface paused state changed paused=true", ANSWER);
    std::thread::sleep(Duration::from_millis(200));
    let faults = grim(&desk, None).ring_faults(RED);
    assert!(faults.is_empty(), "red while s2 is active: {faults:#?}");
    ind.send(BrokerToIndicator::SetPaused {
        session: "s2".into(),
        paused: true,
    });
    until(&desk, None, "the dimmed frame", |s| {
        s.ring_faults(DIM).is_empty()
    });

    // A screen added meanwhile gets its ring.
    desk.swaymsg(&["create_output"])
        .expect("sway adds a screen");
    ind.wait_log("takeover frame shown: 8 sides on 2 screens", ANSWER);
    until(&desk, Some("HEADLESS-2"), "the new screen's frame", |s| {
        s.ring_faults(DIM).is_empty()
    });

    // It goes with the last session.
    for s in ["s1", "s2"] {
        ind.send(BrokerToIndicator::HideTakeover { session: s.into() });
    }
    ind.wait_log("takeover surface removed", ANSWER);
    until(&desk, None, "no frame after the takeover", Shot::ringless);
    until(
        &desk,
        Some("HEADLESS-2"),
        "no frame there either",
        Shot::ringless,
    );

    // A screen switched off: sway 1.7 keeps the sides there (it closes no layer surface, so
    // the frame's loss cannot be provoked here); the takeover and the frame on the other
    // screen stay as they were.
    show(&mut ind, "s3", "8 sides on 2 screens");
    desk.swaymsg(&["output", "HEADLESS-2", "disable"])
        .expect("sway switches the screen off");
    ind.expect_silence(Duration::from_millis(500), "a screen switched off");
    let faults = grim(&desk, Some("HEADLESS-1")).ring_faults(RED);
    assert!(
        faults.is_empty(),
        "the frame on the screen left: {faults:#?}"
    );
    ind.send(BrokerToIndicator::HideTakeover {
        session: "s3".into(),
    });
    until(&desk, None, "no frame after the takeover", Shot::ringless);
    drop(person);
}

#[test]
fn the_frame_rings_the_screen_on_kwin_and_takes_no_input() {
    let desk = WaylandDesktop::start_kwin().expect("KWin starts");
    let mut person = Person::start(&desk);
    let mut ind = Indicator::spawn(&desk);
    // The indicator's surfaces are the test's: it opened the indicator's connection, as the
    // broker does.
    let me = std::process::id();
    let sides = |desk: &WaylandDesktop| -> Vec<(i64, i64, i64, i64)> {
        let mut v: Vec<_> = desk
            .kwin_windows()
            .expect("KWin lists its windows")
            .into_iter()
            .filter(|w| w["pid"] == me && w["caption"] == "")
            .map(|w| {
                let n = |k: &str| w[k].as_i64().unwrap();
                (n("x"), n("y"), n("width"), n("height"))
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(sides(&desk), []);
    show(&mut ind, "s1", "4 sides on 1 screens");
    assert_eq!(
        sides(&desk),
        [
            (0, 0, 6, 800),
            (0, 0, 1280, 6),
            (0, 794, 1280, 6),
            (1274, 0, 6, 800)
        ],
        "the four sides on the screen's edges, as KWin shows them"
    );
    pointer_passes_the_frame(&mut ind, &mut person);
    ind.send(BrokerToIndicator::HideTakeover {
        session: "s1".into(),
    });
    ind.wait_log("takeover surface removed", ANSWER);
    let deadline = Instant::now() + Duration::from_secs(3);
    while !sides(&desk).is_empty() {
        assert!(Instant::now() < deadline, "the frame is gone from KWin");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(person);
}
