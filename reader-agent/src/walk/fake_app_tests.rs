//! Walks of a fake application on the other end of a socket pair: a frame holding a tool bar,
//! a list of `items` items and a status bar, answering each read after `delay`, one call at a
//! time as a toolkit's main loop does (or all at once), and counting what it was asked.
//!
//! The tests run one at a time, each on its own runtime, so that their timings (a phase of a
//! second or so against calls of a few milliseconds) leave wide margins on a busy machine.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_proto::model::TruncReason;
use nish_proto::wire::reader::WalkLimits;
use zbus::Connection;
use zbus::export::futures_core::Stream;
use zbus::zvariant::{OwnedObjectPath, Value};

use super::cache::{CACHE_TRIAL, cache_reply};
use super::ctx::BOUNDED_CHILDREN;
use super::ctx::Ctx;
use super::live::{FIRST_LOOK_TOO_MANY, first_look, read_structure};
use nish_atspi::a11y::{A11y, APP_IN_FLIGHT, AppLink, CacheVerdict};
use nish_atspi::agent::connector::Connector;
use nish_atspi::tree::{Arena, Kids, MAX_CHILDREN, Obj, plan};

const FRAME: u32 = 23;
const TOOL_BAR: u32 = 63;
const PUSH_BUTTON: u32 = 43;
const LIST: u32 = 31;
const LIST_ITEM: u32 = 32;
const STATUS_BAR: u32 = 55;

/// What the fake app was asked and how it answered.
#[derive(Debug, Default)]
struct Seen {
    /// Calls answered.
    answered: AtomicUsize,
    /// Calls received and not answered yet, and the most there were at once.
    open: AtomicUsize,
    peak: AtomicUsize,
    /// `GetChildren` calls by path.
    children_of: Mutex<HashMap<String, usize>>,
    /// `GetChildAtIndex` calls by path.
    index_of: Mutex<HashMap<String, usize>>,
    /// `Cache.GetItems` calls.
    cache_asked: AtomicUsize,
}

/// One of the fake app's objects.
struct Object {
    role: u32,
    name: String,
    /// Its children: a fixed list, or `/i/0` ... `/i/{n-1}` (the list's items).
    fixed: Vec<&'static str>,
    items: usize,
}

impl Object {
    fn count(&self) -> usize {
        self.fixed.len() + self.items
    }

    fn child(&self, i: usize) -> String {
        match self.fixed.get(i) {
            Some(c) => c.to_string(),
            None => format!("/i/{i}"),
        }
    }
}

/// The fake app's objects.
fn object(path: &str, items: usize) -> Option<Object> {
    let o = |role, name: &str, fixed: Vec<&'static str>, items| Object {
        role,
        name: name.to_string(),
        fixed,
        items,
    };
    Some(match path {
        "/f" => o(FRAME, "Big", vec!["/tools", "/list", "/status"], 0),
        "/tools" => o(TOOL_BAR, "Tools", vec!["/tools/b"], 0),
        "/tools/b" => o(PUSH_BUTTON, "Refresh", vec![], 0),
        "/list" => o(LIST, "Items", vec![], items),
        "/status" => o(STATUS_BAR, "Status", vec![], 0),
        p => {
            let i: usize = p.strip_prefix("/i/")?.parse().ok()?;
            (i < items).then_some(())?;
            o(LIST_ITEM, &format!("Item {i}"), vec![], 0)
        }
    })
}

/// Answers one call (`None`: the object or method is unknown).
async fn answer(conn: &Connection, msg: &zbus::Message, items: usize, seen: &Seen) {
    let h = msg.header();
    let path = h.path().map(|p| p.as_str().to_string()).unwrap_or_default();
    let member = h
        .member()
        .map(|m| m.as_str().to_string())
        .unwrap_or_default();
    let obj = object(&path, items);
    let me = conn
        .unique_name()
        .map(|n| n.to_string())
        .unwrap_or_default();
    let r = match (member.as_str(), obj) {
        ("GetRole", Some(o)) => conn.reply(&h, &(o.role,)).await,
        ("GetState", Some(_)) => conn.reply(&h, &(vec![0u32, 0u32],)).await,
        ("GetInterfaces", Some(_)) => conn.reply(&h, &(vec!["org.a11y.atspi.Accessible"],)).await,
        ("GetAll", Some(o)) => {
            let mut all: HashMap<&str, Value<'_>> = HashMap::new();
            all.insert("Name", Value::from(o.name.clone()));
            all.insert("ChildCount", Value::from(o.count() as i32));
            conn.reply(&h, &(all,)).await
        }
        ("Get", Some(o)) => conn.reply(&h, &(Value::from(o.count() as i32),)).await,
        ("GetChildren", Some(o)) => {
            *seen.children_of.lock().unwrap().entry(path).or_default() += 1;
            let list: Vec<(String, OwnedObjectPath)> = (0..o.count())
                .map(|i| (me.clone(), OwnedObjectPath::try_from(o.child(i)).unwrap()))
                .collect();
            conn.reply(&h, &(list,)).await
        }
        ("GetChildAtIndex", Some(o)) => {
            *seen.index_of.lock().unwrap().entry(path).or_default() += 1;
            let (i,): (i32,) = msg.body().deserialize().unwrap();
            let k = OwnedObjectPath::try_from(o.child(i as usize)).unwrap();
            conn.reply(&h, &((me, k),)).await
        }
        ("GetItems", _) => {
            seen.cache_asked.fetch_add(1, Ordering::SeqCst);
            // A cache that takes longer than any walk, then lists nothing.
            tokio::time::sleep(Duration::from_secs(5)).await;
            let none: Vec<((String, OwnedObjectPath),)> = Vec::new();
            conn.reply(&h, &(none,)).await
        }
        _ => {
            conn.reply_dbus_error(&h, zbus::fdo::Error::UnknownMethod("no".into()))
                .await
        }
    };
    // A walk that gave up may have dropped its end of the link.
    if r.is_ok() {
        seen.answered.fetch_add(1, Ordering::SeqCst);
    }
}

/// A fake app on one end of a socket pair; returns the link to it.
async fn fake_app(items: usize, delay: Duration, one_at_a_time: bool) -> (AppLink, Arc<Seen>) {
    let (a, b) = tokio::net::UnixStream::pair().expect("socket pair");
    let guid = zbus::Guid::generate();
    let (server, client) = tokio::join!(
        async {
            zbus::connection::Builder::unix_stream(a)
                .server(guid)
                .unwrap()
                .p2p()
                .build()
                .await
        },
        async {
            zbus::connection::Builder::unix_stream(b)
                .p2p()
                .build()
                .await
        },
    );
    let (server, client) = (server.expect("server"), client.expect("client"));
    let seen = Arc::new(Seen::default());
    let s2 = seen.clone();
    // Made before the link is handed out: a stream sees only the messages that arrive after it
    // exists, and the walk may call at once (a stream made in the task could miss that call).
    let mut stream = zbus::MessageStream::from(&server);
    tokio::spawn(async move {
        while let Some(Ok(msg)) =
            std::future::poll_fn(|cx| Pin::new(&mut stream).poll_next(cx)).await
        {
            if msg.message_type() != zbus::message::Type::MethodCall {
                continue;
            }
            let (conn, seen) = (server.clone(), s2.clone());
            let open = seen.open.fetch_add(1, Ordering::SeqCst) + 1;
            seen.peak.fetch_max(open, Ordering::SeqCst);
            let work = async move {
                tokio::time::sleep(delay).await;
                // Answered from here on: the reader may send its next call once it has the
                // reply.
                seen.open.fetch_sub(1, Ordering::SeqCst);
                answer(&conn, &msg, items, &seen).await;
            };
            if one_at_a_time {
                work.await;
            } else {
                tokio::spawn(work);
            }
        }
    });
    let link = AppLink {
        bus_name: ":fake.1".into(),
        conn: client,
        p2p: true,
    };
    (link, seen)
}

fn ctx(link: AppLink, a11y: &A11y, phase: Duration) -> Arc<Ctx> {
    let start = Instant::now();
    let c = Ctx {
        flights: a11y.flights(&link.bus_name),
        link,
        actions: a11y.action_names(),
        stable_actions: false,
        get_all: true,
        start,
        deadline: start + phase * 2,
        phase_end_us: std::sync::atomic::AtomicU64::new(0),
        dead: AtomicBool::new(false),
        out_of_time: AtomicBool::new(false),
        broken: AtomicBool::new(false),
        bounded: AtomicBool::new(false),
        calls: AtomicUsize::new(0),
    };
    c.phase_until(start + phase);
    Arc::new(c)
}

/// The frame alone, its children to be read.
fn frame_arena(bus: &str) -> (Arena, u32) {
    let mut arena = Arena::new();
    let root = arena.insert(Obj::from_atspi(bus, "/f", FRAME, "Big", &[0, 0], &[], 3));
    (arena, root)
}

/// Runs one test's body on its own runtime, never beside another of these tests.
fn run(body: impl std::future::Future<Output = ()>) {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(body);
}

fn limits() -> WalkLimits {
    WalkLimits {
        budget_ms: 60_000,
        ..WalkLimits::default()
    }
}

fn paths(arena: &Arena, p: &nish_atspi::tree::Plan) -> Vec<String> {
    p.rows
        .iter()
        .map(|r| arena.get(r.key).path.clone())
        .collect()
}

#[test]
fn a_huge_list_is_read_by_index_only_as_far_as_the_cap() {
    run(huge_list());
}

async fn huge_list() {
    let items = 50_000;
    let (link, seen) = fake_app(items, Duration::ZERO, false).await;
    let a11y = A11y::new(Connector::Direct);
    let bus = link.bus_name.clone();
    let c = ctx(link, &a11y, Duration::from_secs(60));
    let (mut arena, root) = frame_arena(&bus);
    let t0 = Instant::now();
    let read = read_structure(&c, &mut arena, root, &limits()).await;
    assert!(
        !c.stopped(),
        "dead {:?} out of time {:?} broken {:?} after {:?}",
        c.dead,
        c.out_of_time,
        c.broken,
        t0.elapsed()
    );
    let children_of = seen.children_of.lock().unwrap().clone();
    assert_eq!(
        children_of.get("/list"),
        None,
        "a list of {items} is never asked for all its children"
    );
    assert_eq!(
        children_of.get("/f"),
        Some(&1),
        "a short list is: {children_of:?}"
    );
    assert_eq!(
        seen.index_of.lock().unwrap().get("/list"),
        Some(&MAX_CHILDREN),
        "the list's first children, one index at a time"
    );
    assert_eq!(read, 4 + MAX_CHILDREN);
    let list = arena.key(&bus, "/list").unwrap();
    assert!(matches!(
        &arena.get(list).kids,
        Kids::Cut(v, TruncReason::MaxElements) if v.len() == MAX_CHILDREN
    ));
    let p = plan(&arena, root, &limits(), false, TruncReason::TimeBudget);
    let got = paths(&arena, &p);
    assert_eq!(got.len(), 5 + MAX_CHILDREN);
    assert_eq!(got.last().unwrap(), "/status");
    assert_eq!(p.truncated, Some(TruncReason::MaxElements));

    // Fewer rows allowed: only as many children are asked for.
    let (link, seen) = fake_app(items, Duration::ZERO, false).await;
    let c = ctx(link, &a11y, Duration::from_secs(60));
    let (mut arena, root) = frame_arena(&bus);
    let small = WalkLimits {
        max_elements: 40,
        ..limits()
    };
    read_structure(&c, &mut arena, root, &small).await;
    assert_eq!(seen.index_of.lock().unwrap().get("/list"), Some(&(40 - 4)));
    let p = plan(&arena, root, &small, false, TruncReason::TimeBudget);
    assert_eq!(p.rows.len(), 40);
    assert_eq!(p.truncated, Some(TruncReason::MaxElements));
}

#[test]
fn calls_in_flight_to_one_app_stay_bounded_over_all_its_walks() {
    run(in_flight());
}

async fn in_flight() {
    // An app answering everything at once after 3 ms: only the reader limits what it has in
    // flight. Three walks of it at the same time.
    let (link, seen) = fake_app(3000, Duration::from_millis(3), false).await;
    let a11y = A11y::new(Connector::Direct);
    let walks: Vec<_> = (0..3)
        .map(|_| {
            let c = ctx(link.clone(), &a11y, Duration::from_secs(60));
            let bus = link.bus_name.clone();
            tokio::spawn(async move {
                let (mut arena, root) = frame_arena(&bus);
                read_structure(&c, &mut arena, root, &limits()).await;
                assert!(
                    !c.stopped(),
                    "a walk of an app that answers within 3 ms gave up"
                );
                c.calls.load(Ordering::SeqCst)
            })
        })
        .collect();
    let mut sent = 0;
    for w in walks {
        sent += w.await.unwrap();
    }
    assert!(sent > 3 * 5 * MAX_CHILDREN, "{sent} calls");
    // What the app had to answer at once, counted by the app.
    let peak = seen.peak.load(Ordering::SeqCst);
    assert!(peak <= APP_IN_FLIGHT, "{peak} calls in flight");
    assert!(
        peak > APP_IN_FLIGHT / 2,
        "the walks do run calls side by side: {peak}"
    );
}

#[test]
fn a_slow_app_gives_the_rows_read_in_time_and_is_left_little_to_answer() {
    run(slow_app());
}

async fn slow_app() {
    // One call at a time, 5 ms each: 1,000 items would take 25 s; the phase is 1.5 s.
    let phase = Duration::from_millis(1500);
    let (link, seen) = fake_app(50_000, Duration::from_millis(5), true).await;
    let a11y = A11y::new(Connector::Direct);
    let bus = link.bus_name.clone();
    let c = ctx(link, &a11y, phase);
    let (mut arena, root) = frame_arena(&bus);
    read_structure(&c, &mut arena, root, &limits()).await;
    let sent = c.calls.load(Ordering::SeqCst);
    let answered = seen.answered.load(Ordering::SeqCst);
    assert!(
        c.start.elapsed() < phase + Duration::from_secs(2),
        "the structure phase ends on time: {:?}",
        c.start.elapsed()
    );
    assert!(!c.dead.load(Ordering::SeqCst), "slow is not dead");
    // What the app still has to answer when the walk gives up.
    assert!(
        sent - answered <= APP_IN_FLIGHT,
        "{} calls left to the app ({sent} sent, {answered} answered)",
        sent - answered
    );
    // The rows read in time, and the numbering goes on after the cut list.
    let p = plan(&arena, root, &limits(), false, TruncReason::TimeBudget);
    let got = paths(&arena, &p);
    assert_eq!(p.truncated, Some(TruncReason::TimeBudget));
    let items = got.iter().filter(|p| p.starts_with("/i/")).count();
    eprintln!(
        "a slow app: {items} items read in time, {} calls left to it",
        sent - answered
    );
    assert!(items >= 1, "{got:?}");
    assert_eq!(got[..5], ["/f", "/tools", "/tools/b", "/list", "/i/0"]);
    assert_eq!(
        got.last().unwrap(),
        "/status",
        "the status bar after the cut list"
    );
    let list = arena.key(&bus, "/list").unwrap();
    assert!(matches!(
        arena.get(list).kids,
        Kids::Cut(_, TruncReason::TimeBudget)
    ));
}

#[test]
fn a_cache_too_slow_for_the_walk_is_skipped_for_a_while() {
    run(slow_cache());
}

async fn slow_cache() {
    let (link, seen) = fake_app(10, Duration::ZERO, false).await;
    let a11y = A11y::new(Connector::Direct);
    let bus = link.bus_name.clone();
    assert!(a11y.use_cache(&bus));
    // The walk has the cache's trial left, and more: with less than the trial left it would
    // not ask at all (see `cache_without_its_trial`), and a loaded machine may take a while
    // between making the walk's context and asking. The cache takes 5 s whatever the walk's
    // time.
    let phase = CACHE_TRIAL + Duration::from_millis(1000);
    let c = ctx(link, &a11y, phase);
    let t0 = Instant::now();
    assert!(cache_reply(&a11y, &c).await.is_none());
    assert!(
        t0.elapsed() < phase + Duration::from_secs(1),
        "{:?}",
        t0.elapsed()
    );
    // The fake app counts the call when its own task reads it, which a loaded runtime may
    // run after the walk gave up waiting.
    let counted = Instant::now();
    while seen.cache_asked.load(Ordering::SeqCst) == 0 && counted.elapsed() < Duration::from_secs(3)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(seen.cache_asked.load(Ordering::SeqCst), 1);
    assert!(!c.dead.load(Ordering::SeqCst));
    assert!(!a11y.use_cache(&bus), "the next walks read live");
    assert_eq!(a11y.cache_verdict(&bus), CacheVerdict::TooSlow);
}

#[test]
fn a_walk_with_less_than_the_caches_trial_left_neither_asks_nor_judges_it() {
    run(cache_without_its_trial());
}

async fn cache_without_its_trial() {
    // A walk whose frame search took most of the structure's share (the app was busy): what
    // is left would tell how busy the app is, not how large its cache is.
    let (link, seen) = fake_app(10, Duration::ZERO, false).await;
    let a11y = A11y::new(Connector::Direct);
    let bus = link.bus_name.clone();
    let c = ctx(link, &a11y, CACHE_TRIAL - Duration::from_millis(100));
    let t0 = Instant::now();
    assert!(cache_reply(&a11y, &c).await.is_none());
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(
        seen.cache_asked.load(Ordering::SeqCst),
        0,
        "the app is not kept busy with a reply nobody waits for"
    );
    assert!(!c.dead.load(Ordering::SeqCst));
    assert!(!c.is_bounded());
    assert_eq!(
        a11y.cache_verdict(&bus),
        CacheVerdict::Unknown,
        "not judged: the next walk asks again"
    );
    // The walk reads live in the time it has: the list's first items and the status bar.
    let (mut arena, root) = frame_arena(&bus);
    read_structure(&c, &mut arena, root, &limits()).await;
    let p = plan(&arena, root, &limits(), false, c.reason());
    let got = paths(&arena, &p);
    assert_eq!(got.last().unwrap(), "/status", "{got:?}");
    assert!(got.iter().any(|p| p == "/i/0"), "{got:?}");
}

#[test]
fn a_default_walk_with_a_quick_frame_search_gives_the_cache_its_trial() {
    let default = Duration::from_millis(nish_proto::model::WALK_BUDGET_MS);
    let structure = default * super::STRUCTURE_SHARE / 100;
    // A frame search and a first look of a few calls each leave the cache its trial.
    assert!(
        CACHE_TRIAL + Duration::from_millis(300) <= structure,
        "{CACHE_TRIAL:?} of {structure:?}"
    );
}

#[test]
fn a_first_look_finds_a_huge_container_and_the_walk_goes_on_bounded() {
    run(first_look_then_bounded());
}

async fn first_look_then_bounded() {
    let (link, seen) = fake_app(5000, Duration::ZERO, false).await;
    let a11y = A11y::new(Connector::Direct);
    let bus = link.bus_name.clone();
    let c = ctx(link, &a11y, Duration::from_secs(5));
    let (mut arena, root) = frame_arena(&bus);
    let announced = first_look(&c, &mut arena, root).await;
    assert!(announced >= FIRST_LOOK_TOO_MANY, "{announced}");
    // The look read the frame's children and their counts, not the list's items.
    assert!(arena.key(&bus, "/status").is_some());
    assert!(arena.len() < 20, "{} objects", arena.len());
    // Bounded from here: the list gives its first BOUNDED_CHILDREN items, one index at a time,
    // and the status bar after it is read.
    c.bounded.store(true, Ordering::SeqCst);
    read_structure(&c, &mut arena, root, &limits()).await;
    let p = plan(&arena, root, &limits(), false, c.reason());
    assert_eq!(p.truncated, Some(TruncReason::AppTooLarge));
    let got = paths(&arena, &p);
    let items = got.iter().filter(|p| p.starts_with("/i/")).count();
    assert_eq!(items, BOUNDED_CHILDREN);
    assert_eq!(got.last().unwrap(), "/status", "what follows the list");
    let list = arena.key(&bus, "/list").unwrap();
    assert!(matches!(
        arena.get(list).kids,
        Kids::Cut(_, TruncReason::AppTooLarge)
    ));
    assert_eq!(
        seen.children_of.lock().unwrap().get("/list"),
        None,
        "never the whole list of thousands"
    );
    assert!(
        seen.index_of
            .lock()
            .unwrap()
            .get("/list")
            .copied()
            .unwrap_or(0)
            <= BOUNDED_CHILDREN
    );
}
