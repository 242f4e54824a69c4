//! The [`Backend`] trait on the fake desktop: what the engine asks of it.

use super::*;

impl Backend for MockBackend {
    fn kind(&self) -> &'static str {
        "mock"
    }

    fn take_events(&self) -> Option<mpsc::UnboundedReceiver<BackendEvent>> {
        self.events_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    async fn watch_events(&self, window: &WindowInfo, _element: &str) -> Option<u64> {
        let e = *self.events.lock().unwrap_or_else(|e| e.into_inner());
        if e == MockEvents::None {
            return None;
        }
        let id = self
            .watches
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst) as u64
            + 1;
        let rows = self.seen_rows(window);
        self.watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (window.clone(), rows));
        Some(id)
    }

    async fn read_objects(
        &self,
        window: &WindowInfo,
        handles: Vec<String>,
    ) -> Option<Vec<Option<Node>>> {
        self.objects_read
            .fetch_add(handles.len(), std::sync::atomic::Ordering::SeqCst);
        let d = self.desk();
        let w = d.windows.iter().find(|w| w.window_id == window.window_id)?;
        let nodes = d.walk(w, WalkLimits::default()).0;
        Some(
            handles
                .iter()
                .map(|h| {
                    nodes.iter().find(|n| &n.handle == h).map(|n| Node {
                        parent: None,
                        depth: 0,
                        child_count: 0,
                        frame: None,
                        actions: vec![],
                        ..n.clone()
                    })
                })
                .collect(),
        )
    }

    async fn settle_events(
        &self,
        watch: u64,
        wait: SettleWait,
        bounds: SettleBounds,
    ) -> Option<SettleReport> {
        self.settles
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let began = self
            .watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&watch);
        // Every row that differs since the watch began sent its event.
        let changed = began.map(|(window, before)| {
            let now = self.seen_rows(&window);
            now.iter()
                .filter(|row| !before.contains(row))
                .map(|row| row.0.clone())
                .collect::<Vec<String>>()
        });
        let e = *self.events.lock().unwrap_or_else(|e| e.into_inner());
        let (own_seen, quiet, ms) = match e {
            MockEvents::None => return None,
            MockEvents::Own | MockEvents::OwnOnly => (true, true, bounds.quiet_ms),
            MockEvents::Lost => (false, false, bounds.own_max_ms),
            MockEvents::Busy => (true, false, bounds.max_ms),
        };
        Some(SettleReport {
            events: if own_seen { 1 } else { 0 },
            own_seen: own_seen || wait == SettleWait::Quiet,
            quiet,
            window_known: true,
            ms,
            // A lost event leaves the change unnamed; an app that keeps changing names more
            // than a settle may.
            changed: match e {
                MockEvents::Own => changed,
                MockEvents::OwnOnly => changed.map(|c| {
                    c.into_iter()
                        .filter(|h| Some(h) == self.acted_on().as_ref())
                        .collect()
                }),
                _ => None,
            },
            ..Default::default()
        })
    }

    async fn keyboard_focus(&self) -> Result<Option<KeyboardFocus>, DriverError> {
        let d = self.desk();
        let pid = d.win(d.active).map(|w| w.pid);
        Ok(Some(KeyboardFocus {
            chain: vec![d.active],
            popup: pid.is_some() && d.popup == pid,
        }))
    }

    async fn list_windows(&self) -> Result<Vec<WindowInfo>, DriverError> {
        let d = self.desk();
        Ok(d.windows
            .iter()
            .enumerate()
            .map(|(i, w)| d.window_info(w, i))
            .collect())
    }

    async fn read_tree_fresh(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
        freshness: Freshness,
    ) -> Result<(Tree, TreeFreshness), DriverError> {
        let log = if limits.details {
            &self.read_freshness
        } else {
            &self.light_freshness
        };
        if let Ok(mut k) = log.lock() {
            k.push(freshness);
        }
        let Some(g) = freshness.generation() else {
            return self
                .read_tree(window, limits)
                .await
                .map(|t| (t, TreeFreshness::Walked));
        };
        if let Some(map) = self.kept.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
            && let Some((at, tree)) = map.get(&window.window_id)
            && *at == g
        {
            // The mock numbers no versions.
            return Ok((
                tree.clone(),
                TreeFreshness::Reused {
                    version: 0,
                    age_ms: 0,
                },
            ));
        }
        let tree = self.walk_now(window, limits)?;
        if limits.details
            && let Some(map) = self.kept.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
        {
            map.insert(window.window_id, (g, tree.clone()));
            return Ok((tree, TreeFreshness::Kept { version: 0 }));
        }
        Ok((tree, TreeFreshness::Walked))
    }

    async fn rekeep(&self, window: &WindowInfo, from: u64, to: u64) -> bool {
        // The reader's kept walk noted the act's events and reads those objects again at the
        // next read: the fake desktop as it is now.
        let now = self.walk_now(window, WalkLimits::default());
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        match (
            kept.as_mut().and_then(|m| m.get_mut(&window.window_id)),
            now,
        ) {
            (Some((at, tree)), Ok(now)) if *at == from => {
                *at = to;
                *tree = now;
                true
            }
            _ => false,
        }
    }

    async fn read_tree(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
    ) -> Result<Tree, DriverError> {
        if let Some(map) = self.kept.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            // A walk now: the next plain read walks too (as the reader).
            map.remove(&window.window_id);
        }
        self.walk_now(window, limits)
    }

    async fn capture(
        &self,
        window: &WindowInfo,
        secure: Vec<String>,
    ) -> Result<Capture, DriverError> {
        let d = self.desk();
        let w = d.win(window.window_id).ok_or_else(|| {
            DriverError::new(ErrorCode::WindowTargetNotFound, "the window is gone")
        })?;
        let (wd, ht) = (w.frame.w as u32, w.frame.h as u32);
        let mut rgb = vec![0xd8u8; (wd * ht * 3) as usize];
        let (nodes, _, _) = d.walk(w, WalkLimits::default());
        // Draw every showing element as a lighter box so captures have content.
        for n in nodes
            .iter()
            .skip(1)
            .filter(|n| n.states.has(State::Showing))
        {
            if let Some(f) = n.frame {
                fill(&mut rgb, wd, ht, &f, &w.frame, [0xf4, 0xf4, 0xf0]);
            }
        }
        // The secure fields where they are now, by handle.
        let mut redacted = 0;
        let redact: Vec<Rect> = nodes
            .iter()
            .filter(|n| secure.contains(&n.handle))
            .filter_map(|n| n.frame)
            .collect();
        if redact.len() < secure.len() {
            return Err(DriverError::new(
                ErrorCode::SecureField,
                "a secure field's bounds could not be read; the capture was not taken",
            ));
        }
        for r in &redact {
            if r.intersect(&w.frame).is_some() {
                fill(&mut rgb, wd, ht, r, &w.frame, [0, 0, 0]);
                redacted += 1;
            }
        }
        let png =
            encode_png(wd, ht, &rgb).map_err(|m| DriverError::new(ErrorCode::InternalError, m))?;
        Ok(Capture {
            width: wd,
            height: ht,
            redacted,
            png,
        })
    }

    fn identity(&self, pid: u32) -> Option<ProcIdentity> {
        self.desk().procs.iter().find(|p| p.pid == pid).cloned()
    }

    async fn consent(&self, req: ConsentRequest) -> Result<ConsentAnswer, DriverError> {
        let (tx, rx) = oneshot::channel();
        let timeout = req.timeout();
        {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if p.as_ref().is_some_and(|p| !p.tx.is_closed()) {
                return Err(DriverError::new(
                    ErrorCode::LeaseHeld,
                    "another consent dialog is open",
                ));
            }
            *p = Some(Pending { req, tx });
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_if(|p| p.tx.is_closed());
        Ok(match answer {
            Ok(Ok(a)) => a,
            _ => ConsentAnswer {
                allow: false,
                apps: vec![],
                programs: vec![],
                takeover: false,
                clipboard: false,
            },
        })
    }

    fn end_acts(&self) {
        self.acts_ended
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    async fn semantic(&self, target: Expect, op: SemanticOp) -> Result<ActPath, DriverError> {
        let id = self.resolve(&target)?;
        *self.last_acted.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("mock:{id}"));
        let mut d = self.desk();
        let secure = d.els[id].states.has(State::Secure) || d.els[id].role == "password_text";
        match op {
            SemanticOp::Action { name, index } => {
                // As the input agent: the action at that index, if it is still the one named.
                if d.els[id].actions.get(index as usize) != Some(&name.as_str()) {
                    return Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "the element has no action of that name at that index",
                    ));
                }
                match name.as_str() {
                    "activate" if d.els[id].role == "list_item" => {
                        let w = d.window_of(id).map(|w| w.window_id).unwrap_or(0);
                        let n = d.els[id].name.clone();
                        d.set_status(w, format!("Opened {n}"));
                    }
                    "showMenu" => {
                        let w = d.window_of(id).map(|w| w.window_id).unwrap_or(0);
                        d.set_status(w, "Menu opened".into());
                    }
                    _ => d.behave(id),
                }
                Ok(ActPath::Action { name })
            }
            SemanticOp::Select => {
                d.select(id)?;
                Ok(ActPath::Selection)
            }
            SemanticOp::InsertText { text } | SemanticOp::SetText { text } if secure => {
                let _ = text;
                Err(DriverError::new(
                    ErrorCode::SecureField,
                    "the element is a secure field",
                ))
            }
            SemanticOp::InsertText { text } => {
                if d.els[id].ifaces & Ifaces::EDITABLE_TEXT == 0 {
                    return Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "the element has no EditableText",
                    ));
                }
                d.els[id]
                    .value
                    .get_or_insert_with(String::new)
                    .push_str(&text);
                Ok(ActPath::EditableText)
            }
            SemanticOp::SetText { text } => {
                if d.els[id].ifaces & Ifaces::EDITABLE_TEXT == 0 {
                    return Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "the element has no EditableText",
                    ));
                }
                d.els[id].value = Some(text);
                Ok(ActPath::EditableText)
            }
            SemanticOp::SetNumber { value } => {
                if d.els[id].ifaces & Ifaces::VALUE == 0 {
                    return Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "the element has no Value",
                    ));
                }
                let (lo, hi) = d.els[id].range.unwrap_or((f64::MIN, f64::MAX));
                let v = value.clamp(lo, hi);
                d.els[id].value = Some(format_number(v));
                Ok(ActPath::Value)
            }
        }
    }

    async fn show_indicator(
        &self,
        session: &str,
        paused: bool,
        _clipboard: bool,
    ) -> Result<(), DriverError> {
        let mut d = self.desk();
        if let Some((other, _)) = &d.indicator
            && other != session
        {
            return Err(DriverError::new(
                ErrorCode::LeaseHeld,
                "another session's takeover is on screen",
            ));
        }
        d.indicator = Some((session.to_string(), paused));
        Ok(())
    }

    async fn set_indicator_paused(&self, session: &str, paused: bool) {
        let mut d = self.desk();
        if let Some((s, p)) = &mut d.indicator
            && s == session
        {
            *p = paused;
        }
    }

    async fn hide_indicator(&self, session: &str) {
        let mut d = self.desk();
        if d.indicator.as_ref().is_some_and(|(s, _)| s == session) {
            d.indicator = None;
            d.baseline = None;
            d.person = None;
        }
    }

    async fn takeover_baseline(&self) {
        let mut d = self.desk();
        d.baseline = Some(d.pointer);
        d.person = None;
    }

    async fn synthetic(
        &self,
        op: SynthOp,
        _window_id: u64,
        stop: StopFlag,
    ) -> Result<SynthOutcome, DriverError> {
        fn stopped(r: Result<PausedReason, ()>, typed: u64) -> SynthOutcome {
            match r {
                Ok(reason) => SynthOutcome::Stopped { reason, typed },
                Err(()) => SynthOutcome::Cancelled { typed },
            }
        }
        match op {
            SynthOp::Move { x, y, duration_ms } => {
                let steps = (duration_ms / 10).max(1) as i32;
                let (sx, sy) = self.desk().pointer;
                for i in 1..=steps {
                    {
                        let mut d = self.desk();
                        if let Some(r) = d.check(&stop) {
                            return Ok(stopped(r, 0));
                        }
                        d.driver_move(sx + (x - sx) * i / steps, sy + (y - sy) * i / steps);
                    }
                    if steps > 1 {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                Ok(SynthOutcome::Done)
            }
            SynthOp::Click {
                x,
                y,
                button,
                count,
            } => {
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    return Ok(stopped(r, 0));
                }
                d.driver_move(x, y);
                d.click_at(x, y, button, count);
                Ok(SynthOutcome::Done)
            }
            SynthOp::Type { text } => {
                let delay = self.desk().typing_delay;
                for (typed, c) in text.chars().enumerate() {
                    let typed = typed as u64;
                    {
                        let mut d = self.desk();
                        if let Some(r) = d.check(&stop) {
                            return Ok(stopped(r, typed));
                        }
                        d.sent.push("key".into());
                        if let Some(f) = d.focused
                            && d.els[f].states.has(State::Editable)
                            && !d.els[f].states.has(State::Secure)
                        {
                            d.els[f].value.get_or_insert_with(String::new).push(c);
                        }
                    }
                    tokio::time::sleep(delay).await;
                }
                Ok(SynthOutcome::Done)
            }
            SynthOp::Keys { keys } => {
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    return Ok(stopped(r, 0));
                }
                for k in &keys {
                    d.held.push(k.clone());
                    d.sent.push("key".into());
                }
                d.keys(&keys);
                d.held.clear();
                Ok(SynthOutcome::Done)
            }
            SynthOp::Scroll {
                x,
                y,
                direction,
                amount,
            } => {
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    return Ok(stopped(r, 0));
                }
                d.driver_move(x, y);
                d.sent.push("wheel".into());
                if let Some(w) = d.window_at(x, y).map(|w| w.window_id) {
                    d.set_status(w, format!("Scrolled {direction} {amount}"));
                }
                Ok(SynthOutcome::Done)
            }
            SynthOp::Drag { from, to } => {
                {
                    let mut d = self.desk();
                    if let Some(r) = d.check(&stop) {
                        return Ok(stopped(r, 0));
                    }
                    d.driver_move(from.0, from.1);
                    d.held.push("button1".into());
                    d.sent.push("button1-press".into());
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    d.held.clear();
                    d.sent.push("button1-release".into());
                    return Ok(stopped(r, 0));
                }
                d.driver_move(to.0, to.1);
                d.held.clear();
                d.sent.push("button1-release".into());
                // Dropping a list row on another swaps their names; dropping it on a field puts
                // its text there.
                let a = d
                    .window_at(from.0, from.1)
                    .cloned()
                    .and_then(|w| d.element_at(&w, from.0, from.1));
                let b = d
                    .window_at(to.0, to.1)
                    .cloned()
                    .and_then(|w| d.element_at(&w, to.0, to.1));
                if let (Some(a), Some(b)) = (a, b)
                    && d.els[a].role == "list_item"
                    && d.els[b].role == "list_item"
                    && d.els[a].parent == d.els[b].parent
                {
                    let (na, nb) = (d.els[a].name.clone(), d.els[b].name.clone());
                    d.els[a].name = nb;
                    d.els[b].name = na;
                } else if let (Some(a), Some(b)) = (a, b)
                    && d.els[b].states.has(State::Editable)
                    && !d.els[b].states.has(State::Secure)
                {
                    let text = d.els[a].name.clone();
                    d.els[b]
                        .value
                        .get_or_insert_with(String::new)
                        .push_str(&text);
                }
                Ok(SynthOutcome::Done)
            }
            SynthOp::Raise { window_id } => {
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    return Ok(stopped(r, 0));
                }
                let Some(i) = d.windows.iter().position(|w| w.window_id == window_id) else {
                    return Err(DriverError::new(
                        ErrorCode::WindowTargetNotFound,
                        "the window is gone",
                    ));
                };
                let w = d.windows.remove(i);
                d.active = w.window_id;
                d.windows.push(w);
                d.sent.push("raise".into());
                Ok(SynthOutcome::Done)
            }
        }
    }

    async fn release_all(&self) {
        let mut d = self.desk();
        if !d.held.is_empty() {
            d.sent.push("release-all".into());
        }
        d.held.clear();
    }

    async fn clipboard_read(&self) -> Result<String, DriverError> {
        Ok(self.desk().clipboard.clone())
    }

    async fn clipboard_write(&self, session: &str, text: String) -> Result<(), DriverError> {
        let mut d = self.desk();
        d.clipboard = text;
        d.clipboard_owner = Some(session.to_string());
        Ok(())
    }

    async fn clipboard_release(&self, session: &str) {
        let mut d = self.desk();
        if d.clipboard_owner.as_deref() == Some(session) {
            d.clipboard_owner = None;
            d.clipboard.clear();
        }
    }

    async fn doctor(&self) -> DoctorReport {
        let caps = CAPABILITIES
            .iter()
            .map(|(name, consent)| {
                let unsupported = name.contains("notification");
                Capability {
                    name: (*name).into(),
                    status: if unsupported {
                        CapStatus::Unsupported
                    } else {
                        CapStatus::Available
                    },
                    reason_code: unsupported.then(|| "no_platform_api".into()),
                    action: unsupported
                        .then(|| nish_proto::doctor::action_for("no_platform_api").into()),
                    consent: *consent,
                }
            })
            .collect();
        DoctorReport::build(
            "mock",
            vec![
                BackendEntry::available("mock", true),
                BackendEntry::not_available(
                    "wayland-portal",
                    false,
                    BackendStatus::Planned,
                    "wayland_portal_not_built",
                ),
            ],
            caps,
            vec![
                Permission {
                    name: "accessibility".into(),
                    status: "granted".into(),
                    reason_code: None,
                    action: None,
                },
                Permission {
                    name: "screen_capture".into(),
                    status: "not_applicable".into(),
                    reason_code: None,
                    action: None,
                },
            ],
            vec![Probe {
                label: "backend".into(),
                status: "ok".into(),
                message: "mock desktop".into(),
            }],
        )
    }
}

fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn fill(rgb: &mut [u8], w: u32, h: u32, r: &Rect, win: &Rect, color: [u8; 3]) {
    let x0 = (r.x - win.x).clamp(0, w as i32) as u32;
    let y0 = (r.y - win.y).clamp(0, h as i32) as u32;
    let x1 = (r.x + r.w - win.x).clamp(0, w as i32) as u32;
    let y1 = (r.y + r.h - win.y).clamp(0, h as i32) as u32;
    for y in y0..y1 {
        for x in x0..x1 {
            let i = ((y * w + x) * 3) as usize;
            rgb[i..i + 3].copy_from_slice(&color);
        }
    }
}

fn encode_png(w: u32, h: u32, rgb: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|e| format!("png header: {e}"))?;
        wr.write_image_data(rgb)
            .map_err(|e| format!("png data: {e}"))?;
    }
    Ok(out)
}
