//! The takeover frame on a real X server: click-through, always on top, the paused state's
//! Continue button (the person's clicks only), loss detection and removal.

mod common;

use std::time::{Duration, Instant};

use common::{Desktop, Indicator, wait_for};
use nish_proto::wire::indicator::{BrokerToIndicator, IndicatorToBroker};
use x11rb::connection::Connection;
use x11rb::protocol::shape::{ConnectionExt as _, SK};
use x11rb::protocol::xproto::ConnectionExt as _;

const SESSION: &str = "mcp:test:4242";

fn show(ind: &mut Indicator, paused: bool) {
    ind.send(BrokerToIndicator::ShowTakeover {
        session: SESSION.into(),
        paused,
        show: 41,
    });
    match ind.recv(Duration::from_secs(5)) {
        Some(IndicatorToBroker::TakeoverShown { session, show: 41 }) if session == SESSION => {}
        other => panic!("expected TakeoverShown, got {other:?}"),
    }
}

fn lost(ind: &Indicator) -> String {
    match ind.recv(Duration::from_secs(5)) {
        Some(IndicatorToBroker::TakeoverLost { session, reason }) if session == SESSION => reason,
        other => panic!("expected TakeoverLost, got {other:?}"),
    }
}

/// Stacking order of the root's children, bottom to top.
fn stacking(desk: &Desktop) -> Vec<u32> {
    desk.conn
        .query_tree(desk.root)
        .unwrap()
        .reply()
        .unwrap()
        .children
}

#[test]
fn frame_is_click_through_and_continue_takes_only_real_clicks() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    // A plain window under the top edge of the frame and under the label.
    let under = desk.test_window(0, 0, 1280, 140);
    show(&mut ind, false);

    let frame = desk.find_viewable("^nish-driver indicator: frame$");
    let label = desk.find_viewable("^nish-driver indicator: label$");
    assert!(
        desk.search("^nish-driver indicator: continue$").is_empty(),
        "no Continue while active"
    );
    for w in [frame, label] {
        assert_eq!(desk.cardinal(w, "_NISH_DRIVER_WINDOW"), Some(1));
        let attrs = desk.conn.get_window_attributes(w).unwrap().reply().unwrap();
        assert!(attrs.override_redirect);
        // Empty input region: click-through.
        let input = desk
            .conn
            .shape_get_rectangles(w, SK::INPUT)
            .unwrap()
            .reply()
            .unwrap();
        assert!(
            input.rectangles.is_empty(),
            "input shape of {w} not empty: {input:?}"
        );
    }
    // The frame covers the whole screen with a ring.
    assert_eq!(desk.geometry(frame), (0, 0, 1280, 800));
    let bounding = desk
        .conn
        .shape_get_rectangles(frame, SK::BOUNDING)
        .unwrap()
        .reply()
        .unwrap();
    let area: u32 = bounding
        .rectangles
        .iter()
        .map(|r| u32::from(r.width) * u32::from(r.height))
        .sum();
    assert!(area > 0 && area < 1280 * 800 / 20, "ring area {area}");
    // Both above the test window.
    let order = stacking(&desk);
    let pos = |w| order.iter().position(|&x| x == w).unwrap();
    assert!(
        pos(frame) > pos(under) && pos(label) > pos(under),
        "indicator not on top"
    );

    std::thread::sleep(Duration::from_millis(300));
    desk.screenshot("takeover-active.png");

    // Clicks on the frame's edge and on the label reach the window underneath.
    desk.drain_events();
    desk.real_click_at(300, 2);
    assert!(
        desk.button_press_on(under, Duration::from_secs(2)),
        "click on the frame did not go through"
    );
    let (lx, ly) = desk.center(label);
    desk.drain_events();
    desk.real_click_at(lx, ly);
    assert!(
        desk.button_press_on(under, Duration::from_secs(2)),
        "click on the label did not go through"
    );

    // A window raised later is pushed under the indicator again.
    desk.conn
        .configure_window(
            under,
            &x11rb::protocol::xproto::ConfigureWindowAux::new()
                .stack_mode(x11rb::protocol::xproto::StackMode::ABOVE),
        )
        .unwrap();
    desk.conn.flush().unwrap();
    let back_on_top = wait_for(Duration::from_secs(3), || {
        let order = stacking(&desk);
        let pos = |w| order.iter().position(|&x| x == w).unwrap();
        (pos(frame) > pos(under) && pos(label) > pos(under)).then_some(())
    });
    assert!(back_on_top.is_some(), "indicator not raised again");

    // Paused: the Continue button appears under the label.
    ind.send(BrokerToIndicator::SetPaused {
        session: SESSION.into(),
        paused: true,
    });
    let cont = desk.find_viewable("^nish-driver indicator: continue$");
    assert_eq!(desk.cardinal(cont, "_NISH_DRIVER_WINDOW"), Some(1));
    let input = desk
        .conn
        .shape_get_rectangles(cont, SK::INPUT)
        .unwrap()
        .reply()
        .unwrap();
    assert!(!input.rectangles.is_empty(), "Continue must take input");
    let (_, ly2, _, lh2) = desk.geometry(label);
    let (_, cy, _, _) = desk.geometry(cont);
    assert!(cy >= ly2 + lh2 as i16, "Continue is under the label");
    std::thread::sleep(Duration::from_millis(700));
    desk.screenshot("takeover-paused.png");

    // A SendEvent click and an XTEST click (another program's) do nothing; the person's click
    // gives Continue, and does not reach the window underneath.
    desk.send_event_click(cont);
    ind.expect_silence(Duration::from_millis(900), "SendEvent click on Continue");
    desk.xtest_click(cont);
    ind.expect_silence(Duration::from_millis(900), "XTEST click on Continue");
    std::thread::sleep(Duration::from_millis(600));
    desk.drain_events();
    desk.real_click(cont);
    match ind.recv(Duration::from_secs(5)) {
        Some(IndicatorToBroker::Continue { session }) if session == SESSION => {}
        other => panic!("expected Continue, got {other:?}"),
    }
    assert!(
        !desk.button_press_on(under, Duration::from_millis(300)),
        "Continue click leaked below"
    );

    // A DriverPress silences Continue for 1.5 s.
    let t0 = Instant::now();
    ind.send(BrokerToIndicator::DriverPress);
    std::thread::sleep(Duration::from_millis(100));
    desk.real_click(cont);
    assert!(
        t0.elapsed() < Duration::from_millis(1400),
        "click too slow for this check"
    );
    ind.expect_silence(
        Duration::from_millis(1500),
        "Continue click right after DriverPress",
    );

    // Resumed: the button goes away, the frame stays.
    ind.send(BrokerToIndicator::SetPaused {
        session: SESSION.into(),
        paused: false,
    });
    assert!(
        wait_for(Duration::from_secs(3), || (!desk.exists(cont))
            .then_some(()))
        .is_some()
    );
    assert!(desk.viewable(frame) && desk.viewable(label));
    ind.expect_silence(
        Duration::from_millis(300),
        "own button removal is not a loss",
    );

    // Hide removes everything quickly.
    let t0 = Instant::now();
    ind.send(BrokerToIndicator::HideTakeover {
        session: SESSION.into(),
    });
    let removed = wait_for(Duration::from_secs(3), || {
        (!desk.exists(frame) && !desk.exists(label)).then(|| t0.elapsed())
    })
    .expect("HideTakeover removes the windows");
    eprintln!("HideTakeover -> windows destroyed in {removed:?}");
    assert!(
        removed < Duration::from_millis(500),
        "removal took {removed:?}"
    );
    ind.expect_silence(Duration::from_millis(300), "hide is not a loss");
}

#[test]
fn starting_paused_shows_continue_at_once() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, true);
    let cont = desk.find_viewable("^nish-driver indicator: continue$");
    std::thread::sleep(Duration::from_millis(700));
    desk.real_click(cont);
    match ind.recv(Duration::from_secs(5)) {
        Some(IndicatorToBroker::Continue { session }) if session == SESSION => {}
        other => panic!("expected Continue, got {other:?}"),
    }
}

/// A show the broker gave up on and hid, then showed again: the frame that ends up on screen
/// is answered with the new show's number (an answer to the old one may come first, if it was
/// drawn before the hide; the broker waits for the new number only); a further show of the
/// frame already up is answered with its own.
#[test]
fn a_show_hidden_and_shown_again_is_answered_with_the_new_number() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    let show = |show| BrokerToIndicator::ShowTakeover {
        session: SESSION.into(),
        paused: false,
        show,
    };
    ind.send(show(1));
    ind.send(BrokerToIndicator::HideTakeover {
        session: SESSION.into(),
    });
    ind.send(show(2));
    let mut answers = Vec::new();
    while let Some(m) = ind.recv(Duration::from_secs(3)) {
        if let IndicatorToBroker::TakeoverShown { session, show } = m {
            assert_eq!(session, SESSION);
            answers.push(show);
        }
    }
    assert_eq!(answers.last(), Some(&2), "answers: {answers:?}");
    assert!(answers.iter().all(|s| *s == 1 || *s == 2), "{answers:?}");
    desk.find_viewable("^nish-driver indicator: frame$");
    // A show of a frame already up is answered at once, with its own number: the broker
    // waits for every show.
    ind.send(show(3));
    match ind.recv(Duration::from_secs(5)) {
        Some(IndicatorToBroker::TakeoverShown { show: 3, .. }) => {}
        other => panic!("expected TakeoverShown 3, got {other:?}"),
    }
}

/// The attack on Continue that `consent::a_click_made_while_the_indicator_was_stopped_does_not_answer`
/// makes on the dialog: the indicator stopped right after Continue appears, the person's click
/// on it while stopped, and the indicator continued past the arming delay.
#[test]
fn a_click_on_continue_made_while_the_indicator_was_stopped_does_not_count() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, true);
    let cont = desk.find_viewable("^nish-driver indicator: continue$");
    common::click_while_stopped(&desk, &ind, cont);
    ind.expect_silence(
        Duration::from_millis(1500),
        "a click on Continue made while the indicator was stopped",
    );

    desk.real_click(cont);
    match ind.recv(Duration::from_secs(5)) {
        Some(IndicatorToBroker::Continue { session }) if session == SESSION => {}
        other => panic!("expected Continue, got {other:?}"),
    }
}

/// The attack on the stall check ([`common::Flood::late_click_behind_a_flood`]) on Continue.
#[test]
fn a_click_on_continue_handled_late_behind_a_flood_of_events_does_not_count() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    let flood = common::Flood::start(&desk);
    show(&mut ind, true);
    let cont = desk.find_viewable("^nish-driver indicator: continue$");
    flood.late_click_behind_a_flood(&desk, &ind, cont);
    ind.expect_silence(
        Duration::from_millis(2500),
        "a click on Continue made within the arming delay, handled late",
    );
    desk.real_click(cont);
    match ind.recv(Duration::from_secs(10)) {
        Some(IndicatorToBroker::Continue { session }) if session == SESSION => {}
        other => panic!("expected Continue, got {other:?}"),
    }
}

#[test]
fn another_client_unmapping_the_frame_ends_the_takeover() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, false);
    let frame = desk.find_viewable("^nish-driver indicator: frame$");
    let label = desk.find_viewable("^nish-driver indicator: label$");
    let (ok, _) = desk.xdotool(&["windowunmap", &frame.to_string()]);
    assert!(ok);
    assert_eq!(lost(&ind), "indicator_unmapped");
    assert!(
        wait_for(Duration::from_secs(3), || (!desk.exists(label))
            .then_some(()))
        .is_some(),
        "rest removed"
    );
    // A new takeover can be shown again.
    show(&mut ind, false);
}

#[test]
fn another_client_destroying_the_label_ends_the_takeover() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, true);
    let frame = desk.find_viewable("^nish-driver indicator: frame$");
    let label = desk.find_viewable("^nish-driver indicator: label$");
    desk.conn.destroy_window(label).unwrap();
    desk.conn.flush().unwrap();
    assert_eq!(lost(&ind), "indicator_destroyed");
    assert!(
        wait_for(Duration::from_secs(3), || (!desk.exists(frame))
            .then_some(()))
        .is_some(),
        "rest removed"
    );
}

#[test]
fn unmapping_the_continue_button_ends_the_takeover() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, true);
    let cont = desk.find_viewable("^nish-driver indicator: continue$");
    desk.xdotool(&["windowunmap", &cont.to_string()]);
    assert_eq!(lost(&ind), "indicator_unmapped");
}

#[test]
fn moving_the_frame_away_puts_it_back() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, false);
    let label = desk.find_viewable("^nish-driver indicator: label$");
    let before = desk.geometry(label);
    desk.xdotool(&["windowmove", &label.to_string(), "2000", "2000"]);
    let back = wait_for(Duration::from_secs(3), || {
        (desk.geometry(label) == before).then_some(())
    });
    assert!(
        back.is_some(),
        "label not put back: {:?}",
        desk.geometry(label)
    );
    ind.expect_silence(Duration::from_millis(300), "a move is repaired, not a loss");
}

#[test]
fn killing_the_indicator_connection_reports_display_lost() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    show(&mut ind, false);
    let frame = desk.find_viewable("^nish-driver indicator: frame$");
    // XKillClient on the frame closes the indicator's X connection.
    desk.xdotool(&["windowkill", &frame.to_string()]);
    assert_eq!(lost(&ind), "display_lost");
    let st = ind
        .wait_exit(Duration::from_secs(5))
        .expect("exits after losing the display");
    assert_eq!(st.code(), Some(1));
}

#[test]
fn the_frame_rings_every_monitor() {
    // Xephyr has one monitor; the outer Xvfb lets RandR 1.5 define more.
    let desk = Desktop::start();
    let outer = desk.person_display.clone();
    for (name, geom) in [
        ("LEFT", "640/169x800/254+0+0"),
        ("RIGHT", "640/169x800/254+640+0"),
    ] {
        let ok = std::process::Command::new("xrandr")
            .args(["--setmonitor", name, geom, "none"])
            .env("DISPLAY", &outer)
            .status()
            .expect("xrandr runs");
        assert!(ok.success(), "xrandr --setmonitor {name}");
    }
    let mut ind = Indicator::spawn_on(&outer, &[]);
    show(&mut ind, false);
    let (conn, _) = x11rb::connect(Some(&outer)).unwrap();
    let frame = wait_for(Duration::from_secs(5), || {
        let out = std::process::Command::new("xdotool")
            .args(["search", "--name", "^nish-driver indicator: frame$"])
            .env("DISPLAY", &outer)
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()?
            .trim()
            .parse::<u32>()
            .ok()
    })
    .expect("the frame is mapped on the outer display");
    let rects = conn
        .shape_get_rectangles(frame, SK::BOUNDING)
        .unwrap()
        .reply()
        .unwrap()
        .rectangles;
    // The server returns the shape as a banded region: test points.
    let on_ring = |x: i16, y: i16| {
        rects
            .iter()
            .any(|r| x >= r.x && y >= r.y && x < r.x + r.width as i16 && y < r.y + r.height as i16)
    };
    // Each monitor's own edges are ringed, the seam between them too.
    for (x, y) in [
        (2, 400),
        (636, 400),
        (642, 400),
        (1277, 400),
        (320, 2),
        (960, 797),
    ] {
        assert!(on_ring(x, y), "({x},{y}) should be on a ring");
    }
    for (x, y) in [(320, 400), (960, 400), (620, 400), (660, 400)] {
        assert!(
            !on_ring(x, y),
            "({x},{y}) should be inside a monitor's ring"
        );
    }
}
