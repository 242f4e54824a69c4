//! The consent dialog on a real (nested) X server: only the person's clicks answer it, and
//! only while it is fully visible and has been for the arming delay.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Desktop, Indicator, consent_request, show_consent, wait_for};
use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentAnswer, ConsentControl, ConsentShown, IndicatorToBroker,
};
use x11rb::connection::Connection;
use x11rb::protocol::shape::{ConnectionExt as _, SK, SO};
use x11rb::protocol::xproto::{
    ClipOrdering, ConfigureWindowAux, ConnectionExt as _, Rectangle, StackMode, Window,
};
use x11rb::wrapper::ConnectionExt as _;

const QUIET: Duration = Duration::from_millis(900);

fn show(ind: &mut Indicator, id: u64, timeout_ms: u64) {
    let mut req = consent_request(id, &[("Gedit", true), ("Calculator", false)]);
    req.request.timeout_ms = timeout_ms;
    show_consent(ind, req);
}

struct Controls {
    top: u32,
    gedit: u32,
    calculator: u32,
    takeover: u32,
    clipboard: u32,
    allow: u32,
    deny: u32,
}

fn controls(desk: &Desktop) -> Controls {
    let c = Controls {
        top: desk.find_viewable("^nish-driver consent$"),
        gedit: desk.find_viewable("^nish-driver consent: app:Gedit$"),
        calculator: desk.find_viewable("^nish-driver consent: app:Calculator$"),
        takeover: desk.find_viewable("^nish-driver consent: takeover$"),
        clipboard: desk.find_viewable("^nish-driver consent: clipboard$"),
        allow: desk.find_viewable("^nish-driver consent: allow$"),
        deny: desk.find_viewable("^nish-driver consent: deny$"),
    };
    // Past the arming delay (500 ms after the dialog was mapped).
    std::thread::sleep(Duration::from_millis(700));
    c
}

fn consent(msg: Option<IndicatorToBroker>, want_id: u64) -> ConsentAnswer {
    match msg {
        Some(IndicatorToBroker::Consent { id, answer }) if id == want_id => answer,
        other => panic!("expected Consent {{ id: {want_id} }}, got {other:?}"),
    }
}

fn gone(desk: &Desktop, w: u32) -> bool {
    wait_for(Duration::from_secs(3), || (!desk.exists(w)).then_some(())).is_some()
}

/// An override-redirect window of another client over `area` (x, y, w, h), click-through
/// (empty input shape) when asked: what a clickjacker maps over the dialog.
fn cover(desk: &Desktop, area: (i16, i16, u16, u16), click_through: bool) -> Window {
    let w = desk.test_window(area.0, area.1, area.2, area.3);
    if click_through {
        desk.conn
            .shape_rectangles(SO::SET, SK::INPUT, ClipOrdering::UNSORTED, w, 0, 0, &[])
            .unwrap();
    }
    desk.conn
        .configure_window(w, &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE))
        .unwrap();
    desk.conn.sync().unwrap();
    w
}

/// Another client of the desktop doing `step` every 20 ms on its own connection until dropped
/// (a clickjacker restacking its cover, an app changing its shape).
struct Every20ms {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Every20ms {
    fn start(
        desk: &Desktop,
        mut step: impl FnMut(&x11rb::rust_connection::RustConnection, u16) + Send + 'static,
    ) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let display = desk.display.clone();
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (conn, _) = x11rb::connect(Some(&display)).unwrap();
                let mut n: u16 = 0;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    n = n.wrapping_add(1);
                    step(&conn, n);
                    let _ = conn.flush();
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        Every20ms {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Every20ms {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

#[test]
fn only_the_persons_clicks_answer_and_the_answer_carries_the_ticks() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    eprintln!("lock-down report: {:?}", ind.lockdown);
    assert!(
        ind.lockdown.no_new_privs,
        "lock-down report: {:?}",
        ind.lockdown
    );
    assert!(ind.lockdown.seccomp, "lock-down report: {:?}", ind.lockdown);

    show(&mut ind, 7, 60_000);
    let c = controls(&desk);

    // Every window is marked as the driver's own; the top-level is override-redirect (only the
    // indicator places and stacks it) and on top.
    for w in [
        c.top,
        c.gedit,
        c.calculator,
        c.takeover,
        c.clipboard,
        c.allow,
        c.deny,
    ] {
        assert_eq!(
            desk.cardinal(w, "_NISH_DRIVER_WINDOW"),
            Some(1),
            "window {w} not marked"
        );
    }
    let attrs = desk
        .conn
        .get_window_attributes(c.top)
        .unwrap()
        .reply()
        .unwrap();
    assert!(attrs.override_redirect);
    let order = desk.conn.query_tree(desk.root).unwrap().reply().unwrap();
    assert_eq!(order.children.last(), Some(&c.top), "dialog on top");
    // On screen, centred.
    let (x, y, w, h) = desk.geometry(c.top);
    assert!(x >= 0 && y >= 0 && x as i32 + w as i32 <= 1280 && y as i32 + h as i32 <= 800);
    let (cx, cy) = (x as i32 + w as i32 / 2, y as i32 + h as i32 / 2);
    assert!(
        (cx - 640).abs() < 80 && (cy - 400).abs() < 80,
        "dialog centre at ({cx},{cy})"
    );
    desk.screenshot("consent-dialog.png");
    // Text was drawn: the Allow button has dark pixels inside its border.
    let dark = desk.dark_pixels(c.allow);
    assert!(dark > 40, "no text on Allow ({dark} dark pixels)");

    // SendEvent clicks do nothing, on a checkbox or on Allow.
    desk.send_event_click(c.takeover);
    desk.send_event_click(c.allow);
    ind.expect_silence(QUIET, "SendEvent click on allow");

    // XTEST clicks (any other program of the person's session) do nothing: not on the takeover
    // line (it stays unticked, as the answer below shows), not on Allow.
    desk.xtest_click(c.takeover);
    std::thread::sleep(Duration::from_millis(150));
    desk.xtest_click(c.allow);
    ind.expect_silence(QUIET, "XTEST click on allow");

    // XTEST and SendEvent keys do nothing (the person's keyboard is
    // `the_persons_keyboard_answers_and_injected_keys_do_not`).
    let (ax, ay) = desk.center(c.allow);
    desk.move_pointer(ax, ay);
    desk.xdotool(&["key", "Tab", "Return", "space"]);
    desk.xdotool(&["key", "--window", &c.allow.to_string(), "Tab", "Return"]);
    desk.xdotool(&["key", "--window", &c.top.to_string(), "Tab", "Return"]);
    ind.expect_silence(QUIET, "keys on allow");

    // The person's click on the takeover line, then on Allow.
    desk.real_click(c.takeover);
    std::thread::sleep(Duration::from_millis(150));
    desk.real_click(c.allow);
    let a = consent(ind.recv(Duration::from_secs(5)), 7);
    assert_eq!(
        a,
        ConsentAnswer {
            allow: true,
            apps: vec!["Gedit".into()],
            programs: vec!["gedit".into()],
            takeover: true,
            clipboard: false,
        }
    );
    assert!(gone(&desk, c.top), "dialog closed after the answer");
    ind.expect_silence(Duration::from_millis(300), "after the answer");
}

#[test]
fn real_clicks_toggle_apps_and_deny_denies() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, 8, 60_000);
    let c = controls(&desk);
    // The dialog says what it shows (for the broker's text-only accessible): its lines, their
    // ticks, the focus ring on Deny; then each tick as it changes.
    let ticks = |s: &ConsentShown| -> Vec<(ConsentControl, bool)> {
        s.controls.iter().map(|c| (c.control, c.ticked)).collect()
    };
    let (id, first) = ind
        .shown(Duration::from_secs(5))
        .expect("what the dialog shows");
    assert_eq!(id, 8);
    assert_eq!(
        ticks(&first),
        [
            (ConsentControl::App(0), true),
            (ConsentControl::App(1), false),
            (ConsentControl::Takeover, false),
            (ConsentControl::Clipboard, false),
            (ConsentControl::Deny, false),
            (ConsentControl::Allow, false),
        ]
    );
    assert_eq!(first.focus, Some(4), "Deny has the focus ring");
    assert!(first.keys && first.lang == "en", "{first:?}");
    // Untick Gedit, tick Calculator and the clipboard, then Deny: nothing is granted.
    desk.real_click(c.gedit);
    let (_, unticked) = ind.shown(Duration::from_secs(5)).expect("the tick told");
    assert_eq!(ticks(&unticked)[0], (ConsentControl::App(0), false));
    desk.real_click(c.calculator);
    desk.real_click(c.clipboard);
    ind.expect_silence(Duration::from_millis(300), "checkbox clicks");
    desk.real_click(c.deny);
    let a = consent(ind.recv(Duration::from_secs(5)), 8);
    assert!(!a.allow);
    assert!(a.apps.is_empty() && !a.takeover && !a.clipboard, "{a:?}");
    assert!(gone(&desk, c.top));

    // The same clicks then Allow give exactly those ticks.
    show(&mut ind, 9, 60_000);
    let c = controls(&desk);
    desk.real_click(c.gedit);
    desk.real_click(c.calculator);
    desk.real_click(c.clipboard);
    desk.real_click(c.allow);
    let a = consent(ind.recv(Duration::from_secs(5)), 9);
    assert_eq!(
        a,
        ConsentAnswer {
            allow: true,
            apps: vec!["Calculator".into()],
            programs: vec!["calculator".into()],
            takeover: false,
            clipboard: true,
        }
    );
}

#[test]
fn no_answer_in_time_is_a_denial() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    let t0 = Instant::now();
    show(&mut ind, 11, 1500);
    let top = desk.find_viewable("^nish-driver consent$");
    let a = consent(ind.recv(Duration::from_secs(6)), 11);
    let took = t0.elapsed();
    assert!(!a.allow && a.apps.is_empty() && !a.takeover && !a.clipboard);
    assert!(
        took >= Duration::from_millis(1400),
        "answered after {took:?}"
    );
    assert!(gone(&desk, top), "dialog closed on timeout");
}

#[test]
fn a_click_soon_after_a_driver_press_is_ignored() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, 12, 60_000);
    let c = controls(&desk);
    let t0 = Instant::now();
    ind.send(BrokerToIndicator::DriverPress);
    std::thread::sleep(Duration::from_millis(100));
    desk.real_click(c.takeover);
    desk.real_click(c.allow);
    assert!(
        t0.elapsed() < Duration::from_millis(1400),
        "clicks too slow for this check"
    );
    ind.expect_silence(
        Duration::from_millis(1600),
        "click within 1.5 s of DriverPress",
    );
    // Later clicks count; the takeover click above did not tick the line.
    desk.real_click(c.allow);
    let a = consent(ind.recv(Duration::from_secs(5)), 12);
    assert_eq!(
        a,
        ConsentAnswer {
            allow: true,
            apps: vec!["Gedit".into()],
            programs: vec!["gedit".into()],
            takeover: false,
            clipboard: false,
        }
    );
}

/// The attack: another process of the person stops the indicator (`SIGSTOP`) right after the
/// dialog is shown, the person's click meant for what was there before lands on Allow while it
/// is stopped, and the indicator is continued past the arming delay, when it reads the click.
/// The indicator sees that it did not run and arms the dialog afresh: that click answers
/// nothing; a later one does.
#[test]
fn a_click_made_while_the_indicator_was_stopped_does_not_answer() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, 13, 60_000);
    let allow = desk.find_viewable("^nish-driver consent: allow$");
    common::click_while_stopped(&desk, &ind, allow);
    ind.expect_silence(
        Duration::from_millis(1500),
        "a click made while the indicator was stopped",
    );
    assert!(desk.viewable(allow), "the dialog is still up");

    // Running all along since: the person's click answers.
    desk.real_click(allow);
    let a = consent(ind.recv(Duration::from_secs(5)), 13);
    assert!(a.allow, "{a:?}");
}

/// The attack on the stall check ([`common::late_click_behind_a_flood`]): the person's click
/// made within the arming delay, handled long after it, does not answer.
#[test]
fn a_click_handled_late_behind_a_flood_of_events_does_not_answer() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    let flood = common::Flood::start(&desk);
    show(&mut ind, 14, 60_000);
    let allow = desk.find_viewable("^nish-driver consent: allow$");
    flood.late_click_behind_a_flood(&desk, &ind, allow);
    ind.expect_silence(
        Duration::from_millis(2500),
        "a click made within the arming delay, handled late",
    );
    assert!(desk.viewable(allow), "the dialog is still up");

    // The person's click now answers.
    desk.real_click(allow);
    let a = consent(ind.recv(Duration::from_secs(10)), 14);
    assert!(a.allow, "{a:?}");
}

/// The see-through cover while the indicator is behind: a click-through window over the armed
/// dialog (showing the person something else), then a flood of events and short stops so the
/// indicator neither checks nor raises the dialog; the person's click passes through the
/// cover onto Allow, and then `undo` takes the cover out of the way before the indicator reads
/// the click, so the server's answer about the dialog is "fully visible" by then. What `undo`
/// did came after the click: the click does not count; a later one does. `cover` is the
/// covering window, made by `make` over the dialog's area.
fn cover_undone_after_the_click(
    id: u64,
    make: impl FnOnce(&Desktop, (i16, i16, u16, u16)) -> Window,
    undo: impl FnOnce(&Desktop, Window, &Controls),
) {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    let flood = common::Flood::start(&desk);
    show(&mut ind, id, 60_000);
    let c = controls(&desk);
    // Stopped, so that the cover's map and the flood are queued together: the indicator
    // handles the map (and re-arms) but does not get to check and raise the dialog.
    let (_, _) = common::stop_once_drawn(&desk, &ind, c.allow);
    let area = desk.geometry(c.top);
    let cover = make(&desk, area);
    // Enough for the indicator, crawling, to be still behind when the click comes a second
    // later (it handles thousands of these in one of its 2 ms runs).
    flood.moves(40_000);
    let crawl = common::Crawl::start(&ind);
    // Past the arming delay from when the indicator handled the cover's map.
    std::thread::sleep(Duration::from_millis(1000));
    desk.real_click(c.allow);
    undo(&desk, cover, &c);
    desk.conn.sync().unwrap();
    // Until the indicator has read the click (the flood's moves take it some crawling).
    std::thread::sleep(Duration::from_millis(6000));
    drop(crawl);
    ind.expect_silence(
        Duration::from_millis(2000),
        "a click through a cover undone after it",
    );
    assert!(desk.viewable(c.allow), "the dialog is still up");
    desk.real_click(c.allow);
    let a = consent(ind.recv(Duration::from_secs(10)), id);
    assert!(a.allow, "{a:?}");
}

#[test]
fn a_cover_removed_after_the_click_while_the_indicator_was_behind_does_not_let_it_count() {
    cover_undone_after_the_click(
        15,
        |desk, area| cover(desk, area, true),
        |desk, w, _| {
            desk.conn.unmap_window(w).unwrap();
        },
    );
}

/// The same, but the attacker raises the dialog itself over the cover (it is override-redirect:
/// any client may restack it) instead of touching the cover.
#[test]
fn the_dialog_raised_by_another_client_after_the_click_does_not_let_it_count() {
    cover_undone_after_the_click(
        16,
        |desk, area| cover(desk, area, true),
        |desk, _, c| {
            desk.conn
                .configure_window(
                    c.top,
                    &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE),
                )
                .unwrap();
        },
    );
}

/// The same with a cover made inside another window and reparented into the root, emptied of
/// its shape after the click (a window that came to the root by reparenting is followed too).
#[test]
fn a_reparented_cover_reshaped_after_the_click_does_not_let_it_count() {
    cover_undone_after_the_click(
        17,
        |desk, (x, y, w, h)| {
            use x11rb::protocol::xproto::{CreateWindowAux, WindowClass};
            // Made inside a window of its own (never a child of the root until reparented).
            let holder = desk.unmapped_test_window(0, 0, 20, 20);
            let win = desk.conn.generate_id().unwrap();
            desk.conn
                .create_window(
                    x11rb::COPY_DEPTH_FROM_PARENT,
                    win,
                    holder,
                    0,
                    0,
                    w,
                    h,
                    0,
                    WindowClass::INPUT_OUTPUT,
                    0,
                    &CreateWindowAux::new()
                        .override_redirect(1)
                        .background_pixel(0x00ff_ffff),
                )
                .unwrap();
            desk.conn.map_window(win).unwrap();
            desk.conn.reparent_window(win, desk.root, x, y).unwrap();
            desk.conn
                .shape_rectangles(SO::SET, SK::INPUT, ClipOrdering::UNSORTED, win, 0, 0, &[])
                .unwrap();
            desk.conn
                .configure_window(win, &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE))
                .unwrap();
            desk.conn.sync().unwrap();
            win
        },
        |desk, w, _| {
            desk.conn
                .shape_rectangles(SO::SET, SK::BOUNDING, ClipOrdering::UNSORTED, w, 0, 0, &[])
                .unwrap();
        },
    );
}

#[test]
fn a_second_request_is_denied_and_cancel_closes_without_answer() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, 20, 60_000);
    let top = desk.find_viewable("^nish-driver consent$");
    show(&mut ind, 21, 60_000);
    let a = consent(ind.recv(Duration::from_secs(5)), 21);
    assert!(!a.allow);
    // Still exactly one dialog: the first.
    assert_eq!(desk.search("^nish-driver consent$"), vec![top]);
    ind.send(BrokerToIndicator::CancelConsent { id: 20 });
    assert!(gone(&desk, top), "cancel closes the dialog");
    ind.expect_silence(QUIET, "cancel sends no answer");
}

#[test]
fn untrusted_names_are_escaped_and_cut() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    let long = "W".repeat(300);
    let name = format!("a\tb{long}");
    let mut req = consent_request(30, &[(name.as_str(), true)]);
    req.request.host_claimed = "evil\nhost\u{202e}".into();
    req.request.program.exe = format!("/tmp/{}\n", "x".repeat(200));
    req.request.takeover = false;
    req.request.clipboard = false;
    show_consent(&mut ind, req);
    desk.find_viewable("^nish-driver consent$");
    let apps = desk.search("^nish-driver consent: app:");
    assert_eq!(apps.len(), 1);
    let (_, wname) = desk.xdotool(&["getwindowname", &apps[0].to_string()]);
    let wname = wname.trim_end_matches('\n');
    assert!(
        wname.starts_with("nish-driver consent: app:a\\tbWWW"),
        "{wname}"
    );
    assert!(
        wname.chars().count() < 90,
        "name not cut: {} chars",
        wname.chars().count()
    );
    // No takeover or clipboard line when not offered.
    assert!(desk.search("^nish-driver consent: takeover$").is_empty());
    assert!(desk.search("^nish-driver consent: clipboard$").is_empty());
    // Allow answers with the original (unescaped) name, which the broker matches.
    std::thread::sleep(Duration::from_millis(700));
    desk.real_click(desk.find_viewable("^nish-driver consent: allow$"));
    let a = consent(ind.recv(Duration::from_secs(5)), 30);
    assert_eq!(a.apps, vec![name]);
}

#[test]
fn a_covering_click_through_window_disarms_the_dialog_until_it_is_gone() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, 50, 60_000);
    let c = controls(&desk);
    let area = desk.geometry(c.top);

    // A click-through window over the whole dialog, kept on top by its client (it restacks
    // itself every 20 ms, as a clickjacker would against the dialog's own raises). The person's
    // click on what they see goes through to Allow: it must do nothing.
    let cov = cover(&desk, area, true);
    let fighter = Every20ms::start(&desk, move |conn, _| {
        let _ = conn.configure_window(cov, &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE));
    });
    std::thread::sleep(Duration::from_millis(800));
    desk.real_click(c.allow);
    std::thread::sleep(Duration::from_millis(300));
    desk.real_click(c.allow);
    ind.expect_silence(QUIET, "click on Allow under a click-through cover");
    drop(fighter);

    // The cover goes away just before the person's press: the press is still refused (the
    // dialog re-armed when the cover changed).
    desk.conn.unmap_window(cov).unwrap();
    desk.conn.sync().unwrap();
    desk.real_click(c.allow);
    ind.expect_silence(QUIET, "click right after the cover left");

    // Once the cover is gone and the arming delay passed, the person's click consents.
    std::thread::sleep(Duration::from_millis(600));
    desk.real_click(c.allow);
    let a = consent(ind.recv(Duration::from_secs(5)), 50);
    assert!(a.allow, "{a:?}");
}

#[test]
fn a_cover_that_stays_is_pushed_under_and_the_dialog_rearms() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, 51, 60_000);
    let c = controls(&desk);
    // A cover mapped once (not fighting): the dialog raises itself above it, and the person's
    // click right after the cover appeared does nothing.
    let cov = cover(&desk, desk.geometry(c.top), true);
    desk.real_click(c.allow);
    ind.expect_silence(QUIET, "click right after a cover appeared");
    let above = wait_for(Duration::from_secs(3), || {
        let order = desk.conn.query_tree(desk.root).ok()?.reply().ok()?.children;
        let p = |w| order.iter().position(|&x| x == w);
        (p(c.top)? > p(cov)?).then_some(())
    });
    assert!(
        above.is_some(),
        "the dialog did not raise itself over the cover"
    );
    std::thread::sleep(Duration::from_millis(600));
    desk.real_click(c.allow);
    assert!(consent(ind.recv(Duration::from_secs(5)), 51).allow);
}

/// Rectangles forming a ring of width `t` around `(x, y, w, h)`, relative to a window at
/// `(ox, oy)`.
fn ring(ox: i16, oy: i16, (x, y, w, h): (i16, i16, u16, u16), t: u16) -> Vec<Rectangle> {
    let (x, y) = (x - ox - t as i16, y - oy - t as i16);
    vec![
        Rectangle {
            x,
            y,
            width: w + 2 * t,
            height: t,
        },
        Rectangle {
            x,
            y: y + (h + t) as i16,
            width: w + 2 * t,
            height: t,
        },
        Rectangle {
            x,
            y: y + t as i16,
            width: t,
            height: h,
        },
        Rectangle {
            x: x + (w + t) as i16,
            y: y + t as i16,
            width: t,
            height: h,
        },
    ]
}

#[test]
fn shape_changes_below_the_dialog_do_not_disarm_it_but_above_they_do() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, 53, 60_000);
    let c = controls(&desk);
    let (x, y, w, h) = desk.geometry(c.top);
    // Another client's window under the dialog, larger than it (an app the dialog sits on, or
    // its window manager's frame).
    let app = desk.test_window(x - 40, y - 40, w + 80, h + 80);
    desk.conn
        .configure_window(app, &ConfigureWindowAux::new().stack_mode(StackMode::BELOW))
        .unwrap();
    desk.conn.sync().unwrap();
    // The app changes its input and bounding shapes every 20 ms (GTK 3 windows change their
    // input shape on focus and hover changes, and openbox re-applies its client's shape to its
    // frame each time): nothing the person sees of the dialog changes, so their click counts.
    let churn = Every20ms::start(&desk, move |conn, n| {
        let r = Rectangle {
            x: 0,
            y: 0,
            width: w + 80 - (n % 8),
            height: h + 80,
        };
        for kind in [SK::INPUT, SK::BOUNDING] {
            let _ = conn.shape_rectangles(SO::SET, kind, ClipOrdering::UNSORTED, app, 0, 0, &[r]);
        }
    });
    std::thread::sleep(Duration::from_millis(700));
    desk.real_click(c.allow);
    let a = consent(ind.recv(Duration::from_secs(5)), 53);
    assert!(a.allow, "{a:?}");
    drop(churn);

    // A window above the dialog, shaped as a ring around it (it covers none of the dialog, so
    // the dialog stays armed and does not push it under). When the ring changes, a click right
    // after does nothing (a decoy drawn over the dialog and taken away just before the press
    // looks like this); after the arming delay the click counts.
    show(&mut ind, 54, 60_000);
    let c = controls(&desk);
    let (rx, ry) = (x - 30, y - 30);
    // Shaped before it is mapped: mapped as a full rectangle it would cover the dialog for a
    // moment, and the dialog would put itself back on top of it (then below the dialog, its
    // shape changes rightly count for nothing, and the click below would be answered).
    let above = desk.unmapped_test_window(rx, ry, w + 60, h + 60);
    desk.conn
        .shape_rectangles(
            SO::SET,
            SK::BOUNDING,
            ClipOrdering::UNSORTED,
            above,
            0,
            0,
            &ring(rx, ry, (x, y, w, h), 10),
        )
        .unwrap();
    desk.conn.map_window(above).unwrap();
    desk.conn
        .configure_window(
            above,
            &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE),
        )
        .unwrap();
    desk.conn.sync().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let order = desk
        .conn
        .query_tree(desk.root)
        .unwrap()
        .reply()
        .unwrap()
        .children;
    let at = |w| order.iter().position(|&c| c == w).unwrap();
    assert!(
        at(above) > at(c.top),
        "the ring is above the dialog when its shape changes"
    );
    desk.conn
        .shape_rectangles(
            SO::SET,
            SK::BOUNDING,
            ClipOrdering::UNSORTED,
            above,
            0,
            0,
            &ring(rx, ry, (x, y, w, h), 20),
        )
        .unwrap();
    desk.conn.sync().unwrap();
    desk.real_click(c.allow);
    ind.expect_silence(QUIET, "click right after a shape change above the dialog");
    std::thread::sleep(Duration::from_millis(600));
    desk.real_click(c.allow);
    assert!(consent(ind.recv(Duration::from_secs(5)), 54).allow);
}

#[test]
fn moving_allow_under_the_pointer_rearms_and_is_put_back() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, 52, 60_000);
    let c = controls(&desk);
    let (tx, ty, _, _) = desk.geometry(c.top);
    let (ax, ay) = desk.center(c.allow);
    // The person's pointer rests 150 px left of Allow, over the dialog's text.
    let (px, py) = (ax - 150, ay - 60);
    desk.move_pointer(px, py);
    std::thread::sleep(Duration::from_millis(200));
    // Another client slides the dialog so that Allow comes under the pointer, and the person
    // presses at once.
    desk.conn
        .configure_window(
            c.top,
            &ConfigureWindowAux::new()
                .x(i32::from(tx + (px - ax)))
                .y(i32::from(ty + (py - ay))),
        )
        .unwrap();
    desk.conn.sync().unwrap();
    desk.person(&["click", "1"]);
    ind.expect_silence(QUIET, "click on Allow moved under the pointer");
    // The dialog is back where it was, and after the arming delay the person's click counts.
    let back = wait_for(Duration::from_secs(3), || {
        let (x, y, _, _) = desk.geometry(c.top);
        ((x, y) == (tx, ty)).then_some(())
    });
    assert!(back.is_some(), "the dialog was not put back");
    std::thread::sleep(Duration::from_millis(600));
    desk.real_click(c.allow);
    assert!(consent(ind.recv(Duration::from_secs(5)), 52).allow);
}

#[test]
fn a_takeover_frame_on_screen_does_not_disarm_the_dialog() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    ind.send(BrokerToIndicator::ShowTakeover {
        session: "mcp:test:1".into(),
        paused: false,
        show: 7,
    });
    assert!(matches!(
        ind.recv(Duration::from_secs(5)),
        Some(IndicatorToBroker::TakeoverShown { show: 7, .. })
    ));
    show(&mut ind, 53, 60_000);
    let c = controls(&desk);
    // The frame stays above everything (it is click-through), the dialog above the rest.
    let frame = desk.find_viewable("^nish-driver indicator: frame$");
    let order = desk
        .conn
        .query_tree(desk.root)
        .unwrap()
        .reply()
        .unwrap()
        .children;
    let p = |w| order.iter().position(|&x| x == w).unwrap();
    assert!(p(frame) > p(c.top), "the frame is above the dialog");
    std::thread::sleep(Duration::from_millis(500));
    desk.real_click(c.allow);
    assert!(consent(ind.recv(Duration::from_secs(5)), 53).allow);
}

/// The person's pointer rests on Deny; another program moves it onto Allow (an XTEST move, or
/// a warp), and the person's click lands there: it does not count. After the person moves the
/// pointer themselves, their click answers.
#[test]
fn a_click_where_a_program_moved_the_pointer_does_not_count() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, 55, 60_000);
    let c = controls(&desk);
    let (dx, dy) = desk.center(c.deny);
    let (ax, ay) = desk.center(c.allow);
    std::thread::sleep(Duration::from_millis(700));
    for (how, args) in [
        (
            "an XTEST move",
            vec!["mousemove".to_string(), ax.to_string(), ay.to_string()],
        ),
        (
            "a warp",
            vec![
                "mousemove".to_string(),
                "--window".to_string(),
                desk.root.to_string(),
                ax.to_string(),
                ay.to_string(),
            ],
        ),
    ] {
        desk.move_pointer(dx, dy);
        std::thread::sleep(Duration::from_millis(700));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, _) = desk.xdotool(&args);
        assert!(ok, "{how}");
        let there = wait_for(Duration::from_secs(3), || {
            let p = desk.conn.query_pointer(desk.root).ok()?.reply().ok()?;
            (p.root_x == ax && p.root_y == ay).then_some(())
        });
        assert!(there.is_some(), "{how}: the pointer is on Allow");
        std::thread::sleep(Duration::from_millis(700));
        let (ok, _) = desk.person(&["click", "1"]);
        assert!(ok);
        ind.expect_silence(QUIET, &format!("the person's click after {how}"));
    }
    // The person moves it themselves (off and back onto Deny), and clicks.
    desk.move_pointer(dx + 3, dy);
    desk.real_click_at(dx, dy);
    let a = consent(ind.recv(Duration::from_secs(5)), 55);
    assert!(!a.allow, "{a:?}");
}

/// A paused takeover's label and Continue sit above every window at the top of the screen:
/// a tall consent dialog at scale 2 stays below them, so they hide none of its lines.
#[test]
fn the_takeover_label_and_continue_never_hide_the_dialog() {
    let desk = Desktop::start();
    set_xft_dpi(&desk, 192);
    let mut ind = Indicator::spawn(&desk, &[]);
    ind.send(BrokerToIndicator::ShowTakeover {
        session: "mcp:test:1".into(),
        paused: true,
        show: 8,
    });
    assert!(matches!(
        ind.recv(Duration::from_secs(5)),
        Some(IndicatorToBroker::TakeoverShown { show: 8, .. })
    ));
    let names: Vec<String> = (0..12).map(|i| format!("App {i}")).collect();
    let apps: Vec<(&str, bool)> = names.iter().map(|n| (n.as_str(), false)).collect();
    show_consent(&mut ind, consent_request(54, &apps));
    let top = desk.find_viewable("^nish-driver consent$");
    let label = desk.find_viewable("^nish-driver indicator: label$");
    let cont = desk.find_viewable("^nish-driver indicator: continue$");
    let (dx, dy, dw, dh) = desk.geometry(top);
    for (what, w) in [("label", label), ("Continue", cont)] {
        let (x, y, ww, wh) = desk.geometry(w);
        let apart = x as i32 + ww as i32 <= dx as i32
            || dx as i32 + dw as i32 <= x as i32
            || y as i32 + wh as i32 <= dy as i32
            || dy as i32 + dh as i32 <= y as i32;
        assert!(
            apart,
            "the {what} at {:?} overlaps the dialog at {:?}",
            (x, y, ww, wh),
            (dx, dy, dw, dh)
        );
    }
    assert!(dy as i32 + dh as i32 <= 800, "the dialog fits the screen");
    ind.send(BrokerToIndicator::CancelConsent { id: 54 });
    assert!(gone(&desk, top));
}

/// A request with these apps and neither extra line (small enough for scale 2 on the
/// 1280x800 desktop).
fn small_request(id: u64, apps: &[(&str, bool)]) -> nish_proto::wire::indicator::ConsentDialog {
    let mut req = consent_request(id, apps);
    req.request.takeover = false;
    req.request.clipboard = false;
    req
}

/// Sets the desktop's `Xft.dpi` (its RESOURCE_MANAGER, as GNOME and KDE do on a HiDPI
/// screen) with xrdb.
fn set_xft_dpi(desk: &Desktop, dpi: u32) {
    use std::io::Write as _;
    let mut child = std::process::Command::new("xrdb")
        .args(["-display", &desk.display, "-merge"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("xrdb runs (package x11-xserver-utils)");
    writeln!(child.stdin.take().unwrap(), "Xft.dpi: {dpi}").unwrap();
    assert!(child.wait().unwrap().success(), "xrdb failed");
}

#[test]
fn scale_two_doubles_the_layout_and_clicks_still_answer() {
    let desk = Desktop::start();
    let size = |ind: &mut Indicator, id: u64| {
        show_consent(ind, small_request(id, &[("Gedit", true)]));
        let top = desk.find_viewable("^nish-driver consent$");
        let row = desk.find_viewable("^nish-driver consent: app:Gedit$");
        let allow = desk.find_viewable("^nish-driver consent: allow$");
        // The line's place inside the dialog.
        let (tx, ty, ..) = desk.geometry(top);
        let (x, y, w, h) = desk.geometry(row);
        (top, desk.geometry(top), (x - tx, y - ty, w, h), allow)
    };
    let mut one = Indicator::spawn(&desk, &[]);
    let (top1, (_, _, w1, h1), (rx1, ry1, rw1, rh1), _) = size(&mut one, 80);
    one.send(BrokerToIndicator::CancelConsent { id: 80 });
    assert!(gone(&desk, top1));
    drop(one);

    set_xft_dpi(&desk, 192);
    let mut two = Indicator::spawn(&desk, &[]);
    let (top2, (_, _, w2, h2), (rx2, ry2, rw2, rh2), allow) = size(&mut two, 81);
    eprintln!("scale 1: {w1}x{h1}, scale 2: {w2}x{h2}");
    assert_eq!(h2, 2 * h1, "the height doubles");
    assert!(w2.abs_diff(2 * w1) <= 4, "the width doubles: {w1} -> {w2}");
    assert_eq!(
        (rx2, ry2, rh2),
        (2 * rx1, 2 * ry1, 2 * rh1),
        "the app line doubles"
    );
    assert!(rw2.abs_diff(2 * rw1) <= 4, "{rw1} -> {rw2}");
    // Text on Allow, and the person's click answers as at scale 1.
    std::thread::sleep(Duration::from_millis(700));
    let dark = desk.dark_pixels(allow);
    assert!(dark > 80, "no text on Allow ({dark} dark pixels)");
    desk.screenshot("consent-dialog-scale-2.png");
    desk.real_click(allow);
    let a = consent(two.recv(Duration::from_secs(5)), 81);
    assert!(a.allow && a.apps == ["Gedit"], "{a:?}");
    assert!(gone(&desk, top2));
}

/// Plays a desktop's XSETTINGS manager publishing `Net/ThemeName` = `theme`: owns
/// `_XSETTINGS_S0` with a window carrying `_XSETTINGS_SETTINGS` (what gnome-settings-daemon
/// does).
fn publish_theme_name(desk: &Desktop, theme: &str) -> Window {
    let mut v = vec![0u8, 0, 0, 0];
    v.extend_from_slice(&1u32.to_le_bytes());
    v.extend_from_slice(&1u32.to_le_bytes());
    let name = b"Net/ThemeName";
    v.extend_from_slice(&[1, 0]);
    v.extend_from_slice(&(name.len() as u16).to_le_bytes());
    v.extend_from_slice(name);
    v.resize(v.len().div_ceil(4) * 4, 0);
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&(theme.len() as u32).to_le_bytes());
    v.extend_from_slice(theme.as_bytes());
    v.resize(v.len().div_ceil(4) * 4, 0);
    let w = desk.unmapped_test_window(0, 0, 1, 1);
    let settings = desk.intern("_XSETTINGS_SETTINGS");
    desk.conn
        .change_property8(
            x11rb::protocol::xproto::PropMode::REPLACE,
            w,
            settings,
            settings,
            &v,
        )
        .unwrap();
    let sel = desk.intern("_XSETTINGS_S0");
    desk.conn.set_selection_owner(w, sel, 0u32).unwrap();
    desk.conn.sync().unwrap();
    w
}

#[test]
fn a_dark_desktop_theme_gives_the_dark_dialog() {
    let desk = Desktop::start();
    let bg = |desk: &Desktop| {
        let mut ind = Indicator::spawn(desk, &[]);
        show_consent(&mut ind, small_request(110, &[("Gedit", true)]));
        let top = desk.find_viewable("^nish-driver consent$");
        std::thread::sleep(Duration::from_millis(300));
        let img = desk
            .conn
            .get_image(
                x11rb::protocol::xproto::ImageFormat::Z_PIXMAP,
                top,
                6,
                6,
                1,
                1,
                !0,
            )
            .unwrap()
            .reply()
            .unwrap();
        ind.send(BrokerToIndicator::CancelConsent { id: 110 });
        assert!(gone(desk, top));
        (img.data[2], img.data[1], img.data[0])
    };
    let light = bg(&desk);
    let _manager = publish_theme_name(&desk, "Adwaita-dark");
    let dark = bg(&desk);
    eprintln!("light {light:?}, dark {dark:?}");
    let luma = |(r, g, b): (u8, u8, u8)| u32::from(r) + u32::from(g) + u32::from(b);
    assert!(luma(light) > 3 * 0xe0, "light background {light:?}");
    assert!(luma(dark) < 3 * 0x50, "dark background {dark:?}");
}

/// The pixels of a window's middle part (4 px inside its edges), as the screen shows them.
fn inner_pixels(desk: &Desktop, w: Window) -> Vec<u8> {
    let (_, _, ww, hh) = desk.geometry(w);
    let img = desk
        .conn
        .get_image(
            x11rb::protocol::xproto::ImageFormat::Z_PIXMAP,
            w,
            4,
            4,
            ww - 8,
            hh - 8,
            !0,
        )
        .unwrap()
        .reply()
        .unwrap();
    img.data
}

/// Pixels (of 4 bytes) that differ between two pictures of one size.
fn differing(a: &[u8], b: &[u8]) -> usize {
    assert_eq!(a.len(), b.len(), "same size");
    a.chunks(4)
        .zip(b.chunks(4))
        .filter(|(x, y)| x[..3] != y[..3])
        .count()
}

#[test]
fn apps_named_in_cyrillic_chinese_and_arabic_are_drawn_with_their_glyphs() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    let names = ["Калькулятор", "计算器", "الحاسبة"];
    // The same lines three times: the real names, as many `?`, and as many characters no
    // font has (drawn as empty boxes). The real names must look like neither.
    let mut shots: Vec<Vec<Vec<u8>>> = Vec::new();
    for (id, variant) in [(90u64, 0), (91, 1), (92, 2)] {
        let apps: Vec<String> = names
            .iter()
            .map(|n| match variant {
                0 => n.to_string(),
                1 => "?".repeat(n.chars().count()),
                _ => "\u{10fffd}".repeat(n.chars().count()),
            })
            .collect();
        let pairs: Vec<(&str, bool)> = apps.iter().map(|a| (a.as_str(), false)).collect();
        show_consent(&mut ind, small_request(id, &pairs));
        let top = desk.find_viewable("^nish-driver consent$");
        let rows = desk.search("^nish-driver consent: app:");
        assert_eq!(rows.len(), 3);
        std::thread::sleep(Duration::from_millis(300));
        if variant == 0 {
            desk.screenshot("consent-dialog-scripts.png");
        }
        // In the dialog's order (top to bottom).
        let mut rows: Vec<(i16, Window)> = rows.iter().map(|&w| (desk.geometry(w).1, w)).collect();
        rows.sort();
        shots.push(rows.iter().map(|&(_, w)| inner_pixels(&desk, w)).collect());
        // The windows' UTF-8 names carry the names as sent.
        if variant == 0 {
            let utf8 = desk.intern("UTF8_STRING");
            let net_wm_name = desk.intern("_NET_WM_NAME");
            let got: Vec<String> = rows
                .iter()
                .map(|&(_, w)| {
                    let r = desk
                        .conn
                        .get_property(false, w, net_wm_name, utf8, 0, 1024)
                        .unwrap()
                        .reply()
                        .unwrap();
                    String::from_utf8(r.value).unwrap()
                })
                .collect();
            for n in names {
                let want = format!("nish-driver consent: app:{n}");
                assert!(got.contains(&want), "{want} not in {got:?}");
            }
        }
        ind.send(BrokerToIndicator::CancelConsent { id });
        assert!(gone(&desk, top));
    }
    for (i, n) in names.iter().enumerate() {
        let (real, asks, boxes) = (&shots[0][i], &shots[1][i], &shots[2][i]);
        let vs_q = differing(real, asks);
        let vs_box = differing(real, boxes);
        eprintln!("{n}: {vs_q} pixels differ from '?', {vs_box} from boxes");
        assert!(
            vs_q > 60,
            "{n} looks like question marks ({vs_q} pixels differ)"
        );
        assert!(
            vs_box > 60,
            "{n} looks like empty boxes ({vs_box} pixels differ)"
        );
    }
}

#[test]
fn two_apps_of_one_name_are_told_apart_by_their_program() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    let mut req = small_request(120, &[("Calculator", false), ("Calculator", false)]);
    req.request.apps[0].program = "/usr/bin/gnome-calculator".into();
    // The same basename in the user's own directory: another program.
    req.request.apps[1].program = "/home/u/.local/bin/gnome-calculator".into();
    show_consent(&mut ind, req);
    let top = desk.find_viewable("^nish-driver consent$");
    let mut rows: Vec<(i16, Window)> = desk
        .search("^nish-driver consent: app:Calculator$")
        .into_iter()
        .map(|w| (desk.geometry(w).1, w))
        .collect();
    rows.sort();
    assert_eq!(rows.len(), 2, "one line per program");
    std::thread::sleep(Duration::from_millis(700));
    // The two lines read differently: each shows its program.
    let text = ocr(&desk, top, "consent-same-name");
    eprintln!("{text}");
    assert!(
        text.contains("usr/bin/gnome-calculator")
            && text.contains("home/u/.local/bin/gnome-calculator"),
        "OCR did not find both programs in:\n{text}"
    );
    desk.real_click(rows[1].1);
    std::thread::sleep(Duration::from_millis(100));
    desk.real_click(desk.find_viewable("^nish-driver consent: allow$"));
    let a = consent(ind.recv(Duration::from_secs(5)), 120);
    assert!(a.allow);
    assert_eq!(a.apps, ["Calculator"]);
    assert_eq!(
        a.programs,
        ["/home/u/.local/bin/gnome-calculator"],
        "the ticked line's program only"
    );
}

#[test]
fn the_persons_keyboard_answers_and_injected_keys_do_not() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    // An app of the person's (a window openbox manages) has the focus; the dialog takes it and
    // gives it back.
    let app = desk.conn.generate_id().unwrap();
    desk.conn
        .create_window(
            x11rb::COPY_DEPTH_FROM_PARENT,
            app,
            desk.root,
            20,
            20,
            200,
            100,
            0,
            x11rb::protocol::xproto::WindowClass::INPUT_OUTPUT,
            x11rb::COPY_FROM_PARENT,
            &x11rb::protocol::xproto::CreateWindowAux::new().background_pixel(0x0020_6080),
        )
        .unwrap();
    desk.conn.map_window(app).unwrap();
    desk.conn.sync().unwrap();
    wait_for(Duration::from_secs(3), || desk.viewable(app).then_some(()))
        .expect("the app window is mapped");
    desk.conn
        .set_input_focus(
            x11rb::protocol::xproto::InputFocus::PARENT,
            app,
            x11rb::CURRENT_TIME,
        )
        .unwrap();
    desk.conn.sync().unwrap();
    let focus = || desk.conn.get_input_focus().unwrap().reply().unwrap().focus;
    // Keys from the person's keyboard wait 600 ms each: every key press re-arms the dialog.
    let key = |k: &str| {
        std::thread::sleep(Duration::from_millis(600));
        desk.person(&["key", k]);
    };
    // A click into the dialog, on its own background (no control there).
    let click_in = |top: u32| {
        let (x, y, _, _) = desk.geometry(top);
        desk.real_click_at(x + 3, y + 3);
    };
    show_consent(
        &mut ind,
        small_request(130, &[("Gedit", true), ("Calculator", false)]),
    );
    let top = desk.find_viewable("^nish-driver consent$");
    // The dialog does not take the focus: the person may be typing into the app. Their keys,
    // the routine Tab then Enter, go to the app and do nothing here.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(focus(), app, "the dialog did not take the focus");
    key("Tab");
    key("Return");
    ind.expect_silence(QUIET, "the person's keys before any click");
    // Another client gives the dialog the focus (XSetInputFocus): keys still do nothing.
    desk.xdotool(&["windowfocus", "--sync", &top.to_string()]);
    assert_eq!(focus(), top);
    key("Return");
    ind.expect_silence(
        QUIET,
        "the person's Enter after another client focused the dialog",
    );
    // The person clicks into the dialog: it takes the focus.
    click_in(top);
    assert!(
        wait_for(Duration::from_secs(2), || (focus() == top).then_some(())).is_some(),
        "a click gives the dialog the focus"
    );
    // Within the arming delay after a key, the person's Enter does nothing (Tab counts and
    // moves the ring from Deny to Allow; Enter right after it does not press Allow).
    std::thread::sleep(Duration::from_millis(700));
    desk.person(&["key", "Tab", "Return"]);
    ind.expect_silence(QUIET, "Enter right after a key");
    // Other programs' keys do nothing: XTEST (xdotool on the desktop) and SendEvent. (The next
    // key from the person's keyboard switches the master keyboard back to its own keymap: a
    // MappingNotify, which re-arms; a Shift press, which neither counts nor re-arms, takes it.)
    desk.xdotool(&["key", "Tab", "Return"]);
    desk.xdotool(&["key", "--window", &top.to_string(), "Tab", "Return"]);
    ind.expect_silence(QUIET, "XTEST and SendEvent keys");
    desk.screenshot("consent-dialog-focus.png");
    desk.person(&["key", "Shift_L"]);
    // The person's keyboard: Shift+Tab back to Deny and on to the last app line, Space ticks
    // it, Tab twice to Allow, Enter.
    key("shift+Tab");
    key("shift+Tab");
    key("space");
    key("Tab");
    key("Tab");
    key("Return");
    let a = consent(ind.recv(Duration::from_secs(5)), 130);
    assert!(a.allow, "{a:?}");
    assert_eq!(a.apps, ["Gedit", "Calculator"]);
    assert!(gone(&desk, top));
    assert!(
        wait_for(Duration::from_secs(2), || (focus() == app).then_some(())).is_some(),
        "the focus went back to the app {app}, not {}",
        focus()
    );

    // Enter on the focused Deny denies, after a click into the dialog.
    show_consent(&mut ind, small_request(131, &[("Gedit", true)]));
    let top = desk.find_viewable("^nish-driver consent$");
    std::thread::sleep(Duration::from_millis(700));
    click_in(top);
    // Another client moves the focus away and back: keys are off until the next click.
    desk.xdotool(&["windowfocus", "--sync", &app.to_string()]);
    desk.xdotool(&["windowfocus", "--sync", &top.to_string()]);
    key("Return");
    ind.expect_silence(QUIET, "Enter after another client moved the focus");
    // Another program remaps the keys: the person's Tab now makes Return (one Tab moved the
    // ring to Allow; the next, read as Enter, would press it). Keys are off until a click.
    std::thread::sleep(Duration::from_millis(700));
    click_in(top);
    key("Tab");
    let tab_line = desk
        .run("xmodmap", &["-pke"])
        .lines()
        .find(|l| l.split_whitespace().nth(3) == Some("Tab"))
        .expect("a Tab key in the keymap")
        .to_string();
    desk.run("xmodmap", &["-e", "keysym Tab = Return"]);
    key("Tab");
    ind.expect_silence(QUIET, "the person's Tab remapped to Return");
    desk.run("xmodmap", &["-e", &tab_line]);
    // Another program adds a master keyboard (a device can then reach the dialog through a
    // focus the person's click did not give): keys off until a click.
    std::thread::sleep(Duration::from_millis(700));
    click_in(top);
    desk.run("xinput", &["create-master", "other"]);
    key("Return");
    ind.expect_silence(QUIET, "Enter after a master was added");
    // The ring is on Allow (the Tab above): back to Deny, then Enter.
    std::thread::sleep(Duration::from_millis(700));
    click_in(top);
    key("shift+Tab");
    key("Return");
    let a = consent(ind.recv(Duration::from_secs(5)), 131);
    assert!(!a.allow && a.apps.is_empty(), "{a:?}");
    assert!(gone(&desk, top));
}

#[test]
fn lang_de_gives_the_german_dialog() {
    let desk = Desktop::start();
    let picture = |env: &[(&str, &str)], id: u64| {
        let mut ind = Indicator::spawn(&desk, env);
        show_consent(&mut ind, small_request(id, &[("Gedit", true)]));
        let top = desk.find_viewable("^nish-driver consent$");
        std::thread::sleep(Duration::from_millis(300));
        let text = ocr(&desk, top, &format!("consent-lang-{id}"));
        if id == 101 {
            desk.screenshot("consent-dialog-de.png");
        }
        let deny = desk.find_viewable("^nish-driver consent: deny$");
        let allow = desk.find_viewable("^nish-driver consent: allow$");
        let px = (inner_pixels(&desk, deny), inner_pixels(&desk, allow));
        ind.send(BrokerToIndicator::CancelConsent { id });
        assert!(gone(&desk, top));
        (text, px)
    };
    let (en, en_px) = picture(&[("LANG", "C.UTF-8")], 100);
    let (de, de_px) = picture(&[("LANG", "de_DE.UTF-8")], 101);
    // LC_ALL wins over LANG.
    let (all, _) = picture(&[("LANG", "de_DE.UTF-8"), ("LC_ALL", "en_US.UTF-8")], 102);
    eprintln!("English:\n{en}\nGerman:\n{de}");
    for want in ["Programm", "Erlauben", "Ablehnen", "Minuten"] {
        assert!(de.contains(want), "OCR did not find {want:?} in:\n{de}");
    }
    for want in ["Program:", "Allow", "Deny", "minutes"] {
        assert!(en.contains(want), "OCR did not find {want:?} in:\n{en}");
        assert!(all.contains(want), "LC_ALL: no {want:?} in:\n{all}");
    }
    assert!(!en.contains("Erlauben") && !all.contains("Erlauben"));
    // The buttons' pixels differ (their labels do), whatever their sizes.
    assert!(en_px.0 != de_px.0 && en_px.1 != de_px.1);
}

/// The text tesseract reads in a window (its pixels on screen, scaled up twice).
fn ocr(desk: &Desktop, w: Window, name: &str) -> String {
    // One folder per image: tests run in parallel in this process.
    let dir = std::env::temp_dir().join(format!("nish-ocr-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let png = dir.join(format!("{name}.png"));
    desk.save_window_png(w, &png, 2);
    let out = std::process::Command::new("tesseract")
        .arg(&png)
        .arg("stdout")
        .output()
        .expect("tesseract runs (package tesseract-ocr)");
    assert!(out.status.success(), "tesseract failed: {out:?}");
    if let Some(keep) = std::env::var_os("NISH_SCREENSHOT_DIR") {
        std::fs::create_dir_all(&keep).unwrap();
        std::fs::copy(&png, Path::new(&keep).join(format!("{name}.png"))).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_dialog_tells_the_person_the_program_the_lease_and_the_apps() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);

    let mut a = consent_request(60, &[("Gedit", true), ("Calculator", false)]);
    a.request.host_claimed = "Helpful Assistant".into();
    a.request.program.exe = "/usr/bin/alphahost".into();
    a.request.program.pid = 4242;
    a.request.apps[1].windows = 3;
    a.request.lease_minutes = 15;
    a.request.missing_requested = 2;
    show_consent(&mut ind, a);
    let top = desk.find_viewable("^nish-driver consent$");
    std::thread::sleep(Duration::from_millis(300));
    let text_a = ocr(&desk, top, "consent-ocr-a");
    eprintln!("OCR of the first dialog:\n{text_a}");
    for want in [
        "/usr/bin/alphahost",
        "4242",
        "Helpful Assistant",
        "claim",
        "15 minutes",
        "Gedit",
        "Calculator",
        "3 windows",
        "press, tick and fill in",
        "2 apps it asked for are not open",
        "VISIBLE TAKEOVER",
    ] {
        assert!(
            text_a.contains(want),
            "OCR did not find {want:?} in:\n{text_a}"
        );
    }
    ind.send(BrokerToIndicator::CancelConsent { id: 60 });
    assert!(gone(&desk, top));

    let mut b = consent_request(61, &[("Gedit", true)]);
    b.request.host_claimed = "Helpful Assistant".into();
    b.request.program.exe = "/opt/betatool/bin/betahost".into();
    b.request.program.pid = 777;
    b.request.lease_minutes = 45;
    b.request.takeover = false;
    b.request.clipboard = false;
    show_consent(&mut ind, b);
    let top = desk.find_viewable("^nish-driver consent$");
    std::thread::sleep(Duration::from_millis(300));
    let text_b = ocr(&desk, top, "consent-ocr-b");
    eprintln!("OCR of the second dialog:\n{text_b}");
    for want in ["/opt/betatool/bin/betahost", "777", "45 minutes", "Gedit"] {
        assert!(
            text_b.contains(want),
            "OCR did not find {want:?} in:\n{text_b}"
        );
    }
    for gone_text in ["alphahost", "15 minutes", "VISIBLE TAKEOVER", "clipboard"] {
        assert!(
            !text_b.contains(gone_text),
            "{gone_text:?} still shown:\n{text_b}"
        );
    }
    assert_ne!(text_a, text_b);
}

#[test]
fn with_the_assistive_opt_in_xtest_clicks_answer() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    // Off by default: an XTEST click does nothing.
    show(&mut ind, 70, 60_000);
    let c = controls(&desk);
    desk.xtest_click(c.allow);
    ind.expect_silence(QUIET, "XTEST click without the opt-in");
    ind.send(BrokerToIndicator::CancelConsent { id: 70 });
    assert!(gone(&desk, c.top));
    // The administrator's opt-in (passed by the broker): assistive tools click through XTEST.
    ind.send(BrokerToIndicator::Config {
        accept_xtest_clicks: true,
    });
    show(&mut ind, 71, 60_000);
    let c = controls(&desk);
    let text = ocr(&desk, c.top, "consent-assistive");
    assert!(
        text.contains("assistive tools may click for you"),
        "the dialog says so:\n{text}"
    );
    desk.xtest_click(c.allow);
    assert!(consent(ind.recv(Duration::from_secs(5)), 71).allow);
}
