//! The takeover surface on a Wayland session: the real `nish-indicator` on the Wayland test
//! desktop (mutter headless, no X server), the test playing the broker on its socketpair and
//! the person through mutter's RemoteDesktop API (`tests/wayland/person.py`).
//!
//! What it shows: ShowTakeover is answered with TakeoverShown once the surface is on screen
//! (configured, its first picture committed); while active it has no control (a click on it
//! answers nothing); SetPaused brings Continue; a click on Continue right after it appeared,
//! keys, a click made while the indicator was stopped (`SIGSTOP`, continued 700 ms later)
//! and a click within 1.5 s of the driver's own press (DriverPress) answer nothing; the
//! person's click after the arming delay answers Continue; a consent dialog can show over it
//! and be answered by its own click while the takeover is on; a second session's ShowTakeover
//! is answered at once and shares the surface; HideTakeover of the last session removes the
//! surface (a click where it was reaches nothing of the indicator's); and when the
//! compositor's connection ends, the takeover ends with TakeoverLost "display_lost".
//!
//! Where the surface is: a Wayland client cannot learn its window's position, and the test
//! assumes none of mutter's placement (measured: mutter 43 puts it at 4,24 on the empty
//! 1280x800 workspace). The person's pointer sweeps the screen in steps of half the surface's
//! size until it enters the surface; the surface point the compositor told on entry (the
//! indicator's "pointer entered the takeover surface at (x, y)" log line) gives the surface's
//! origin, and Continue's place in the surface is logged when the surface is laid out.

mod common;

use std::time::Duration;

use common::wayland::{Indicator, Person};
use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentApp, ConsentDialog, ConsentRequest, HostProgram, IndicatorToBroker,
};
use nish_testdesk::WaylandDesktop;

/// X keysyms.
const XK_SHIFT_L: u32 = 0xffe1;
const XK_RETURN: u32 = 0xff0d;
const XK_SPACE: u32 = 0x20;

const ARMED: Duration = Duration::from_millis(900);
const ANSWER: Duration = Duration::from_secs(5);
/// The test desktop's monitor (logical pixels).
const SCREEN: (f64, f64) = (1280.0, 800.0);

fn pair(s: &str, sep: char) -> (f64, f64) {
    let (a, b) = s.split_once(sep).unwrap_or_else(|| panic!("{s:?}"));
    let p = |v: &str| {
        v.trim_matches(|c: char| !c.is_ascii_digit() && c != '.' && c != '-')
            .parse::<f64>()
            .unwrap_or_else(|e| panic!("{v:?}: {e}"))
    };
    (p(a), p(b))
}

/// Sweeps the person's pointer over the screen, rows `size.1 / 2` apart and steps `size.0 / 2`
/// apart, until the indicator says it entered the takeover surface; returns the surface's
/// origin on the screen.
fn locate(person: &mut Person, ind: &Indicator, size: (f64, f64)) -> Option<(f64, f64)> {
    let (dx, dy) = ((size.0 / 2.0).floor(), (size.1 / 2.0).floor());
    let mut y = 2.0;
    while y < SCREEN.1 {
        let mut x = 2.0;
        while x < SCREEN.0 {
            person.move_to(x, y);
            std::thread::sleep(Duration::from_millis(30));
            while let Ok(l) = ind.log.try_recv() {
                assert!(!l.contains("refused system call"), "{l}");
                if let Some(at) = l.split("pointer entered the takeover surface at ").nth(1) {
                    let (sx, sy) = pair(at, ',');
                    return Some((x - sx, y - sy));
                }
            }
            x += dx;
        }
        y += dy;
    }
    None
}

#[test]
fn the_wayland_takeover_surface_shows_pauses_continues_on_a_click_and_goes() {
    let mut desk = WaylandDesktop::start().expect("the Wayland test desktop starts");
    let mut person = Person::start(&desk);
    // A keyboard on the seat: without one no toplevel is ever focused (activated).
    person.key(XK_SHIFT_L);
    let mut ind = Indicator::spawn(&desk);
    let session = || "mcp:host:4242".to_string();

    // Shown: told only once it is on screen.
    ind.drain_log();
    ind.send(BrokerToIndicator::ShowTakeover {
        session: session(),
        paused: false,
        show: 21,
    });
    let laid = ind.wait_log("takeover surface laid out: ", ANSWER);
    ind.wait_log("takeover surface shown", ANSWER);
    assert_eq!(
        ind.recv(ANSWER),
        Some(IndicatorToBroker::TakeoverShown {
            session: session(),
            show: 21
        })
    );
    // "... laid out: WxH at scale S; continue at X,Y WxH" (surface points).
    let rest = laid.split("laid out: ").nth(1).unwrap();
    let w: Vec<&str> = rest.split_whitespace().collect();
    let size = pair(w[0], 'x');
    let (cx, cy) = pair(w[6], ',');
    let (cw, ch) = pair(w[7], 'x');
    assert!(
        size.0 < SCREEN.0 / 2.0 && size.1 < SCREEN.1 / 4.0,
        "compact, not full screen: {size:?}"
    );
    ind.wait_log("takeover surface focus changed activated=true", ANSWER);
    std::thread::sleep(ARMED);

    // Where mutter put it: the person's pointer sweeps the screen in steps smaller than the
    // surface until it enters it; the surface point told then gives the origin.
    let origin = locate(&mut person, &ind, size).expect("the pointer finds the surface");
    assert!(
        origin.0 >= 0.0
            && origin.1 >= 0.0
            && origin.0 + size.0 <= SCREEN.0
            && origin.1 + size.1 <= SCREEN.1,
        "the surface of {size:?} at {origin:?} lies on the screen"
    );
    eprintln!("mutter placed the takeover surface of {size:?} at {origin:?}");
    let cont = (origin.0 + cx + cw / 2.0, origin.1 + cy + ch / 2.0);

    // Active: no control where Continue will be.
    person.move_to(cont.0, cont.1);
    person.click();
    ind.wait_log("button event on the takeover surface", ANSWER);
    ind.expect_silence(Duration::from_millis(800), "a click on the active surface");

    // Paused: a click right after Continue appeared under the resting pointer counts not.
    ind.drain_log();
    ind.send(BrokerToIndicator::SetPaused {
        session: session(),
        paused: true,
    });
    ind.wait_log("takeover surface paused state changed paused=true", ANSWER);
    person.move_to(cont.0 + 1.0, cont.1);
    person.move_to(cont.0, cont.1);
    person.click();
    ind.wait_log("button event on the takeover surface", ANSWER);
    ind.expect_silence(
        Duration::from_millis(800),
        "a click right after Continue appeared",
    );

    // Keys on the focused surface answer nothing (it has no keyboard).
    std::thread::sleep(ARMED);
    person.move_to(cont.0 + 1.0, cont.1);
    person.move_to(cont.0, cont.1);
    for k in [XK_RETURN, XK_SPACE] {
        person.key(k);
    }
    ind.expect_silence(Duration::from_millis(800), "Return and space");

    // A click made while the indicator was stopped (`SIGSTOP`, as another process of the
    // person's user may do) counts not when it is continued: the stall re-arms Continue.
    let pid = nix::unistd::Pid::from_raw(i32::try_from(ind.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("stopped");
    std::thread::sleep(Duration::from_millis(100));
    person.move_to(cont.0 + 1.0, cont.1);
    person.move_to(cont.0, cont.1);
    person.click();
    std::thread::sleep(Duration::from_millis(600));
    ind.drain_log();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).expect("continued");
    ind.wait_log("did not run for a while: Continue is re-armed", ANSWER);
    ind.expect_silence(
        Duration::from_millis(800),
        "a click made while the indicator was stopped",
    );

    // Within 1.5 s of the driver's own press: nothing (at a point told after the stall).
    person.move_to(cont.0 + 1.0, cont.1);
    person.move_to(cont.0, cont.1);
    ind.drain_log();
    ind.send(BrokerToIndicator::DriverPress);
    std::thread::sleep(Duration::from_millis(300));
    person.click();
    let why = ind.wait_log("did not count", ANSWER);
    assert!(why.contains("DriverQuiet"), "{why}");
    ind.expect_silence(
        Duration::from_millis(500),
        "a click right after DriverPress",
    );

    // The person's click after all that: Continue.
    std::thread::sleep(Duration::from_millis(1000));
    person.click();
    assert_eq!(
        ind.recv(ANSWER),
        Some(IndicatorToBroker::Continue { session: session() })
    );

    // A consent dialog for another request shows over it and is answered by its own click,
    // the takeover staying on.
    let at = ind.show(ConsentDialog {
        id: 7,
        request: ConsentRequest {
            host_claimed: "Test Host".into(),
            program: HostProgram {
                exe: "/usr/bin/test-host".into(),
                pid: 4242,
                script: String::new(),
            },
            apps: vec![ConsentApp {
                name: "gedit".into(),
                ticked: true,
                windows: 1,
                program: "gedit".into(),
            }],
            missing_requested: 0,
            lease_minutes: 15,
            takeover: false,
            clipboard: false,
            timeout_ms: 60_000,
        },
    });
    ind.wait_log("consent dialog focus changed activated=true", ANSWER);
    std::thread::sleep(ARMED);
    person.move_to(at["Deny"].0, at["Deny"].1);
    person.click();
    match ind.recv(ANSWER) {
        Some(IndicatorToBroker::Consent { id: 7, answer }) => assert!(!answer.allow),
        other => panic!("expected the answer to consent 7, got {other:?}"),
    }
    ind.expect_silence(Duration::from_millis(300), "the takeover after the dialog");

    // A second session shares the surface: told at once; hiding the first keeps it.
    let other = || "mcp:other:4343".to_string();
    ind.send(BrokerToIndicator::ShowTakeover {
        session: other(),
        paused: false,
        show: 22,
    });
    assert_eq!(
        ind.recv(ANSWER),
        Some(IndicatorToBroker::TakeoverShown {
            session: other(),
            show: 22
        })
    );
    ind.drain_log();
    ind.send(BrokerToIndicator::HideTakeover { session: session() });
    ind.wait_log("takeover hidden for a session", ANSWER);
    std::thread::sleep(Duration::from_millis(300));
    while let Ok(l) = ind.log.try_recv() {
        assert!(!l.contains("takeover surface removed"), "{l}");
    }

    // Hidden: gone from the screen (a click where Continue was reaches nothing of ours).
    ind.drain_log();
    ind.send(BrokerToIndicator::HideTakeover { session: other() });
    ind.wait_log("takeover surface removed", ANSWER);
    std::thread::sleep(ARMED);
    person.move_to(cont.0 + 1.0, cont.1);
    person.move_to(cont.0, cont.1);
    person.click();
    ind.expect_silence(Duration::from_millis(800), "a click where the surface was");
    while let Ok(l) = ind.log.try_recv() {
        assert!(!l.contains("takeover surface"), "after HideTakeover: {l}");
    }

    // The compositor goes: a takeover on then ends at once.
    ind.send(BrokerToIndicator::ShowTakeover {
        session: session(),
        paused: true,
        show: 23,
    });
    assert_eq!(
        ind.recv(ANSWER),
        Some(IndicatorToBroker::TakeoverShown {
            session: session(),
            show: 23
        })
    );
    drop(person);
    desk.stop().expect("the desktop stops");
    assert_eq!(
        ind.recv(ANSWER),
        Some(IndicatorToBroker::TakeoverLost {
            session: session(),
            reason: "display_lost".into()
        })
    );
    ind.drain_log();
}
