//! The stop hotkey and the broker link's end, on a real X server.

mod common;

use std::time::Duration;

use common::{Desktop, Indicator, wait_for};
use nish_proto::wire::indicator::{BrokerToIndicator, IndicatorToBroker};

fn expect_stop(ind: &Indicator, what: &str) {
    match ind.recv(Duration::from_secs(5)) {
        Some(IndicatorToBroker::Stop) => {}
        other => panic!("{what}: expected Stop, got {other:?}"),
    }
}

#[test]
fn default_hotkey_stops_and_synthetic_keys_do_not() {
    let desk = Desktop::start();
    let ind = Indicator::spawn(&desk, &[]);
    assert!(
        ind.hotkey_grabbed,
        "the indicator says it grabbed the hotkey"
    );
    // The grab is in place once the indicator answers; give it a moment after start.
    std::thread::sleep(Duration::from_millis(300));
    // SendEvent keys to the root window never trigger a passive grab.
    desk.xdotool(&[
        "key",
        "--window",
        &desk.root.to_string(),
        "ctrl+alt+shift+Escape",
    ]);
    ind.expect_silence(Duration::from_millis(700), "SendEvent hotkey");
    // The combination without Shift is not the hotkey.
    desk.xdotool(&["key", "ctrl+alt+Escape"]);
    ind.expect_silence(Duration::from_millis(700), "ctrl+alt+Escape");
    desk.xdotool(&["key", "ctrl+alt+shift+Escape"]);
    expect_stop(&ind, "ctrl+alt+shift+Escape");
    // The person's own keyboard.
    std::thread::sleep(Duration::from_millis(1100));
    desk.person(&["key", "ctrl+alt+shift+Escape"]);
    expect_stop(&ind, "the person's ctrl+alt+shift+Escape");
    // With Caps Lock on it still works (every Lock/NumLock variant is grabbed).
    std::thread::sleep(Duration::from_millis(1100));
    desk.xdotool(&["key", "Caps_Lock"]);
    desk.xdotool(&["key", "ctrl+alt+shift+Escape"]);
    expect_stop(&ind, "with Caps Lock");
    desk.xdotool(&["key", "Caps_Lock"]);
}

#[test]
fn hotkey_is_overridable() {
    let desk = Desktop::start();
    let ind = Indicator::spawn(&desk, &[("NISH_STOP_HOTKEY", "super+shift+Pause")]);
    std::thread::sleep(Duration::from_millis(300));
    desk.xdotool(&["key", "ctrl+alt+shift+Escape"]);
    ind.expect_silence(Duration::from_millis(700), "default after override");
    desk.xdotool(&["key", "super+shift+Pause"]);
    expect_stop(&ind, "super+shift+Pause");
}

#[test]
fn closing_the_link_removes_every_window_and_exits_zero() {
    let desk = Desktop::start();
    let mut ind = Indicator::spawn(&desk, &[]);
    ind.send(BrokerToIndicator::ShowTakeover {
        session: "s".into(),
        paused: true,
        show: 3,
    });
    assert!(matches!(
        ind.recv(Duration::from_secs(5)),
        Some(IndicatorToBroker::TakeoverShown { show: 3, .. })
    ));
    common::show_consent(&mut ind, common::consent_request(1, &[("App", true)]));
    let top = desk.find_viewable("^nish-driver consent$");
    let frame = desk.find_viewable("^nish-driver indicator: frame$");
    let cont = desk.find_viewable("^nish-driver indicator: continue$");
    ind.close_link();
    let st = ind
        .wait_exit(Duration::from_secs(5))
        .expect("exits when the broker goes away");
    assert_eq!(st.code(), Some(0));
    let all_gone = wait_for(Duration::from_secs(3), || {
        [top, frame, cont]
            .iter()
            .all(|&w| !desk.exists(w))
            .then_some(())
    });
    assert!(all_gone.is_some(), "windows left behind");
}
