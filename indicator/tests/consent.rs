//! The consent dialog on a real X server: only real left clicks answer it.

mod common;

use std::time::{Duration, Instant};

use common::{Desktop, Indicator, wait_for};
use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentAnswer, ConsentApp, IndicatorToBroker,
};

const QUIET: Duration = Duration::from_millis(900);

fn show(ind: &mut Indicator, id: u64, timeout_ms: u64) {
    ind.send(BrokerToIndicator::ShowConsent {
        id,
        host: "Test Host".into(),
        apps: vec![
            ConsentApp {
                name: "Gedit".into(),
                ticked: true,
            },
            ConsentApp {
                name: "Calculator".into(),
                ticked: false,
            },
        ],
        takeover: true,
        clipboard: true,
        timeout_ms,
    });
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
    // Past the anti click-through delay (400 ms after the dialog was mapped).
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

#[test]
fn only_real_clicks_answer_and_the_answer_carries_the_ticks() {
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

    // Every window is marked as the driver's own; the top-level is an always-on-top dialog.
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
    assert!(
        desk.atoms(c.top, "_NET_WM_WINDOW_TYPE")
            .contains(&desk.intern("_NET_WM_WINDOW_TYPE_DIALOG"))
    );
    assert!(
        desk.atoms(c.top, "_NET_WM_STATE")
            .contains(&desk.intern("_NET_WM_STATE_ABOVE"))
    );
    // Managed and on screen, roughly centred.
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

    // Keys do nothing: real (XTEST) keys with the pointer on Allow, and SendEvent keys.
    let (ax, ay) = desk.center(c.allow);
    desk.move_pointer(ax, ay);
    desk.xdotool(&["key", "Return", "space", "KP_Enter", "alt+a"]);
    desk.xdotool(&["key", "--window", &c.allow.to_string(), "Return"]);
    ind.expect_silence(QUIET, "keys on allow");

    // A real click on the takeover line, then on Allow.
    desk.real_click(c.takeover);
    std::thread::sleep(Duration::from_millis(150));
    desk.real_click(c.allow);
    let a = consent(ind.recv(Duration::from_secs(5)), 7);
    assert_eq!(
        a,
        ConsentAnswer {
            allow: true,
            apps: vec!["Gedit".into()],
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
    // Untick Gedit, tick Calculator and the clipboard, then Deny: nothing is granted.
    desk.real_click(c.gedit);
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
            takeover: false,
            clipboard: false,
        }
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
    ind.send(BrokerToIndicator::ShowConsent {
        id: 30,
        host: "evil\nhost\u{202e}".into(),
        apps: vec![ConsentApp {
            name: format!("a\tb{long}"),
            ticked: true,
        }],
        takeover: false,
        clipboard: false,
        timeout_ms: 60_000,
    });
    desk.find_viewable("^nish-driver consent$");
    let apps = desk.search("^nish-driver consent: app:");
    assert_eq!(apps.len(), 1);
    let (_, name) = desk.xdotool(&["getwindowname", &apps[0].to_string()]);
    let name = name.trim_end_matches('\n');
    assert!(
        name.starts_with("nish-driver consent: app:a\\tbWWW"),
        "{name}"
    );
    assert!(
        name.chars().count() < 90,
        "name not cut: {} chars",
        name.chars().count()
    );
    // No takeover or clipboard line when not asked for.
    assert!(desk.search("^nish-driver consent: takeover$").is_empty());
    assert!(desk.search("^nish-driver consent: clipboard$").is_empty());
    // Allow answers with the original (unescaped) name, which the broker matches.
    std::thread::sleep(Duration::from_millis(700));
    desk.real_click(desk.find_viewable("^nish-driver consent: allow$"));
    let a = consent(ind.recv(Duration::from_secs(5)), 30);
    assert_eq!(a.apps, vec![format!("a\tb{long}")]);
}

#[test]
fn with_only_the_fixed_font_text_is_drawn_twice_as_large() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[("NISH_INDICATOR_FONT", "fixed")]);
    show(&mut ind, 40, 60_000);
    let c = controls(&desk);
    desk.screenshot("consent-dialog-fixed-font.png");
    // `fixed` is 13 px high; drawn at twice its size the app lines are over 26 px high.
    let (_, _, _, row_h) = desk.geometry(c.gedit);
    assert!(row_h >= 26 + 10, "row height {row_h}");
    let dark = desk.dark_pixels(c.allow);
    assert!(dark > 80, "no scaled text on Allow ({dark} dark pixels)");
    desk.real_click(c.allow);
    let a = consent(ind.recv(Duration::from_secs(5)), 40);
    assert!(a.allow);
}
