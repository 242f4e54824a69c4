//! Reads: list_windows, get_window_state (full, skeleton, root, screenshot), clipboard_read,
//! and window targets, each under its judgement's terms (scope, captures, clipboard text).

use crate::audit_event::AuditEvent;
use std::sync::Arc;

use nish_proto::call::{Call, ReadArgs, ResultForm, Tool, WindowTarget};
use nish_proto::errors::{CANDIDATE_APP_CHARS, Candidate, DriverError, ErrorCode};
use nish_proto::model::{Continuation, State, Token, Tree, WindowInfo, escape_clip};
use nish_proto::wire::reader::{Freshness, TreeFreshness, WalkLimits};
use nish_proto::wire::shim::Image;
use serde_json::{Value, json};

use super::session_tools::app_matches;
use super::{Engine, Output, ReadRows, Session, ToolResult};
use crate::backend::{Backend, FrameOrigin};
use crate::policy::{CaptureFact, Judgement, Reach, WindowFact};
use crate::snapshots::Snapshot;
use crate::views::{self, ViewKind, ViewParams};

/// A window as the tools show it. `origin` says what the window's and its elements' frames
/// are relative to: `screen`, or `window` where the desktop gives no window position (Wayland:
/// the window's own top-left corner is 0,0).
pub(crate) fn window_json(w: &WindowInfo, origin: FrameOrigin) -> Value {
    json!({"window_id": w.window_id, "pid": w.pid, "app": escape_clip(&w.app, CANDIDATE_APP_CHARS),
           "title": escape_clip(&w.title, 120),
           "frame": {"x": w.frame.x, "y": w.frame.y, "w": w.frame.w, "h": w.frame.h}, "active": w.active,
           "origin": origin.as_str()})
}

/// True when `w`, whose process is `process` now, is one of the desktop's own prompts, or the
/// driver's own: a window of this very process (on Wayland, the consent dialog's read-only
/// narration on the accessibility bus is an application of the broker's process).
fn prompt(w: &WindowInfo, process: Option<&nish_proto::model::ProcIdentity>) -> bool {
    w.pid == std::process::id()
        || nish_proto::prompts::is_system_prompt(process.map(|p| p.exe.as_str()), &w.app)
}

impl<B: Backend> Engine<B> {
    /// Which process window `pid`'s window belongs to now (pid, start time and executable
    /// read again), reached as `reach`: the fact the judgement's scope is applied to.
    pub(crate) fn window_fact(&self, reach: Reach, pid: u32) -> WindowFact {
        WindowFact {
            reach,
            process: self.backend.identity(pid),
        }
    }

    /// True when `w` is one of the desktop's own prompts: its process's executable, read now,
    /// is one of [`nish_proto::prompts::PROGRAMS`], or its app calls itself by a prompt's
    /// accessibility name.
    pub(crate) fn is_system_prompt(&self, w: &WindowInfo) -> bool {
        prompt(w, self.backend.identity(w.pid).as_ref())
    }

    /// Visible windows in the judgement's scope, bottom to top; and every window but the
    /// desktop's own prompts, which no window id, pid or app name finds (they are left out
    /// here, not in the backend's list, so a point over one or the keyboard focus in one still
    /// sees it and the judge refuses it).
    pub(crate) async fn approved_windows(
        &self,
        j: &Judgement,
    ) -> Result<(Vec<WindowInfo>, Vec<WindowInfo>), DriverError> {
        let listed = self
            .bounded_read("listing windows", self.backend.list_windows())
            .await?;
        let mut all = Vec::with_capacity(listed.len());
        let mut approved = Vec::new();
        for w in listed {
            let process = self.backend.identity(w.pid);
            if prompt(&w, process.as_ref()) {
                continue;
            }
            if w.visible && j.admits(process.as_ref()) {
                approved.push(w.clone());
            }
            all.push(w);
        }
        Ok((approved, all))
    }

    pub(crate) async fn list_windows(&self, s: &Arc<Session>, j: &Judgement) -> ToolResult {
        let (approved, _) = self.approved_windows(j).await?;
        let origin = self.backend.frame_origin();
        self.audit.emit(
            AuditEvent::Read,
            Some(&s.id),
            json!({"tool": Tool::ListWindows.name(), "windows": approved.len()}),
        );
        Ok(Output::json(
            json!({"ok": true, "windows": approved.iter().rev().map(|w| window_json(w, origin)).collect::<Vec<_>>()}),
        ))
    }

    /// Resolves `pid` / `window_id` / `app` to one approved window (contract §2.3).
    pub(crate) async fn resolve_window(
        &self,
        j: &Judgement,
        target: &WindowTarget,
    ) -> Result<WindowInfo, DriverError> {
        let pid = target.pid.map(u64::from);
        let wid = target.window_id;
        let app = target.app.as_deref().filter(|a| !a.trim().is_empty());
        let (approved, all) = self.approved_windows(j).await?;
        let candidates = |ws: &[&WindowInfo]| -> Vec<Candidate> {
            ws.iter()
                .rev()
                .map(|w| Candidate {
                    window_id: w.window_id,
                    pid: w.pid,
                    app: escape_clip(&w.app, CANDIDATE_APP_CHARS),
                })
                .collect()
        };
        if let Some(wid) = wid {
            let Some(w) = all.iter().find(|w| w.window_id == wid) else {
                return Err(DriverError::new(
                    ErrorCode::WindowTargetNotFound,
                    format!("no window {wid}"),
                ));
            };
            if pid.is_some_and(|p| p != u64::from(w.pid)) {
                return Err(DriverError::new(
                    ErrorCode::WindowTargetNotFound,
                    format!("window {wid} does not belong to that pid"),
                ));
            }
            j.admit(&self.window_fact(Reach::Window(wid), w.pid))?;
            if !w.visible {
                return Err(DriverError::new(
                    ErrorCode::WindowTargetNotFound,
                    format!("window {wid} is not visible"),
                ));
            }
            return Ok(w.clone());
        }
        if let Some(pid) = pid {
            let mine: Vec<&WindowInfo> = approved
                .iter()
                .filter(|w| u64::from(w.pid) == pid)
                .collect();
            if let Some(top) = mine.last() {
                return Ok((*top).clone());
            }
            if let Some(w) = all.iter().find(|w| u64::from(w.pid) == pid) {
                j.admit(&self.window_fact(Reach::Pid(w.pid), w.pid))?;
            }
            return Err(DriverError::new(
                ErrorCode::WindowTargetNotFound,
                format!("pid {pid} has no visible window"),
            ));
        }
        if let Some(app) = app {
            let hits: Vec<&WindowInfo> = approved.iter().filter(|w| app_matches(app, w)).collect();
            return match hits.len() {
                0 => Err(DriverError::new(
                    ErrorCode::WindowTargetNotFound,
                    "no approved window matches app",
                )),
                1 => Ok(hits[0].clone()),
                n => Err(DriverError::new(
                    ErrorCode::AmbiguousTarget,
                    format!("{n} approved windows match app"),
                )
                .with_candidates(candidates(&hits))),
            };
        }
        let refs: Vec<&WindowInfo> = approved.iter().collect();
        Err(DriverError::new(
            ErrorCode::AmbiguousWindowTarget,
            format!("no window named; {} approved windows are open", refs.len()),
        )
        .with_candidates(candidates(&refs)))
    }

    /// Walks a window and records the snapshot.
    pub(crate) async fn read_window(
        &self,
        s: &Session,
        w: &WindowInfo,
    ) -> Result<Arc<Snapshot>, DriverError> {
        self.read_window_with(s, w, WalkLimits::default()).await
    }

    /// Reads a window for a plain read (`get_window_state`): the reader may answer with the
    /// window's kept walk under the act generation now ([`Freshness::MayReuse`]). Never for an
    /// act's settle or a wait: they read the window now (an act's re-check has its own rule:
    /// `acts::target`). With how fresh the tree is.
    pub(crate) async fn read_window_reusing(
        &self,
        s: &Session,
        w: &WindowInfo,
    ) -> Result<(Arc<Snapshot>, TreeFreshness), DriverError> {
        let Some(generation) = self.act_generation() else {
            // An act runs: walk.
            return Ok((self.read_window(s, w).await?, TreeFreshness::Walked));
        };
        let (tree, fresh) = self
            .bounded_read(
                "reading the window",
                self.backend.read_tree_fresh(
                    w,
                    WalkLimits::default(),
                    Freshness::may_reuse(generation),
                ),
            )
            .await?;
        if fresh.reused() && self.act_generation() != Some(generation) {
            // An act (or a pause or resume) began or ended while the read waited its turn, or
            // one runs now: the kept walk may be from before it. Walk now.
            return Ok((self.read_window(s, w).await?, TreeFreshness::Walked));
        }
        Ok((self.record_tree(s, w, tree)?, fresh))
    }

    async fn read_window_with(
        &self,
        s: &Session,
        w: &WindowInfo,
        limits: WalkLimits,
    ) -> Result<Arc<Snapshot>, DriverError> {
        let tree: Tree = self
            .bounded_read("reading the window", self.backend.read_tree(w, limits))
            .await?;
        self.record_tree(s, w, tree)
    }

    /// Validates a tree read of window `w` and records the snapshot.
    fn record_tree(
        &self,
        s: &Session,
        w: &WindowInfo,
        tree: Tree,
    ) -> Result<Arc<Snapshot>, DriverError> {
        let tree = self.validate_tree(tree, w)?;
        let mut core = s.core();
        let epoch = core.sm.epoch;
        Ok(core.snaps.record(tree, epoch, || self.new_snapshot_id()))
    }

    /// Re-validates what a backend returned: bounded sizes, consistent parents and depths, the
    /// window asked for.
    pub(crate) fn validate_tree(
        &self,
        mut tree: Tree,
        asked: &WindowInfo,
    ) -> Result<Tree, DriverError> {
        let bad = |what: &str| {
            DriverError::new(
                ErrorCode::InternalError,
                format!("the reader returned a malformed tree ({what})"),
            )
        };
        if tree.window.window_id != asked.window_id || tree.window.pid != asked.pid {
            return Err(bad("another window"));
        }
        if tree.nodes.is_empty() {
            // A read changes nothing: the same call may be sent again (retry safe).
            return Err(DriverError::new(
                ErrorCode::RateLimited,
                "the app gave no accessible tree for the window; nothing was changed; retry in 1000 ms",
            ));
        }
        if tree.nodes.len() > nish_proto::model::WALK_MAX_ELEMENTS {
            return Err(bad("too many rows"));
        }
        for (i, n) in tree.nodes.iter().enumerate() {
            match n.parent {
                None if i == 0 => {}
                Some(p) if (p as usize) < i && tree.nodes[p as usize].depth + 1 == n.depth => {}
                _ => return Err(bad("row order")),
            }
            if n.role.len() > 64 || n.actions.len() > 32 || n.handle.len() > 512 {
                return Err(bad("field sizes"));
            }
        }
        for n in &mut tree.nodes {
            // The secure-name rules again, a second line behind the reader's (one copy of
            // them, `nish_proto::secure_names`): a field secure by its name is secure here
            // whatever the reader said.
            if nish_proto::secure_names::secure_by_name(&n.role, &n.name) {
                n.states.insert(State::Secure);
            }
            // Names, descriptions and values are bounded here whatever the reader sent, and
            // only the field attributes the lexicon reads are kept, cut.
            if n.name.len() > 4096 {
                n.name = n.name.chars().take(1024).collect();
            }
            if n.description.len() > 4096 {
                n.description = n.description.chars().take(1024).collect();
            }
            if !n.field_attrs.is_empty() {
                n.field_attrs = nish_proto::lexicon::field_attrs(
                    n.field_attrs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                );
            }
            if n.is_secure() {
                n.value = None;
            } else if let Some(v) = &mut n.value
                && v.len() > 16_384
            {
                *v = v.chars().take(4096).collect();
            }
            // The reader withholds credential-looking values of editable fields; the same test
            // again here (contract §5.3).
            let editable = n.states.has(State::Editable)
                || n.ifaces.has(nish_proto::model::Ifaces::EDITABLE_TEXT);
            if editable
                && n.value
                    .as_deref()
                    .is_some_and(crate::credentials::value_looks_like_credential)
            {
                n.value = None;
                n.states.insert(State::Redacted);
            }
        }
        nish_proto::model::hide_inside_secure(&mut tree.nodes);
        Ok(tree)
    }

    /// Captures a window with every secure field of the snapshot blacked out where it is when
    /// the image is taken. Refused (contract §7.1: "complete tree, known secure-field bounds")
    /// when the snapshot's walk was cut short (`secure_field`: a secure field may lie beyond the
    /// cut), when a field's bounds cannot be read (`secure_field`, from the reader), when the
    /// window or a field moved while the image was taken (`stale_element_token`, from the
    /// reader), and when a read right after the image finds a secure field the snapshot did not
    /// name (`stale_element_token`).
    pub(crate) async fn capture_json(
        &self,
        snap: &Snapshot,
        j: &Judgement,
    ) -> Result<(Value, Image), DriverError> {
        j.check_capture(&CaptureFact::Before {
            cut_short: snap.tree.truncated.is_some(),
        })?;
        self.rate_limit_capture()?;
        let secure: Vec<String> = snap
            .tree
            .nodes
            .iter()
            .filter(|n| n.is_secure())
            .map(|n| n.handle.clone())
            .collect();
        let window = &snap.tree.window;
        let c = self
            .bounded_read(
                "capturing the window",
                self.backend.capture(window, secure.clone()),
            )
            .await?;
        // Right after the image: no secure field the snapshot did not name.
        let light = WalkLimits {
            details: false,
            ..WalkLimits::default()
        };
        let after = self
            .bounded_read(
                "re-reading the window",
                self.backend.read_tree(window, light),
            )
            .await?;
        let after = self.validate_tree(after, window)?;
        j.check_capture(&CaptureFact::After {
            cut_short: after.truncated.is_some(),
            new_secure: after
                .nodes
                .iter()
                .any(|n| n.is_secure() && !secure.contains(&n.handle)),
        })?;
        let meta = json!({"mime": "image/png", "width": c.width, "height": c.height, "redacted": c.redacted,
                          "bytes": c.png.len()});
        Ok((
            meta,
            Image {
                mime: "image/png".into(),
                data: c.png,
            },
        ))
    }

    pub(crate) async fn get_window_state(
        &self,
        s: &Arc<Session>,
        args: &ReadArgs,
        j: &Judgement,
    ) -> ToolResult {
        let root = args.root.as_ref();
        let skeleton = args.skeleton;
        let max_elements = args.max_elements.map(u64::from);
        let mut max_depth = args.max_depth.map(u64::from);
        let began = std::time::Instant::now();
        let mut continued = None;
        let (window, kind, root_sig) = match (&args.continue_from, root) {
            (Some(c), _) => {
                let (snap, kind) = self.continued_snapshot(s, args, c)?;
                // Judged as any read: the window named again, in scope now.
                let w = self
                    .resolve_window(
                        j,
                        &WindowTarget {
                            window_id: Some(snap.tree.window.window_id),
                            ..WindowTarget::default()
                        },
                    )
                    .await?;
                max_depth = Some(u64::from(c.max_depth));
                continued = Some((c.snapshot_id.clone(), c.next));
                (w, kind, None)
            }
            (None, Some(tok)) => {
                let (snap, row) = {
                    let core = s.core();
                    core.snaps.resolve(tok, core.sm.epoch)?
                };
                let w = self
                    .resolve_window(
                        j,
                        &WindowTarget {
                            window_id: Some(snap.tree.window.window_id),
                            ..WindowTarget::default()
                        },
                    )
                    .await?;
                (w, ViewKind::Root(row), Some(snap.signature))
            }
            (None, None) => {
                let w = self.resolve_window(j, &args.target).await?;
                (
                    w,
                    if skeleton {
                        ViewKind::Skeleton
                    } else {
                        ViewKind::Full
                    },
                    None,
                )
            }
        };
        let resolved = began.elapsed();
        let (snap, fresh) = self.read_window_reusing(s, &window).await?;
        let kept = fresh.reused();
        let read = began.elapsed() - resolved;
        if let Some(sig) = root_sig
            && sig != snap.signature
        {
            return Err(DriverError::new(
                ErrorCode::StaleElementToken,
                format!(
                    "the window's structure changed; the new snapshot is {}",
                    snap.id
                ),
            ));
        }
        let mut start = 0;
        if let Some((id, next)) = &continued {
            if *id != snap.id {
                // The structure, the names in its lists or the epoch changed since the page
                // before: its rows are not this snapshot's rows.
                return Err(DriverError::new(
                    ErrorCode::StaleElementToken,
                    format!(
                        "the window changed since snapshot {id} that continue_from is from; \
                         read it again (the new snapshot is {})",
                        snap.id
                    ),
                ));
            }
            start = *next;
        }
        let form = args.result_form;
        let params = ViewParams::new(kind, max_elements, max_depth)
            .from_row(start)
            .in_form(form);
        let view = views::cut(&snap.id, &snap.tree.nodes, snap.tree.truncated, params);
        let mut out = json!({
            "ok": true,
            "snapshot_id": snap.id,
            "window": window_json(&snap.tree.window, self.backend.frame_origin()),
            "view": kind.as_str(),
            "truncated": view.truncated,
            "truncated_reason": view.truncated_reason,
            "element_count": snap.tree.nodes.len(),
        });
        if let Some(next) = view.next {
            out["continue_from"] = json!(
                Continuation {
                    snapshot_id: snap.id.clone(),
                    root: match kind {
                        ViewKind::Root(r) => Some(r),
                        _ => None,
                    },
                    next,
                    max_depth: params.max_depth as u32,
                }
                .to_string()
            );
        }
        // The rows go as JSON text, written straight from the snapshot (see views::Element).
        let rows_json = match form {
            ResultForm::Text => None,
            _ => Some(serde_json::to_string(&view.elements).map_err(|e| {
                DriverError::new(
                    ErrorCode::InternalError,
                    format!("cannot write the rows: {e}"),
                )
            })?),
        };
        let rows_text = match form {
            ResultForm::Both => {
                out["tree_text"] = json!(view.tree_text);
                None
            }
            ResultForm::Text => Some(view.tree_text),
            ResultForm::Structured => None,
        };
        if form != ResultForm::Both {
            out["result_form"] = json!(form.as_str());
        }
        if let ViewKind::Root(r) = kind {
            out["root"] = json!(format!("{}:{}", snap.id, r));
        }
        tracing::debug!(
            resolve_us = resolved.as_micros() as u64,
            read_us = read.as_micros() as u64,
            view_us = (began.elapsed() - resolved - read).as_micros() as u64,
            kept,
            "get_window_state"
        );
        let mut images = vec![];
        if args.include_screenshot {
            let (meta, img) = self.capture_json(&snap, j).await?;
            out["screenshot"] = meta;
            images.push(img);
        }
        self.audit.emit(
            AuditEvent::Read,
            Some(&s.id),
            json!({"tool": Tool::GetWindowState.name(), "view": kind.as_str(), "window_id": window.window_id, "pid": window.pid,
                   "rows": view.rows.len(), "walked": snap.tree.nodes.len(), "kept": kept, "truncated": view.truncated,
                   "continued": continued.is_some(), "form": form.as_str(),
                   "screenshot": !images.is_empty()}),
        );
        // Only a result that goes out shows its rows (a failed capture sends none).
        s.core().snaps.mark_shown(&snap, view.rows.iter().copied());
        Ok(Output {
            value: out,
            rows: Some(ReadRows {
                count: view.rows.len(),
                elements: rows_json,
                text: rows_text,
            }),
            images,
        })
    }

    /// The snapshot a continuation is from, and the view it goes on with; refused when other
    /// arguments say something else (another view, window or depth, a screenshot), and, as an
    /// element token of it would be, when the snapshot is not this session's current one of
    /// its window.
    fn continued_snapshot(
        &self,
        s: &Session,
        args: &ReadArgs,
        c: &Continuation,
    ) -> Result<(Arc<Snapshot>, ViewKind), DriverError> {
        let conflict = |what: &str| {
            DriverError::new(
                ErrorCode::InvalidArguments,
                format!("continue_from goes on with the read it came from; {what}"),
            )
        };
        if let Some(root) = &args.root
            && (c.root != Some(root.index) || root.snapshot_id != c.snapshot_id)
        {
            return Err(conflict(
                "root is left out or the continuation's own (it names its view)",
            ));
        }
        if args.skeleton {
            return Err(conflict("a skeleton read has no continuation"));
        }
        if args.include_screenshot {
            return Err(conflict("include_screenshot is not given with it"));
        }
        if args.max_depth.is_some_and(|d| d != c.max_depth) {
            return Err(conflict("max_depth is left out or the same as before"));
        }
        let (snap, _) = {
            let core = s.core();
            core.snaps
                .resolve(
                    &Token {
                        snapshot_id: c.snapshot_id.clone(),
                        index: c.root.unwrap_or(0),
                    },
                    core.sm.epoch,
                )
                .map_err(|e| match e.code {
                    ErrorCode::StaleElementToken => DriverError::new(
                        e.code,
                        format!(
                            "continue_from is from snapshot {}, which is not a current snapshot of \
                         this session (the window changed, was not read recently, or the \
                         continuation is another session's); read the window again",
                            c.snapshot_id
                        ),
                    ),
                    _ => e,
                })?
        };
        let w = &snap.tree.window;
        if args.target.window_id.is_some_and(|id| id != w.window_id)
            || args.target.pid.is_some_and(|p| p != w.pid)
            || args
                .target
                .app
                .as_deref()
                .is_some_and(|a| !a.trim().is_empty() && !app_matches(a, w))
        {
            return Err(conflict("it is from another window than the one named"));
        }
        if c.next as usize >= snap.tree.nodes.len() {
            return Err(DriverError::new(
                ErrorCode::ElementNotFound,
                format!("snapshot {} has no row {}", snap.id, c.next),
            ));
        }
        let kind = match c.root {
            Some(r) => ViewKind::Root(r),
            None => ViewKind::Full,
        };
        Ok((snap, kind))
    }

    pub(crate) async fn clipboard_read(&self, s: &Arc<Session>, j: &Judgement) -> ToolResult {
        // The host is asked only when the read can happen.
        self.backend.clipboard_ready().await?;
        // Always approved call by call, whatever the host opted into (contract §5.2).
        self.ask_host(
            s,
            &Call::ClipboardRead,
            &["clipboard_read"],
            json!({"tool": Tool::ClipboardRead.name(), "description": "Read the clipboard's text"}),
            None,
        )
        .await?;
        let text = self
            .bounded_read("reading the clipboard", self.backend.clipboard_read())
            .await?;
        if let Err(e) = j.check_clipboard(crate::credentials::looks_like_credential(&text)) {
            self.audit.emit(AuditEvent::Read, Some(&s.id), json!({"tool": Tool::ClipboardRead.name(), "length": text.chars().count(), "refused": "credential"}));
            return Err(e);
        }
        let len = text.chars().count();
        self.audit.emit(
            AuditEvent::Read,
            Some(&s.id),
            json!({"tool": Tool::ClipboardRead.name(), "length": len}),
        );
        Ok(Output::json(
            json!({"ok": true, "text": text, "length": len}),
        ))
    }
}
