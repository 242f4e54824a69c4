//! The consent dialog as a native Wayland client: the real `nish-indicator` on the Wayland test
//! desktop (mutter headless, no X server), the test playing the broker on its socketpair and
//! the person through mutter's RemoteDesktop API (`tests/wayland/person.py`): its pointer
//! events reach the dialog as a device's do.
//!
//! What it shows: a click on Allow answers allow with the ticked apps, a click on Deny answers
//! deny; Return and space on the focused dialog answer nothing; a click at the point the
//! compositor gave while the dialog was appearing answers nothing; a click right after the
//! dialog appeared answers nothing; when another window takes focus, the click that gives it
//! back answers nothing, and one after the arming delay does; a click made while the
//! indicator was stopped (`SIGSTOP`) right after the dialog was shown answers nothing when it
//! is continued past the arming delay, and a later click does. A stall of the indicator (it
//! logs it; a busy machine starves it now and then) restarts the arming delay and the distrust
//! of the pointer's point as a stop does: a click the test expects to answer that came after
//! one answers nothing, and the person moves the pointer off and back and clicks again.
//!
//! On the variant of the desktop whose mutter runs XWayland, an X client's XTEST input (a
//! pointer motion to Allow and a click there, Return and space; `xdotool` plays the attacker)
//! answers nothing, whether or not the person's pointer rests on Allow; the person's click
//! through RemoteDesktop afterwards does.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::wayland::{Indicator, Person};
use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentApp, ConsentControl, ConsentDialog, ConsentRequest, ConsentShown,
    HostProgram, IndicatorToBroker,
};
use nish_testdesk::WaylandDesktop;

/// X keysyms.
const XK_SHIFT_L: u32 = 0xffe1;
const XK_RETURN: u32 = 0xff0d;
const XK_SPACE: u32 = 0x20;

fn request(id: u64) -> ConsentDialog {
    ConsentDialog {
        id,
        request: ConsentRequest {
            host_claimed: "Test Host".into(),
            program: HostProgram {
                exe: "/usr/bin/test-host".into(),
                pid: 4242,
                script: String::new(),
            },
            apps: vec![
                ConsentApp {
                    name: "gedit".into(),
                    ticked: true,
                    windows: 1,
                    program: "gedit".into(),
                },
                ConsentApp {
                    name: "calc".into(),
                    ticked: false,
                    windows: 2,
                    program: "gnome-calculator".into(),
                },
            ],
            missing_requested: 0,
            lease_minutes: 15,
            takeover: false,
            clipboard: true,
            timeout_ms: 60_000,
        },
    }
}

fn consent(m: Option<IndicatorToBroker>, id: u64) -> nish_proto::wire::indicator::ConsentAnswer {
    match m {
        Some(IndicatorToBroker::Consent { id: got, answer }) if got == id => answer,
        other => panic!("expected the answer to consent {id}, got {other:?}"),
    }
}

const ARMED: Duration = Duration::from_millis(900);
const ANSWER: Duration = Duration::from_secs(5);

/// What the indicator logs when its event loop did not run for a while: stopped, or not
/// scheduled on a busy machine (a desktop test on a loaded one sees it now and then).
const STALLED: &str = "the indicator did not run for a while";

/// The person clicks where the pointer rests, on a control of dialog `id` that answers; returns
/// the answer. A stall of the indicator logged after `mark` (a place in its log, taken at least
/// the arming delay before the pointer last moved) and before the click's refusal restarts
/// the arming delay and the distrust of the pointer's point, as the rule says (a stopped
/// indicator and a starved one look alike): such a click rightly answers nothing, and the
/// person then moves the pointer off and back and clicks again past the arming delay, as one
/// would. A click that answers nothing without a stall before it fails the test.
fn click_answers(
    ind: &Indicator,
    person: &mut Person,
    id: u64,
    mut mark: usize,
) -> nish_proto::wire::indicator::ConsentAnswer {
    let (x, y) = person.at;
    for _ in 0..3 {
        person.click();
        if let Some(m) = ind.recv(ANSWER) {
            return consent(Some(m), id);
        }
        let (log, now) = ind.logged(mark);
        let refused = log
            .iter()
            .rposition(|l| l.contains("button event on a consent dialog control did not count"))
            .unwrap_or_else(|| panic!("the click answered nothing and was not refused: {log:#?}"));
        assert!(
            log[..refused].iter().any(|l| l.contains(STALLED)),
            "the click answered nothing, and the indicator did not stall before: {log:#?}"
        );
        mark = now;
        std::thread::sleep(ARMED);
        person.move_to(x + 1.0, y);
        person.move_to(x, y);
        std::thread::sleep(ARMED);
    }
    panic!("the indicator stalled before each of 3 clicks");
}

#[test]
fn the_person_answers_the_wayland_dialog_by_clicking_and_by_nothing_else() {
    let desk = WaylandDesktop::start().expect("the Wayland test desktop starts");
    let mut person = Person::start(&desk);
    // A keyboard on the seat: without one no toplevel is ever focused (activated).
    person.key(XK_SHIFT_L);
    let mut ind = Indicator::spawn(&desk);

    // Allow, with the app line "calc" ticked by a click first.
    let at = ind.show(request(1));
    ind.wait_log("consent dialog focus changed activated=true", ANSWER);
    std::thread::sleep(ARMED);
    // The dialog says what it shows (for the broker's text-only accessible): no focus ring,
    // no keys; then the tick.
    let ticks = |s: &ConsentShown| -> Vec<(ConsentControl, bool)> {
        s.controls.iter().map(|c| (c.control, c.ticked)).collect()
    };
    let (id, first) = ind
        .shown
        .recv_timeout(ANSWER)
        .expect("what the dialog shows");
    assert_eq!(id, 1);
    assert_eq!(
        (first.focus, first.keys, first.lang.as_str()),
        (None, false, "en")
    );
    assert!(
        ticks(&first).contains(&(ConsentControl::App(1), false)),
        "{first:?}"
    );
    person.move_to(at["App(1)"].0, at["App(1)"].1);
    person.click();
    ind.expect_silence(Duration::from_millis(300), "a tick");
    let (_, ticked) = ind.shown.recv_timeout(ANSWER).expect("the tick told");
    assert!(
        ticks(&ticked).contains(&(ConsentControl::App(1), true)),
        "{ticked:?}"
    );
    person.move_to(at["Allow"].0, at["Allow"].1);
    person.click();
    let a = consent(ind.recv(ANSWER), 1);
    assert!(a.allow, "{a:?}");
    assert_eq!(a.apps, vec!["gedit".to_string(), "calc".to_string()]);
    assert_eq!(
        a.programs,
        vec!["gedit".to_string(), "gnome-calculator".to_string()]
    );
    assert!(!a.clipboard && !a.takeover);

    // Deny.
    let at = ind.show(request(2));
    ind.wait_log("consent dialog focus changed activated=true", ANSWER);
    std::thread::sleep(ARMED);
    person.move_to(at["Deny"].0, at["Deny"].1);
    person.click();
    let a = consent(ind.recv(ANSWER), 2);
    assert!(!a.allow, "{a:?}");

    // Keys on the focused dialog answer nothing; the pointer rests on Allow meanwhile.
    let at = ind.show(request(3));
    ind.wait_log("consent dialog focus changed activated=true", ANSWER);
    let (_, resting) = ind.logged(0);
    std::thread::sleep(ARMED);
    person.move_to(at["Allow"].0, at["Allow"].1);
    for k in [XK_RETURN, XK_SPACE, XK_RETURN] {
        person.key(k);
    }
    ind.expect_silence(Duration::from_millis(1500), "Return and space");
    // The same dialog still answers a click: the silence was the keys'.
    assert!(click_answers(&ind, &mut person, 3, resting).allow);

    // A click right after the dialog appeared under the pointer (resting on Allow): nothing.
    // (Inside the arming delay, and at a point mutter gave during its map animation.)
    ind.drain_log();
    ind.send(BrokerToIndicator::ShowConsent(request(4)));
    ind.wait_log("pointer entered the consent dialog", ANSWER);
    person.click();
    let why = ind.wait_log("did not count", ANSWER);
    assert!(why.contains("press=true"), "{why}");
    ind.expect_silence(
        Duration::from_millis(1000),
        "a click right after the dialog appeared",
    );
    let (_, resting) = ind.logged(0);
    std::thread::sleep(ARMED);
    // Resting, the pointer's point is still the one given during the animation: a click
    // without a move answers nothing either.
    person.click();
    ind.wait_log("told before the dialog settled", ANSWER);
    ind.expect_silence(Duration::from_millis(300), "a click at an untrusted point");
    let (x, y) = at["Allow"];
    person.move_to(x + 1.0, y);
    person.move_to(x, y);

    // Another client maps a window: it takes focus, and a click on Allow then only gives the
    // dialog focus back; one after the arming delay answers.
    let mut other = desk
        .command("/usr/bin/python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/wayland/cover.py"
        ))
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut focused = String::new();
    BufReader::new(other.stdout.take().unwrap())
        .read_line(&mut focused)
        .unwrap();
    assert_eq!(focused.trim(), "focused", "the other window takes focus");
    ind.wait_log("consent dialog focus changed activated=false", ANSWER);
    std::thread::sleep(ARMED);
    person.click();
    let why = ind.wait_log("did not count", ANSWER);
    // Not focused yet at the press (`Covered`), or focused just before it (`Arming`, cause
    // "focused"): mutter sends the focus first.
    assert!(
        why.contains("press=true")
            && (why.contains("Covered") || why.contains("Arming { cause: \"focused\"")),
        "the focusing click: {why}"
    );
    ind.expect_silence(
        Duration::from_millis(500),
        "the click that gives the focus back",
    );
    std::thread::sleep(ARMED);
    // The pointer rests where it was told after the dialog settled: the focus it got back
    // re-arms the dialog but does not make that point untrusted.
    assert!(click_answers(&ind, &mut person, 4, resting).allow);
    let _ = other.kill();
    let _ = other.wait();

    ind.drain_log();
    drop(ind);
    drop(person);
    assert_eq!(desk.x_servers(), Vec::<String>::new(), "no X server ran");
}

/// Stops (`SIGSTOP`) or continues (`SIGCONT`) the indicator, as another process of the
/// person's user may.
fn signal(ind: &Indicator, sig: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(ind.child.id()).unwrap());
    nix::sys::signal::kill(pid, sig).expect("the indicator is signalled");
}

#[test]
fn a_click_made_while_the_indicator_was_stopped_does_not_answer_the_wayland_dialog() {
    use nix::sys::signal::Signal::{SIGCONT, SIGSTOP};
    let desk = WaylandDesktop::start().expect("the Wayland test desktop starts");
    let mut person = Person::start(&desk);
    person.key(XK_SHIFT_L);
    let mut ind = Indicator::spawn(&desk);

    // The attack: the dialog is shown and focused, and the indicator is stopped at once; the
    // person's reflex click on Allow (a move there and a click, within the arming delay) waits
    // in its socket; the indicator is continued past the arming delay, when it reads the
    // click.
    let at = ind.show(request(1));
    // Focused, and on its output (the surface's enter re-arms it too): stopped right after.
    let mut seen = (false, false);
    while seen != (true, true) {
        let l = ind.wait_log("consent dialog ", ANSWER);
        seen.0 |= l.contains("focus changed activated=true");
        seen.1 |= l.contains("entered an output");
    }
    signal(&ind, SIGSTOP);
    let stopped = Instant::now();
    // Past mutter's map animation (250 ms; the points it gives meanwhile are on the animated
    // surface), so that the point given is Allow's.
    std::thread::sleep(Duration::from_millis(300));
    let (x, y) = at["Allow"];
    person.move_to(x, y);
    person.click();
    let clicked = stopped.elapsed();
    assert!(
        clicked < Duration::from_millis(480),
        "the click came within the arming delay ({clicked:?})"
    );
    std::thread::sleep(Duration::from_millis(700).saturating_sub(clicked));
    signal(&ind, SIGCONT);
    ind.wait_log("the consent dialog is re-armed", ANSWER);
    ind.expect_silence(
        Duration::from_millis(1500),
        "a click made while the indicator was stopped",
    );

    // Not stopped any more: the person's click (after a move) answers.
    person.move_to(x + 1.0, y);
    person.move_to(x, y);
    std::thread::sleep(Duration::from_millis(100));
    person.click();
    let a = consent(ind.recv(ANSWER), 1);
    assert!(a.allow, "{a:?}");

    ind.drain_log();
    drop(ind);
    drop(person);
}

/// The attacker: `xdotool` as an X client of the desktop's XWayland; returns its output.
fn xdotool(desk: &WaylandDesktop, args: &[&str]) -> String {
    let out = desk
        .x_command("/usr/bin/xdotool")
        .expect("the desktop runs XWayland")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("xdotool runs");
    assert!(
        out.status.success(),
        "xdotool {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn an_xwayland_clients_xtest_click_and_keys_do_not_answer_the_wayland_dialog() {
    let desk = WaylandDesktop::start_with_xwayland().expect("the desktop with XWayland starts");
    let display = desk.x_display().expect("an X display").to_string();
    let mut person = Person::start(&desk);
    person.key(XK_SHIFT_L);
    let mut ind = Indicator::spawn(&desk);

    let at = ind.show(request(1));
    ind.wait_log("consent dialog focus changed activated=true", ANSWER);
    std::thread::sleep(ARMED);
    let (x, y) = at["Allow"];
    let (xs, ys) = (format!("{}", x.round()), format!("{}", y.round()));

    // The person's pointer is in the corner: the X client moves XWayland's pointer to Allow
    // and clicks there, twice, with a pause past the arming delay between.
    for _ in 0..2 {
        xdotool(&desk, &["mousemove", &xs, &ys, "click", "1"]);
        std::thread::sleep(ARMED);
    }
    // The X server took the motion: its pointer is on Allow.
    let loc = xdotool(&desk, &["getmouselocation"]);
    assert!(
        loc.starts_with(&format!("x:{xs} y:{ys} ")),
        "XWayland's pointer after the XTEST motion: {loc}"
    );
    let (_, resting) = ind.logged(0);
    ind.expect_silence(
        Duration::from_millis(1500),
        "an XTEST motion and click at Allow",
    );
    ind.drain_log_no_button("an XTEST click");

    // The person's pointer rests on Allow (the dialog has the pointer and the focus): XTEST
    // clicks and keys still answer nothing.
    person.move_to(x, y);
    std::thread::sleep(ARMED);
    xdotool(&desk, &["click", "1"]);
    xdotool(&desk, &["key", "Return"]);
    xdotool(&desk, &["key", "space"]);
    xdotool(
        &desk,
        &["mousemove", &xs, &ys, "click", "1", "key", "Return"],
    );
    ind.expect_silence(
        Duration::from_millis(1500),
        "XTEST clicks and keys while the person's pointer rests on Allow",
    );
    ind.drain_log_no_button("an XTEST click");

    // The dialog was live all along: the person's click answers it.
    let a = click_answers(&ind, &mut person, 1, resting);
    assert!(a.allow, "{a:?}");

    ind.drain_log();
    drop(ind);
    drop(person);
    let xs = desk.x_servers();
    assert!(
        xs.iter().any(|s| s.starts_with("Xwayland ")),
        "XWayland ran on {display}: {xs:?}"
    );
}
