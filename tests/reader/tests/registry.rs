//! The standing application list ([`A11y::standing_order`]) on a real D-Bus daemon, with a stand-in
//! registry that owns `org.a11y.atspi.Registry`, answers `GetChildren` on the desktop with a
//! list the test sets, and sends `ChildrenChanged` when the test says so.
//!
//! The list stands only while the registry has said nothing since it was asked for: a
//! signal of the registry ends it, a signal sent by anyone else does not make it stand longer,
//! and a registry that started again (another unique name) is watched anew before its list
//! stands. The stand-in also changes its list without a signal, to show the list answered is the
//! standing one (and so that an "ended" below means the signal ended it).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_atspi::a11y::{A11y, REGISTRY, ROOT_PATH, STANDING_ORDER_MAX_AGE};
use nish_atspi::agent::connector::Connector;
use nish_testdesk::Desktop;
use zbus::zvariant::OwnedObjectPath;

mod common;
use common::{connect, drain, emit};

/// `ChildrenChanged` on the desktop, as the registry sends it when an application registers or
/// leaves.
async fn children_changed(from: &zbus::Connection) {
    emit(from, ROOT_PATH, "ChildrenChanged").await;
}

/// The registry's children, as the test sets them.
type Children = Arc<Mutex<Vec<String>>>;

struct StandRegistry {
    children: Children,
}

#[zbus::interface(name = "org.a11y.atspi.Accessible")]
impl StandRegistry {
    #[zbus(name = "GetChildren")]
    fn get_children(&self) -> Vec<(String, OwnedObjectPath)> {
        let root = OwnedObjectPath::try_from(ROOT_PATH).expect("the root path");
        self.children
            .lock()
            .expect("children")
            .iter()
            .map(|n| (n.clone(), root.clone()))
            .collect()
    }
}

/// A stand-in registry on the bus at `addr` that lists `children`; an error while the name
/// is still owned.
async fn registry(addr: &str, children: &Children) -> zbus::Result<zbus::Connection> {
    let c = connect(addr).await;
    c.object_server()
        .at(
            ROOT_PATH,
            StandRegistry {
                children: children.clone(),
            },
        )
        .await?;
    c.request_name_with_flags(REGISTRY, zbus::fdo::RequestNameFlags::DoNotQueue.into())
        .await?;
    Ok(c)
}

/// Asks the registry until the answer stands (the watch's match is added in the background
/// after the first answer), within 10 s.
async fn standing_after_asking(a11y: &A11y) -> Vec<String> {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        a11y.apps().await.expect("the registry answers");
        if let Some((order, _)) = a11y.standing_order() {
            return order;
        }
        assert!(Instant::now() < end, "the registry's answer never stood");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the standing list has ended, within 10 s.
async fn ended(a11y: &A11y, what: &str) {
    let end = Instant::now() + Duration::from_secs(10);
    while a11y.standing_order().is_some() {
        assert!(
            Instant::now() < end,
            "{what}: the standing list did not end"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[test]
fn the_registrys_signal_ends_the_standing_list_and_a_new_registry_is_watched_anew() {
    let desk = Desktop::builder()
        .window_manager(false)
        .atspi(false)
        .start()
        .expect("start the desktop");
    let addr = desk.session_bus_address().to_string();
    let rt = nish_testdesk::runtime().expect("a runtime");
    rt.block_on(async {
        let first = connect(&addr).await;
        let first_name = first.unique_name().expect("a name").to_string();
        let children: Children = Arc::new(Mutex::new(vec![first_name.clone()]));
        let reg = registry(&addr, &children)
            .await
            .expect("the stand-in registry");
        let reader = connect(&addr).await;
        let a11y = A11y::on_bus(reader.clone(), Connector::Direct);
        a11y.apps().await.expect("the registry answers");
        for _ in 0..4 {
            assert!(
                a11y.standing_order().is_none(),
                "the first answer does not stand: the registry's signals were not watched yet"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(standing_after_asking(&a11y).await, vec![first_name.clone()]);

        // The registry lists another application but says nothing: the standing list stands.
        let second = connect(&addr).await;
        let second_name = second.unique_name().expect("a name").to_string();
        children.lock().unwrap().push(second_name.clone());
        drain(&reg, &reader).await;
        let (standing, _) = a11y.standing_order().expect("nothing said: still standing");
        assert_eq!(standing, vec![first_name.clone()]);

        // Anyone else's ChildrenChanged on a desktop path is not the registry's word.
        children_changed(&second).await;
        drain(&second, &reader).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            a11y.standing_order().is_some(),
            "another sender's signal is not watched"
        );

        // The registry's own signal ends it; the next answer stands again, with both.
        children_changed(&reg).await;
        ended(&a11y, "the registry's signal").await;
        let both = vec![first_name.clone(), second_name.clone()];
        assert_eq!(standing_after_asking(&a11y).await, both);
        let standing_at = Instant::now();

        // The registry starts again (another unique name): its list does not stand until it is
        // watched, and then its signals end it.
        reg.close().await.expect("the old registry leaves");
        // A registry that stopped sends nothing more: what stood of it ends by its age.
        ended(&a11y, "the old registry left").await;
        let age = standing_at.elapsed();
        assert!(
            age <= STANDING_ORDER_MAX_AGE + Duration::from_millis(500),
            "standing {age:?} after the registry's last answer"
        );
        let restarted: Children = Arc::new(Mutex::new(vec![second_name.clone()]));
        let end = Instant::now() + Duration::from_secs(10);
        let reg2 = loop {
            match registry(&addr, &restarted).await {
                Ok(c) => break c,
                Err(_) if Instant::now() < end => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("the registry's name was not freed: {e}"),
            }
        };
        assert_ne!(reg2.unique_name(), first.unique_name());
        a11y.apps().await.expect("the new registry answers");
        // Nor later, once the watch is in force (by far within the wait): that answer came
        // before it, so a change between the two would go unseen.
        for _ in 0..4 {
            assert!(
                a11y.standing_order().is_none(),
                "a new registry's first answer does not stand: its signals were not watched yet"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            standing_after_asking(&a11y).await,
            vec![second_name.clone()]
        );
        children_changed(&reg2).await;
        ended(&a11y, "the new registry's signal").await;
    });
}
