//! A PipeWire connection for the reader that can see one stream and nothing else, made as the
//! desktop portal makes one for a sandboxed app (`OpenPipeWireRemote`).
//!
//! PipeWire gives a connection of the person's own, unsandboxed programs every right over
//! every object: the microphone, the cameras, every other stream. Before the broker hands the
//! connection over, it speaks on it itself: it finds its own client object (by its process id,
//! which PipeWire reads from the socket, and a random name it gave itself) and the client-node
//! factory, and narrows that client's rights to reading the core, the factory and the one
//! stream node (every other object, and every object made later, hidden). Then it lets go of
//! its side of the connection and hands the socket on; the reader's libpipewire says hello on
//! it again, with the rights left as the broker set them.

use std::cell::RefCell;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::rc::Rc;
use std::time::Duration;

use pipewire as pw;
use pw::permissions::{Permission, PermissionFlags};
use pw::types::ObjectType;

/// Longest the broker speaks with PipeWire to narrow a connection.
pub const NARROW_WAIT: Duration = Duration::from_secs(2);

/// The global ids found in the registry.
#[derive(Default)]
struct Found {
    clients: Vec<u32>,
    factory: Option<u32>,
    synced: bool,
    narrowed: bool,
    failed: bool,
    /// PipeWire's error code, when it sent one.
    error: Option<i32>,
}

/// Narrows the connection `stream` to reading the stream node `node` (see the module
/// documentation) and returns the socket to hand over. Blocking.
pub fn narrowed(stream: UnixStream, node: u32) -> Result<OwnedFd, String> {
    let keep = OwnedFd::from(stream.try_clone().map_err(|e| e.to_string())?);
    pw::init();
    let name = format!("nish-driver capture {}", crate::kwin_scene::random_hex()?);
    let pid = std::process::id().to_string();
    let props = || {
        pw::properties::properties! {
            *pw::keys::APP_NAME => name.as_str(),
            *pw::keys::APP_PROCESS_BINARY => "nish-driver",
            *pw::keys::APP_PROCESS_USER => "nish-driver",
            *pw::keys::APP_PROCESS_HOST => "localhost",
        }
    };
    let mainloop = pw::main_loop::MainLoopRc::new(None).map_err(|e| e.to_string())?;
    let context =
        pw::context::ContextRc::new(&mainloop, Some(props())).map_err(|e| e.to_string())?;
    let core = context
        .connect_fd_rc(OwnedFd::from(stream), Some(props()))
        .map_err(|e| e.to_string())?;
    let registry = core.get_registry_rc().map_err(|e| e.to_string())?;
    let found = Rc::new(RefCell::new(Found::default()));

    let f = found.clone();
    let (want_name, want_pid) = (name.clone(), pid.clone());
    let _registry_listener = registry
        .add_listener_local()
        .global(move |g| {
            let prop = |k: &str| g.props.and_then(|p| p.get(k).map(str::to_string));
            match g.type_ {
                ObjectType::Client
                    if prop(*pw::keys::SEC_PID).as_deref() == Some(want_pid.as_str())
                        && prop(*pw::keys::APP_NAME).as_deref() == Some(want_name.as_str()) =>
                {
                    f.borrow_mut().clients.push(g.id)
                }
                ObjectType::Factory
                    if prop(*pw::keys::FACTORY_NAME).as_deref() == Some("client-node") =>
                {
                    f.borrow_mut().factory = Some(g.id)
                }
                _ => {}
            }
        })
        .register();

    let (f, ml) = (found.clone(), mainloop.clone());
    let first = core.sync(0).map_err(|e| e.to_string())?;
    let second = Rc::new(RefCell::new(None));
    let s2 = second.clone();
    let _core_listener = core
        .add_listener_local()
        .done(move |id, seq| {
            if id != pw::core::PW_ID_CORE {
                return;
            }
            if Some(seq) == *s2.borrow() {
                f.borrow_mut().narrowed = true;
                ml.quit();
            } else if seq == first {
                f.borrow_mut().synced = true;
                ml.quit();
            }
        })
        .error({
            let (f, ml) = (found.clone(), mainloop.clone());
            move |_, _, res, _| {
                let mut g = f.borrow_mut();
                g.failed = true;
                g.error = Some(res);
                ml.quit();
            }
        })
        .register();
    let ml = mainloop.clone();
    let timer = mainloop.loop_().add_timer(move |_| ml.quit());
    timer.update_timer(Some(NARROW_WAIT), None);

    mainloop.run();
    let (client, factory) = {
        let g = found.borrow();
        if g.failed || !g.synced {
            return Err("PipeWire did not list its objects in time".into());
        }
        match (g.clients.as_slice(), g.factory) {
            ([c], Some(f)) => (*c, f),
            ([_], None) => return Err("PipeWire offers no client-node factory".into()),
            _ => return Err("the broker's own PipeWire client was not found once".into()),
        }
    };
    let global = pw::registry::GlobalObject::<pw::properties::PropertiesBox> {
        id: client,
        permissions: PermissionFlags::empty(),
        type_: ObjectType::Client,
        version: 3,
        props: None,
    };
    let proxy: pw::client::Client = registry.bind(&global).map_err(|e| e.to_string())?;
    // The objects kept first: PipeWire applies the entries in order, and an object with no entry
    // of its own that the default hides is unbound at once (the core among them, which would end
    // the connection). Then the default: everything else hidden, now and later. As the desktop
    // portal does: the core read, written and called (a stream is made through it), the
    // client-node factory seen, the stream's node read.
    proxy.update_permissions(&[
        Permission::new(
            pw::core::PW_ID_CORE,
            PermissionFlags::R | PermissionFlags::W | PermissionFlags::X,
        ),
        Permission::new(factory, PermissionFlags::R),
        Permission::new(node, PermissionFlags::R),
        Permission::new(pw::constants::ID_ANY, PermissionFlags::empty()),
    ]);
    // A sequence number of its own: the first sync's done must not be taken for this one's.
    *second.borrow_mut() = Some(core.sync(1).map_err(|e| e.to_string())?);
    timer.update_timer(Some(NARROW_WAIT), None);
    mainloop.run();
    if found.borrow().failed || !found.borrow().narrowed {
        return Err(match found.borrow().error {
            Some(res) => format!("PipeWire refused the narrowed rights (error {res})"),
            None => "PipeWire did not confirm the narrowed rights in time".into(),
        });
    }
    // The broker's libpipewire closes its descriptor when it is dropped; the connection lives
    // on in `keep`, whose other end PipeWire still serves with the rights just set.
    drop(proxy);
    Ok(keep)
}
