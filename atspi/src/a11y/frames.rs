//! Matching an X window to its application's top-level accessible ([`find_frame`]), the
//! memory of those found ([`A11y::remember_frame`]), and an application's top-level objects
//! ([`top_levels`]).

use nish_proto::model::{Ifaces, Rect, State, WindowInfo};
use zbus::zvariant::OwnedObjectPath;

use super::apps::{A11y, AppRef, FRAME_MEMORY, KnownFrame};
use super::bus::{ROOT_PATH, SETUP_TIMEOUT};
use super::link::AppLink;
use super::objects::{Props, extents, props, toolkit};
use crate::dbus::{CallError, Read, call};
use crate::failure::Failure;
use crate::framematch::{Candidate, TOP_LEVEL_ROLES, Target, match_frame};
use crate::states::{atspi_bits, ifaces_from_names, map_states, role_name};

impl A11y {
    /// The remembered top-level accessible of window `key` (window id, pid): its object path
    /// and its application's toolkit.
    pub fn known_frame(&self, key: (u64, u32)) -> Option<(String, (String, String))> {
        let m = self.frames.lock().ok()?;
        m.get(&key).map(|k| (k.path.clone(), k.toolkit.clone()))
    }

    /// The bus name of the application of window `key`'s remembered top-level accessible.
    pub fn known_bus(&self, key: (u64, u32)) -> Option<String> {
        let m = self.frames.lock().ok()?;
        m.get(&key).map(|k| k.bus_name.clone())
    }

    /// The toolkit (`ToolkitName`) of the application `bus_name`, as a remembered frame of it
    /// reported it (`None`: no frame of it is remembered).
    pub fn known_toolkit(&self, bus_name: &str) -> Option<String> {
        let m = self.frames.lock().ok()?;
        m.values()
            .find(|k| k.bus_name == bus_name)
            .map(|k| k.toolkit.0.clone())
    }

    /// Remembers the top-level accessible of window `key`; `None` forgets it.
    pub fn remember_frame(&self, key: (u64, u32), frame: Option<&FrameRef>) {
        if let Ok(mut m) = self.frames.lock() {
            match frame {
                Some(f) => {
                    if m.len() >= FRAME_MEMORY {
                        m.clear();
                    }
                    m.insert(
                        key,
                        KnownFrame {
                            bus_name: f.link.bus_name.clone(),
                            path: f.path.clone(),
                            toolkit: f.toolkit.clone(),
                        },
                    );
                }
                None => {
                    m.remove(&key);
                }
            }
        }
    }
}

/// An X window's top-level accessible.
#[derive(Clone, Debug)]
pub struct FrameRef {
    /// The link to its application.
    pub link: AppLink,
    /// Its object path.
    pub path: String,
    /// Its properties.
    pub props: Props,
    /// Its extents as reported.
    pub extents: Option<Rect>,
    /// The application's toolkit name and version.
    pub toolkit: (String, String),
}

/// Finds the window's application (by pid) and its top-level accessible (by geometry, then
/// name). `client` and `wm_frame` are the X geometry of the window and its window-manager frame.
pub async fn find_frame(
    a11y: &A11y,
    window: &WindowInfo,
    client: Rect,
    wm_frame: Option<Rect>,
) -> Result<FrameRef, Failure> {
    let key = (window.window_id, window.pid);
    let known = a11y.frames.lock().ok().and_then(|m| m.get(&key).cloned());
    if let Some(k) = known {
        if let Some(f) = recheck_frame(a11y, &k, window, client, wm_frame).await {
            return Ok(f);
        }
        a11y.remember_frame(key, None);
    }
    let f = discover_frame(a11y, window, client, wm_frame).await?;
    a11y.remember_frame(key, Some(&f));
    Ok(f)
}

/// The remembered top-level accessible, when it still answers, is still a window and still
/// matches the X window's geometry (or name).
async fn recheck_frame(
    a11y: &A11y,
    k: &KnownFrame,
    window: &WindowInfo,
    client: Rect,
    wm_frame: Option<Rect>,
) -> Option<FrameRef> {
    let link = a11y.link(&k.bus_name).await.ok()?;
    let (p, e) = tokio::join!(
        props(&link, &k.path, SETUP_TIMEOUT),
        extents(&link, &k.path, SETUP_TIMEOUT)
    );
    let p = p.ok()?;
    let e = e.ok();
    let cand = Candidate {
        role: role_name(p.role),
        name: p.name.clone(),
        extents: e,
        showing: map_states(atspi_bits(&p.states)).has(State::Showing),
    };
    let target = Target {
        client,
        wm_frame,
        title: &window.title,
    };
    if crate::framematch::score(&cand, &target) < crate::framematch::MIN_SCORE {
        return None;
    }
    Some(FrameRef {
        link,
        path: k.path.clone(),
        props: p,
        extents: e,
        toolkit: k.toolkit.clone(),
    })
}

/// One top-level object of an application: a child of its root object whose role is one of
/// [`crate::framematch::TOP_LEVEL_ROLES`].
#[derive(Clone, Debug, PartialEq)]
pub struct TopLevel {
    /// Its object path.
    pub path: String,
    /// Its basic properties.
    pub props: Props,
    /// Its extents, when it is a component and answered.
    pub extents: Option<Rect>,
}

/// The top-level objects of the application at `link` (the children of its root object that
/// it serves itself, with a top-level role), with their extents; `None` when it did not answer
/// the child list (a failed peer-to-peer link is dropped, so the next call goes through the
/// bus). Children that do not answer their properties are left out.
pub async fn top_levels(a11y: &A11y, link: &AppLink) -> Option<Vec<TopLevel>> {
    let kids: Vec<(String, OwnedObjectPath)> = match call(
        &link.conn,
        link.dest(),
        ROOT_PATH,
        Read::GetChildren,
        &(),
        SETUP_TIMEOUT,
    )
    .await
    {
        Ok(k) => k,
        Err(CallError::Timeout) => return None,
        Err(_) => {
            if link.p2p {
                a11y.drop_link(&link.bus_name).await;
            }
            return None;
        }
    };
    let paths: Vec<String> = kids
        .into_iter()
        .filter(|(b, _)| b == &link.bus_name || b.is_empty())
        .map(|(_, p)| p.as_str().to_string())
        .collect();
    let got = crate::pool::run(paths, 16, |path| {
        let link = link.clone();
        async move {
            let p = props(&link, &path, SETUP_TIMEOUT).await.ok()?;
            if !TOP_LEVEL_ROLES.contains(&role_name(p.role).as_str()) {
                return None;
            }
            let e = if ifaces_from_names(&p.ifaces).has(Ifaces::COMPONENT) {
                extents(&link, &path, SETUP_TIMEOUT).await.ok()
            } else {
                None
            };
            Some(TopLevel {
                path,
                props: p,
                extents: e,
            })
        }
    })
    .await;
    Some(got.into_iter().flatten().flatten().collect())
}

async fn discover_frame(
    a11y: &A11y,
    window: &WindowInfo,
    client: Rect,
    wm_frame: Option<Rect>,
) -> Result<FrameRef, Failure> {
    let apps = a11y.apps().await?;
    let mine: Vec<AppRef> = apps
        .into_iter()
        .filter(|a| a.pid == Some(window.pid) && window.pid != 0)
        .collect();
    if mine.is_empty() {
        return Err(Failure::not_found(format!(
            "no accessible application for pid {}",
            window.pid
        )));
    }
    let mut any_answered = false;
    for app in mine {
        let link = a11y.link(&app.bus_name).await?;
        let Some(tops) = top_levels(a11y, &link).await else {
            continue;
        };
        any_answered = true;
        let cands: Vec<Candidate> = tops
            .iter()
            .map(|t| Candidate {
                role: role_name(t.props.role),
                name: t.props.name.clone(),
                extents: t.extents,
                showing: map_states(atspi_bits(&t.props.states)).has(State::Showing),
            })
            .collect();
        let target = Target {
            client,
            wm_frame,
            title: &window.title,
        };
        if let Some(i) = match_frame(&cands, &target) {
            let TopLevel {
                path,
                props,
                extents,
            } = tops[i].clone();
            let toolkit = toolkit(&link).await;
            return Ok(FrameRef {
                link,
                path,
                props,
                extents,
                toolkit,
            });
        }
    }
    if !any_answered {
        return Err(Failure::not_responding(format!(
            "the application of pid {} did not answer",
            window.pid
        )));
    }
    Err(Failure::not_found(format!(
        "no accessible window matches window {}",
        window.window_id
    )))
}
