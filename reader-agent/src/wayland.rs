//! Windows on a Wayland session, from AT-SPI alone.
//!
//! Wayland gives a client no list of other clients' windows, no position of any window and no
//! way to read another window's pixels; the reader makes no X connection there (XWayland apps
//! are read through AT-SPI like the rest). A window is a top-level accessible of a registered
//! application: its frames, windows and dialogs (the roles of
//! [`nish_atspi::framematch::TOP_LEVEL_ROLES`]).
//!
//! - **pid**: the unix process id of the application's connection to the accessibility bus,
//!   from the bus daemon (`GetConnectionUnixProcessID`), never from the application.
//! - **window id**: `serial << 32 | fnv1a32(object path)`, where `serial` is the `N` of the
//!   application's unique bus name `:1.N`. The bus daemon never hands a unique name out twice
//!   while it runs, and a toolkit gives each accessible object its own path for the object's
//!   life (GTK and Chromium number them from a counter), so the id is the same on every list
//!   for the window's whole life, is the same after the reader restarts, and names no other
//!   window while the accessibility bus runs. Ids stay below 2^53 (JSON numbers are exact):
//!   an application whose serial is 2^21 or more is left out. Two windows of one application
//!   whose paths hash alike are both left out rather than confused.
//! - **title**: the accessible name of the top-level object.
//! - **frame**: in the window's own coordinates, origin 0,0 (`origin: "window"` on the wire):
//!   the toolkit's extents of the top-level object, whose position a Wayland client does not
//!   know.
//! - **active**: the top-level object's `active` state; **visible**: its `showing` state.
//! - **popups**: an application's top-level objects whose extents do not start at 0,0 are
//!   popups placed relative to one of its windows, and are not windows, when the application
//!   has an object at 0,0; when it has none (an XWayland app reports X coordinates), all are
//!   windows, and their elements' frames are moved so the window's corner is 0,0.
//! - **stacking**: unknown on Wayland; the windows are listed in registry order with the active
//!   one last (on top).
//! - **system prompts**: the windows of the applications whose accessibility name is one of
//!   [`nish_proto::prompts::APPS`] (the desktop portal's dialogs, where the person grants remote
//!   control or screen sharing, polkit agents, keyring prompters) are never listed, and a window
//!   id naming one is not found. This is the second signal; the broker decides by each
//!   window's executable ([`nish_proto::prompts::PROGRAMS`]) on X11 and Wayland alike.

use std::collections::HashMap;
use std::time::Duration;

use nish_proto::model::{Rect, State, WindowInfo};

use nish_atspi::a11y::{A11y, FrameRef, SETUP_TIMEOUT, TopLevel, props, top_levels};
use nish_atspi::failure::Failure;
use nish_atspi::framematch::TOP_LEVEL_ROLES;
use nish_atspi::states::{atspi_bits, map_states, role_name};

/// True when `app` (an AT-SPI application name) names one of the system's own prompts
/// ([`nish_proto::prompts::APPS`]), whose windows the reader never lists, reads or finds.
pub fn is_system_prompt(app: &str) -> bool {
    nish_proto::prompts::is_prompt_app(app)
}

/// The largest bus-name serial a window id can carry (ids stay below 2^53).
pub const MAX_SERIAL: u64 = (1 << 21) - 1;

/// The session test, shared with the input agent: `XDG_SESSION_TYPE=wayland` or
/// `WAYLAND_DISPLAY` set.
pub use nish_atspi::agent::{is_wayland, is_wayland_of};

/// 32-bit FNV-1a.
fn fnv1a32(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// The serial `N` of a unique bus name `:1.N`.
fn serial(bus_name: &str) -> Option<u64> {
    let n: u64 = bus_name.strip_prefix(":1.")?.parse().ok()?;
    (n > 0 && n <= MAX_SERIAL).then_some(n)
}

/// The window id of top-level object `path` of the application at `bus_name`.
pub fn window_id(bus_name: &str, path: &str) -> Option<u64> {
    Some((serial(bus_name)? << 32) | u64::from(fnv1a32(path)))
}

/// The application's unique bus name and the path hash a window id names.
pub fn decode(window_id: u64) -> Option<(String, u32)> {
    let s = window_id >> 32;
    (s > 0 && s <= MAX_SERIAL).then(|| (format!(":1.{s}"), (window_id & 0xffff_ffff) as u32))
}

/// True when the extents start at the window's own corner, as a Wayland toplevel's do.
fn at_origin(t: &TopLevel) -> bool {
    t.extents.is_some_and(|e| (e.x, e.y) == (0, 0))
}

/// The application's windows among its top-level objects: a Wayland toplevel does not know its
/// position, so its extents start at 0,0; objects placed elsewhere are popups positioned
/// relative to a window (Chromium's bubble hosts, menus) and are left out, unless no object of
/// the application is at 0,0 (an XWayland app reports X coordinates for all of them).
fn windows(tops: Vec<TopLevel>) -> Vec<TopLevel> {
    if tops.iter().any(at_origin) {
        tops.into_iter().filter(at_origin).collect()
    } else {
        tops
    }
}

/// Top-level objects whose path hash no other of the same application shares.
fn unambiguous(tops: Vec<TopLevel>) -> Vec<(u32, TopLevel)> {
    let mut count: HashMap<u32, usize> = HashMap::new();
    for t in &tops {
        *count.entry(fnv1a32(&t.path)).or_default() += 1;
    }
    tops.into_iter()
        .map(|t| (fnv1a32(&t.path), t))
        .filter(|(h, _)| count.get(h) == Some(&1))
        .collect()
}

/// A window's frame in its own coordinates.
fn window_frame(extents: Option<Rect>) -> Rect {
    let e = extents.unwrap_or_default();
    Rect::new(0, 0, e.w.max(0), e.h.max(0))
}

/// The window list (see the module documentation), the active window last; the applications'
/// names are waited for at most `names_wait`.
pub async fn list_windows(a11y: &A11y, names_wait: Duration) -> Result<Vec<WindowInfo>, Failure> {
    let apps = a11y.apps().await?;
    let mut wins: Vec<WindowInfo> = Vec::new();
    for app in apps {
        let Some(pid) = app.pid.filter(|p| *p != 0) else {
            continue;
        };
        if serial(&app.bus_name).is_none() || app.name.as_deref().is_some_and(is_system_prompt) {
            continue;
        }
        // Through the bus: a listing names no target, so the broker opens no peer-to-peer link
        // for it.
        let Ok(link) = a11y.bus_link(&app.bus_name).await else {
            continue;
        };
        let Some(tops) = top_levels(a11y, &link).await else {
            continue;
        };
        for (_, t) in unambiguous(windows(tops)) {
            let Some(id) = window_id(&app.bus_name, &t.path) else {
                continue;
            };
            let states = map_states(atspi_bits(&t.props.states));
            wins.push(WindowInfo {
                window_id: id,
                pid,
                app: app.name.clone().unwrap_or_default(),
                title: nish_atspi::states::clip_chars(
                    t.props.name.clone(),
                    nish_atspi::tree::NAME_MAX_CHARS,
                ),
                frame: window_frame(t.extents),
                active: states.has(State::Active),
                visible: states.has(State::Showing),
                stacking: 0,
            });
        }
    }
    // Names are asked of the applications in the background; wait for them as on X11.
    let mut pids: Vec<u32> = wins.iter().map(|w| w.pid).collect();
    pids.dedup();
    let names = a11y.names_by_pid(&pids, names_wait).await;
    for w in wins.iter_mut() {
        if w.app.is_empty()
            && let Some(n) = names.get(&w.pid)
        {
            w.app = n.clone();
        }
    }
    wins.retain(|w| !is_system_prompt(&w.app));
    // The active window on top; the rest keep registry order.
    wins.sort_by_key(|w| w.active);
    for (i, w) in wins.iter_mut().enumerate() {
        w.stacking = i as u32;
    }
    Ok(wins)
}

/// Every top-level object on the accessibility bus that says it is active, as (bus name,
/// path): of every application that answers, the desktop's own prompts included (which the
/// window list leaves out). A capture on mutter records the focused window, so the window it
/// is for must be the only one that says so (an application may say it of a window that is
/// not: another that tells the truth then says so too).
pub async fn active_top_levels(a11y: &A11y) -> Result<Vec<(String, String)>, Failure> {
    let mut active = Vec::new();
    for app in a11y.apps().await? {
        let Ok(link) = a11y.bus_link(&app.bus_name).await else {
            continue;
        };
        let Some(tops) = top_levels(a11y, &link).await else {
            continue;
        };
        for t in tops {
            if map_states(atspi_bits(&t.props.states)).has(State::Active) {
                active.push((app.bus_name.clone(), t.path));
            }
        }
    }
    Ok(active)
}

/// The top-level accessible that `window` names, checked live: its application still has the
/// pid, and it is still a top-level object. A window read before is re-checked with two calls
/// (its object still answers, is still a top-level role at 0,0 with the same path hash);
/// otherwise the application's top-level objects are listed again.
pub async fn find_frame(a11y: &A11y, window: &WindowInfo) -> Result<FrameRef, Failure> {
    let key = (window.window_id, window.pid);
    if let Some(f) = recheck(a11y, window).await {
        return Ok(f);
    }
    a11y.remember_frame(key, None);
    let f = discover(a11y, window).await?;
    a11y.remember_frame(key, Some(&f));
    Ok(f)
}

/// The remembered frame of `window`, when it still answers as the same top-level object.
async fn recheck(a11y: &A11y, window: &WindowInfo) -> Option<FrameRef> {
    let (path, toolkit) = a11y.known_frame((window.window_id, window.pid))?;
    let (bus_name, hash) = decode(window.window_id)?;
    if fnv1a32(&path) != hash {
        return None;
    }
    let link = a11y.link(&bus_name).await.ok()?;
    let (p, e) = tokio::join!(
        props(&link, &path, SETUP_TIMEOUT),
        nish_atspi::a11y::extents(&link, &path, SETUP_TIMEOUT)
    );
    let (p, e) = (p.ok()?, e.ok());
    if !TOP_LEVEL_ROLES.contains(&role_name(p.role).as_str()) {
        return None;
    }
    // A window at 0,0 stays there; an XWayland app's window may have moved (its frames are
    // placed from the extents read now).
    Some(FrameRef {
        link,
        path,
        props: p,
        extents: e,
        toolkit,
    })
}

/// Finds `window`'s top-level object among its application's.
async fn discover(a11y: &A11y, window: &WindowInfo) -> Result<FrameRef, Failure> {
    let gone = || Failure::not_found(format!("window {} does not exist", window.window_id));
    let (bus_name, hash) = decode(window.window_id).ok_or_else(gone)?;
    let apps = a11y.apps().await?;
    let app = apps
        .into_iter()
        .find(|a| a.bus_name == bus_name)
        .ok_or_else(gone)?;
    if app.pid != Some(window.pid) || window.pid == 0 {
        return Err(gone());
    }
    if app.name.as_deref().is_some_and(is_system_prompt) {
        return Err(gone());
    }
    let link = a11y.link(&bus_name).await?;
    let tops = top_levels(a11y, &link).await.ok_or_else(|| {
        Failure::not_responding(format!(
            "the application of pid {} did not answer",
            window.pid
        ))
    })?;
    let (_, t) = unambiguous(windows(tops))
        .into_iter()
        .find(|(h, _)| *h == hash)
        .ok_or_else(gone)?;
    let toolkit = nish_atspi::a11y::toolkit(&link).await;
    Ok(FrameRef {
        link,
        path: t.path,
        props: t.props,
        extents: t.extents,
        toolkit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_portal_dialog_services_are_system_prompts() {
        for app in [
            "xdg-desktop-portal-gnome",
            "xdg-desktop-portal-gtk",
            "xdg-desktop-portal-kde",
        ] {
            assert!(is_system_prompt(app), "{app}");
        }
        for app in [
            "gtk4-demo",
            "xdg-desktop-portal",
            "",
            "Xdg-desktop-portal-gnome",
        ] {
            assert!(!is_system_prompt(app), "{app}");
        }
    }

    #[test]
    fn window_ids_round_trip_and_stay_exact_in_json() {
        let path = "/org/a11y/atspi/accessible/12";
        let id = window_id(":1.42", path).expect("an id");
        assert_eq!(decode(id), Some((":1.42".to_string(), fnv1a32(path))));
        assert!(id < (1u64 << 53));
        let top = window_id(":1.2097151", path).expect("the largest serial");
        assert!(top < (1u64 << 53));
        assert_eq!(window_id(":1.2097152", path), None);
        assert_eq!(window_id("org.a11y.Bus", path), None);
        assert_eq!(window_id(":1.0", path), None);
        // Another application or another object: another id.
        assert_ne!(window_id(":1.43", path), Some(id));
        assert_ne!(
            window_id(":1.42", "/org/a11y/atspi/accessible/13"),
            Some(id)
        );
        // Ids of X windows (below 2^32) never decode.
        assert_eq!(decode(0x0080_0007), None);
    }

    #[test]
    fn two_objects_with_one_hash_are_both_left_out() {
        let t = |p: &str| TopLevel {
            path: p.into(),
            props: nish_atspi::a11y::Props {
                role: 23,
                name: String::new(),
                description: String::new(),
                states: vec![],
                ifaces: vec![],
                child_count: 0,
            },
            extents: None,
        };
        let kept = unambiguous(vec![t("/a"), t("/a"), t("/b")]);
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].1.path, "/b");
    }

    #[test]
    fn popups_placed_off_a_window_are_not_windows() {
        let t = |p: &str, x: i32, y: i32| TopLevel {
            path: p.into(),
            props: nish_atspi::a11y::Props {
                role: 23,
                name: String::new(),
                description: String::new(),
                states: vec![],
                ifaces: vec![],
                child_count: 1,
            },
            extents: Some(Rect::new(x, y, 300, 200)),
        };
        let paths = |v: Vec<TopLevel>| v.into_iter().map(|t| t.path).collect::<Vec<_>>();
        // Chromium on Wayland: its window at 0,0 and two bubble hosts placed off it.
        assert_eq!(
            paths(windows(vec![
                t("/1", 0, 0),
                t("/3", 115, 35),
                t("/4", 125, 45)
            ])),
            ["/1"]
        );
        // Two toplevels (a window and a dialog) both at their own 0,0.
        assert_eq!(
            paths(windows(vec![t("/1", 0, 0), t("/2", 0, 0)])),
            ["/1", "/2"]
        );
        // An XWayland app: X coordinates for every window, all kept.
        assert_eq!(
            paths(windows(vec![t("/1", 40, 60), t("/2", 300, 200)])),
            ["/1", "/2"]
        );
    }

    #[test]
    fn frames_are_in_the_window_own_coordinates() {
        assert_eq!(
            window_frame(Some(Rect::new(0, 0, 1467, 784))),
            Rect::new(0, 0, 1467, 784)
        );
        assert_eq!(
            window_frame(Some(Rect::new(30, 40, 200, 100))),
            Rect::new(0, 0, 200, 100)
        );
        assert_eq!(window_frame(None), Rect::new(0, 0, 0, 0));
    }
}
